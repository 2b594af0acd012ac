package commands

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/luashape"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// scriptOps runs a recognised script's quorum operations for one call: it
// implements luashape.Ops over the engine, for the session that sent it.
// A grant it makes is kept, so that the handler can give it back if the
// reply cannot reach the client (see eval).
type scriptOps struct {
	eng  Engine
	k    *keeper
	sess *proxy.Session
	pub  Publisher
	// grants are the drop-in locks live on this proxy (see dropinGrants);
	// nil records nothing.
	grants *dropinGrants

	leases   []*quorum.Lease // the grants this call made (an acquire of several keys, each with its own value, makes one per key)
	semLease *quorum.Lease
}

var (
	_ luashape.Ops   = (*scriptOps)(nil)
	_ luashape.RWOps = (*scriptOps)(nil)
)

// Acquire takes keys all or none, holding value: with SET NX's rule (a key
// that holds value already is refused) unless the script is re-entrant.
func (o *scriptOps) Acquire(ctx context.Context, keys []string, value string, ttl time.Duration, reentrant bool) (bool, error) {
	if len(value) == 0 || len(value) > MaxTokenLen {
		return false, dropinRefused("a lock's value must be 1 to %d bytes", MaxTokenLen)
	}
	prim := quorum.SetNX
	if reentrant {
		prim = quorum.Lock
	}
	lease, err := o.eng.Acquire(ctx, quorum.Request{Primitive: prim, Resources: keys, TTL: ttl, Token: value})
	if err != nil || lease == nil {
		return false, notGranted(err)
	}
	v, ok := validity(ctx, lease, o.eng.Abandon)
	if !ok {
		return false, nil
	}
	o.leases = append(o.leases, lease)
	if o.grants != nil {
		o.grants.add(keys, value, time.Now().Add(time.Duration(v)*time.Millisecond))
	}
	return true, nil
}

// state tells, after a release or extension that did not find value on a
// quorum, whether the first key is free or another value's.
func (o *scriptOps) state(ctx context.Context, key string) (luashape.State, error) {
	li, err := o.eng.Info(ctx, quorum.Lock, key)
	if err != nil {
		return 0, err
	}
	if li.Held {
		return luashape.Other, nil
	}
	return luashape.Absent, nil
}

// Release deletes exactly the grant of value on each key (see
// the Release of a quorum.SetNX lease: a late delete never removes a later holder's
// key with the same value).
func (o *scriptOps) Release(ctx context.Context, keys []string, value string) (luashape.State, error) {
	defer o.k.forgetDropin(o.sess, keys, value)
	if o.grants != nil {
		defer o.grants.remove(keys, value)
	}
	// A grant of this call that is released (an acquire of several keys
	// rolled back) is not checked or given back with the reply.
	o.leases = slices.DeleteFunc(o.leases, func(l *quorum.Lease) bool {
		return l.Token == value && slices.ContainsFunc(l.Resources, func(r string) bool { return slices.Contains(keys, r) })
	})
	all := true
	first := ""
	for _, key := range keys {
		held, err := o.eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: value})
		if err != nil {
			return 0, err
		}
		if !held && all {
			all, first = false, key
		}
	}
	if all {
		return luashape.Mine, nil
	}
	return o.state(ctx, first)
}

// Extend sets a new ttl on keys that hold value.
func (o *scriptOps) Extend(ctx context.Context, keys []string, value string, ttl time.Duration) (luashape.State, error) {
	v, err := o.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: keys, Token: value}, ttl)
	if err != nil {
		return 0, err
	}
	if v > 0 {
		if o.grants != nil {
			o.grants.add(keys, value, time.Now().Add(v))
		}
		return luashape.Mine, nil
	}
	return o.state(ctx, keys[0])
}

// Get reads what a quorum holds at key.
func (o *scriptOps) Get(ctx context.Context, key string) (string, time.Duration, bool, error) {
	li, err := o.eng.Info(ctx, quorum.Lock, key)
	if err != nil {
		return "", 0, false, err
	}
	if !li.Held || li.Holder == "" {
		return "", 0, false, nil
	}
	return li.Holder, li.TTL, true, nil
}

// SemAcquire takes count of the semaphore name's limit permits.
func (o *scriptOps) SemAcquire(ctx context.Context, name string, limit, count int, ttl time.Duration, token string) (bool, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return false, dropinRefused("a semaphore token must be 1 to %d bytes", MaxTokenLen)
	}
	l, err := o.eng.Acquire(ctx, quorum.Request{Primitive: quorum.Semaphore, Resources: []string{name}, Options: quorum.SemaphoreOptions{Limit: limit, Count: count}, TTL: ttl, Token: token})
	if err != nil || l == nil {
		return false, notGranted(err)
	}
	if l.ValidityAt(time.Now()) < time.Millisecond || ctx.Err() != nil {
		o.eng.Abandon(ctx, l)
		return false, nil
	}
	o.semLease = l
	return true, nil
}

// SemRelease gives back the permits token holds.
func (o *scriptOps) SemRelease(ctx context.Context, name, token string) (luashape.State, error) {
	held, err := o.eng.Release(ctx, &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{name}, Token: token})
	if err != nil || !held {
		return luashape.Absent, err
	}
	return luashape.Mine, nil
}

// SemExtend extends the permits token holds.
func (o *scriptOps) SemExtend(ctx context.Context, name, token string, ttl time.Duration) (luashape.State, error) {
	v, err := o.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{name}, Token: token}, ttl)
	if err != nil || v <= 0 {
		return luashape.Absent, err
	}
	return luashape.Mine, nil
}

// Hold takes one more re-entrant hold of key's lock for owner (a hash
// lock's acquire: free, or owner's already), as RLOCK ... REENTRANT.
func (o *scriptOps) Hold(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	if len(owner) == 0 || len(owner) > MaxTokenLen {
		return false, dropinRefused("a lock's owner must be 1 to %d bytes", MaxTokenLen)
	}
	lease, err := o.eng.Acquire(ctx, quorum.Request{Primitive: quorum.Lock, Resources: []string{key}, TTL: ttl, Token: owner, Options: quorum.LockOptions{Reentrant: true}})
	if err != nil || lease == nil {
		return false, notGranted(err)
	}
	v, ok := validity(ctx, lease, o.eng.Abandon)
	if !ok {
		return false, nil
	}
	o.leases = append(o.leases, lease)
	if o.grants != nil {
		o.grants.add([]string{key}, owner, time.Now().Add(time.Duration(v)*time.Millisecond))
	}
	return true, nil
}

// Unhold takes one of owner's holds of key's lock away (RUNLOCK of a
// re-entrant lock) and reads the holds left.
func (o *scriptOps) Unhold(ctx context.Context, key, owner string) (luashape.State, int, error) {
	held, err := o.eng.Release(ctx, &quorum.Lease{Primitive: quorum.Lock, Resources: []string{key}, Token: owner})
	if err != nil {
		return 0, 0, err
	}
	if !held {
		st, err := o.state(ctx, key)
		return st, 0, err
	}
	li, err := o.eng.Info(ctx, quorum.Lock, key)
	if err != nil {
		return 0, 0, err
	}
	left := 0
	if li.Held && li.Holder == owner {
		left = li.Holds
	}
	if left == 0 && o.grants != nil {
		o.grants.remove([]string{key}, owner)
	}
	return luashape.Mine, left, nil
}

// HoldExtend sets a new ttl on owner's lock at key (every hold).
func (o *scriptOps) HoldExtend(ctx context.Context, key, owner string, ttl time.Duration) (luashape.State, error) {
	v, err := o.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Lock, Resources: []string{key}, Token: owner}, ttl)
	if err != nil {
		return 0, err
	}
	if v > 0 {
		if o.grants != nil {
			o.grants.add([]string{key}, owner, time.Now().Add(v))
		}
		return luashape.Mine, nil
	}
	return o.state(ctx, key)
}

// Delete deletes the locks at keys whatever holds them, as DEL does.
func (o *scriptOps) Delete(ctx context.Context, keys []string) ([]bool, error) {
	defer o.k.forgetDropin(o.sess, keys, "")
	out := make([]bool, len(keys))
	for i, key := range keys {
		held, err := o.eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: ""})
		if err != nil {
			return nil, err
		}
		out[i] = held
	}
	if o.grants != nil {
		o.grants.removeAny(keys)
	}
	return out, nil
}

// RWState reads key's read-write lock (a sorted-set lock's state, see
// luashape.ZLock) as a quorum agrees on it.
func (o *scriptOps) RWState(ctx context.Context, key, token string) (string, bool, bool, time.Duration, error) {
	li, err := o.eng.Info(ctx, quorum.Lock, key)
	if err != nil || !li.Held {
		return "", false, false, 0, err
	}
	reads := slices.Contains(li.Readers, token)
	others := len(li.Readers) > 1 || (len(li.Readers) == 1 && !reads)
	return li.Holder, reads, others, li.TTL, nil
}

// zacquire takes key's write lock (RLOCK) or a read lock (RRLOCK) for
// token.
func (o *scriptOps) zacquire(ctx context.Context, prim quorum.Primitive, key, token string, ttl time.Duration) (bool, error) {
	if len(token) == 0 || len(token) > MaxTokenLen {
		return false, dropinRefused("a lock's token must be 1 to %d bytes", MaxTokenLen)
	}
	lease, err := o.eng.Acquire(ctx, quorum.Request{Primitive: prim, Resources: []string{key}, TTL: ttl, Token: token})
	if err != nil || lease == nil {
		return false, notGranted(err)
	}
	v, ok := validity(ctx, lease, o.eng.Abandon)
	if !ok {
		return false, nil
	}
	o.leases = append(o.leases, lease)
	if o.grants != nil {
		o.grants.add([]string{key}, token, time.Now().Add(time.Duration(v)*time.Millisecond))
	}
	return true, nil
}

// zrelease releases token's write or read lock of key.
func (o *scriptOps) zrelease(ctx context.Context, prim quorum.Primitive, key, token string) (bool, error) {
	held, err := o.eng.Release(ctx, &quorum.Lease{Primitive: prim, Resources: []string{key}, Token: token})
	if err == nil && held && o.grants != nil {
		o.grants.remove([]string{key}, token)
	}
	return held, err
}

// zextend extends token's write or read lock of key.
func (o *scriptOps) zextend(ctx context.Context, prim quorum.Primitive, key, token string, ttl time.Duration) (bool, error) {
	v, err := o.eng.Extend(ctx, &quorum.Lease{Primitive: prim, Resources: []string{key}, Token: token}, ttl)
	if err != nil || v <= 0 {
		return false, err
	}
	if o.grants != nil {
		o.grants.add([]string{key}, token, time.Now().Add(v))
	}
	return true, nil
}

// WriteAcquire takes key's lock exclusively for token (RLOCK).
func (o *scriptOps) WriteAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return o.zacquire(ctx, quorum.Lock, key, token, ttl)
}

// WriteRelease releases token's write lock (RUNLOCK); live readers keep
// the key.
func (o *scriptOps) WriteRelease(ctx context.Context, key, token string) (bool, error) {
	return o.zrelease(ctx, quorum.Lock, key, token)
}

// WriteExtend extends token's write lock (REXTEND).
func (o *scriptOps) WriteExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return o.zextend(ctx, quorum.Lock, key, token, ttl)
}

// ReadAcquire takes a read lock of key for token (RRLOCK).
func (o *scriptOps) ReadAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return o.zacquire(ctx, quorum.Read, key, token, ttl)
}

// ReadRelease releases token's read lock (RRUNLOCK).
func (o *scriptOps) ReadRelease(ctx context.Context, key, token string) (bool, error) {
	return o.zrelease(ctx, quorum.Read, key, token)
}

// ReadExtend extends token's read lock (RREXTEND).
func (o *scriptOps) ReadExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	return o.zextend(ctx, quorum.Read, key, token, ttl)
}

// Publish delivers a script's PUBLISH to the subscribers on every proxy.
// The lock operation has run: its client waits for the reply of the
// release, not for the message, so a message fewer than a quorum of masters
// took is not an error of the script (the subscribers of this proxy have
// it; the others wake on their retry timers).
//
// A channel outside the user's channel patterns (a tenant's script naming
// another tenant's channel in ARGV) is not published: the lock operation
// the script did stands, and nothing reaches the other tenant's
// subscribers, on any proxy.
func (o *scriptOps) Publish(ctx context.Context, channel, message string) error {
	if o.sess != nil && !o.sess.AllowsChannel(channel) {
		return nil
	}
	if o.pub != nil {
		o.pub.Publish(ctx, channel, message)
	}
	return nil
}

// stillValid reports whether the grant the script made can still be
// relied on at now.
func (o *scriptOps) stillValid(now time.Time) bool {
	for _, l := range o.leases {
		if l.ValidityAt(now) < time.Millisecond {
			return false
		}
	}
	return o.semLease == nil || o.semLease.ValidityAt(now) >= time.Millisecond
}

// giveBack returns the grant the script made (its reply cannot reach the
// client, or the script failed after it).
func (o *scriptOps) giveBack(ctx context.Context) {
	for _, l := range o.leases {
		o.eng.Abandon(ctx, l)
	}
	o.leases = nil
	if o.semLease != nil {
		o.eng.Abandon(ctx, o.semLease)
		o.semLease = nil
	}
}

// notGranted is a drop-in acquire's error: none when too few masters
// answered. One Redis never answers NOQUORUM, and the attempt was rolled
// back, so the client is told what is true and what its code handles: not
// acquired (it tries again). Releases and extensions keep -NOQUORUM: their
// outcome is unknown.
func notGranted(err error) error {
	var qe *quorum.QuorumError
	if errors.As(err, &qe) {
		return nil
	}
	return err
}
