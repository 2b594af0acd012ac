package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// rwKeys are a resource's read-lock keys; the lock key is the resource's
// lock key, shared with writers.
type rwKeys struct {
	lock    string
	readers string // sorted set: reader tokens by expiry (master ms)
	mark    string // a writer waits: new readers queue behind it
	// next and after are the waiting readers (ids by deadline): those
	// admitted as soon as the lock key is free, and those behind a
	// waiting writer (see docs/design/rwlock.md).
	next, after string
	channel     string
	lease       string // the master's lease high-water mark
	owner       string // a drop-in lock's owner key (see ownerKeys): no downgrade
}

func (e *Engine) rwKeys(resource string) rwKeys {
	return rwKeys{
		lock:    e.opts.KeyPrefix + resource,
		readers: e.resMeta(resource, "rw:"+resource),
		mark:    e.resMeta(resource, "rw-w:"+resource),
		next:    e.resMeta(resource, "rw-ra:"+resource),
		after:   e.resMeta(resource, "rw-rb:"+resource),
		channel: e.opts.MetaPrefix + "released:" + resource,
		lease:   e.leaseKey(e.opts.KeyPrefix + resource),
		owner:   e.resMeta(resource, "owner:"+resource),
	}
}

// writerMark is how long a waiting writer's mark keeps new readers out
// after its latest try: two tries' spacing, so that a live writer renews
// it in time and a dead one lets readers in again soon. It is never
// longer than Options.WaiterLife, as tries are at most WaiterLife/4 apart
// (retry).
func (e *Engine) writerMark() time.Duration {
	return 2 * (min(e.opts.RetryDelay+e.opts.RetryJitter, e.maxSleep()) + e.opts.MasterTimeout)
}

// maxSleep is the longest a waiting call sleeps between two tries, whatever
// the retry delay: what its tries write on the masters (its place in a
// fair queue, its waiting entries, a writer's mark) is renewed at least
// that often, so that it can expire soon after the proxy dies.
func (e *Engine) maxSleep() time.Duration { return e.opts.WaiterLife / 4 }

// readAcquire takes a shared (read) lock on one resource: any number of
// readers may hold it at once, no writer (Lock, FairLock) meanwhile, and
// no new reader while a writer waits; a reader that waits goes in the
// next reader phase (see docs/design/rwlock.md), so
// writers cannot starve it either. It returns (lease, nil) when
// granted (the lease has no fences), (nil, nil) when a quorum answered but
// a writer holds or waits (after Wait ran out), and a *QuorumError when
// fewer than a quorum answered on the last try. A caller that cannot
// deliver the lease gives it back with ReadAbandon.
func (e *Engine) readAcquire(ctx context.Context, req Request) (lease *Lease, err error) {
	ls, err := e.requestSet(req, "a read lock")
	if err != nil {
		return nil, err
	}
	rc := &readCall{k: e.rwKeys(ls.given[0])}
	if req.Wait > 0 {
		// The call's id in the waiting readers' sets: the caller's token,
		// or random (the lock token is fresh for every try).
		rc.id = cmp.Or(req.Token, e.rnd.token())
		defer func() {
			last := rc.last
			if last == nil {
				return
			}
			// The reader keeps its place in both sets while it tries,
			// granted or not (a try granted on some masters and rolled
			// back must not lose it to a waiting writer): it leaves them
			// on every master, after the last try there.
			e.follow(ctx, last, &op{name: "read_lock", script: scripts.RWLeave, keys: []string{rc.k.next, rc.k.after, rc.k.lock},
				args: []string{rc.id, rc.k.channel}, timeout: e.releaseTimeout()}, nil, nil)
		}()
	}
	return e.acquireLoop(ctx, req, waiting{channels: []string{rc.k.channel}}, func(token string, tainted *taints, fixed bool) (*Lease, func(), error) {
		return e.readAttempt(ctx, rc, ls.given, token, req.TTL, tainted, fixed)
	})
}

// readCall is one ReadLock call's state across its tries.
type readCall struct {
	k rwKeys
	// id is the call's entry in the waiting readers' sets; "" when the
	// call does not wait.
	id string
	// last is the call's latest try, which its exit follows.
	last *round
	// join is true when the latest try found the reader next on some
	// master (rw_acquire answered 2): the next try asks the masters where
	// it is only after a waiting writer to put it next there too.
	// Masters see the tries in different orders, so a writer's grant may
	// have left the readers of its phase next on some masters and after
	// on others; with a minority of masters down, each reader could then
	// be refused by the one live master that has it after, every waiting
	// writer by the readers next, until their entries lapse.
	join bool
}

// readAttempt is one try: a quorum of masters record the reader within
// the validity, or it is rolled back.
func (e *Engine) readAttempt(ctx context.Context, rc *readCall, resources []string, token string, ttl time.Duration, tainted *taints, fixed bool) (*Lease, func(), error) {
	start := e.now()
	k := rc.k
	args := []string{token, ms(ttl), rc.id, ms(e.writerMark())}
	if rc.join {
		args = append(args, "1")
	}
	r := e.send(ctx, &op{name: "read_lock", script: scripts.RWAcquire, keys: []string{k.lock, k.readers, k.mark, k.lease, k.next, k.after, k.owner},
		args: args, fresh: true}, e.track(token))
	rc.last = r
	granted := func(i int) bool {
		return r.ans[i].err == nil && (r.ans[i].val == int64(1) || r.ans[i].val == int64(2))
	}
	mayHold := func(i int) bool {
		return !errors.Is(r.ans[i].err, errSkippedDown) && (r.ans[i].err != nil || granted(i) || fixed)
	}
	rollback := func() {
		// With the channel: a rollback that leaves the reader set empty
		// frees the key, and waiting writers must hear of it (split
		// tries among live masters, frequent with a minority down, left
		// them to their retry timer).
		e.undo(ctx, r, &op{name: "read_lock", script: scripts.RWRelease, keys: []string{k.lock, k.readers}, args: []string{token, k.channel}},
			mayHold, fixed, tainted)
	}
	t := r.count(grantRule, func(i int, _ any) bool { return granted(i) && !tainted.has(i) })
	if t.verdict != decidedYes {
		rollback()
		rc.join = false
		for i := range e.nodes {
			if r.answered(i) && r.ans[i].err == nil && r.ans[i].val == int64(2) {
				rc.join = true
			}
		}
		return nil, nil, t.refusal(e, "read_lock")
	}
	decided := e.now()
	validity := e.validity(ttl, start, decided)
	if validity <= 0 {
		rollback()
		return nil, nil, nil
	}
	return &Lease{Resources: resources, Token: token, Validity: validity, Start: start, Decided: decided, voters: voters(r, t.counted, nil)}, rollback, nil
}

// readAbandon releases a read lease the caller will not use, in the
// background and whatever happens to ctx.
func (e *Engine) readAbandon(ctx context.Context, l *Lease) {
	if len(l.Resources) != 1 {
		return
	}
	k := e.rwKeys(l.Resources[0])
	e.awaitForRelease(l.Token)
	e.send(ctx, &op{name: "read_unlock", script: scripts.RWRelease, keys: []string{k.lock, k.readers}, args: []string{l.Token, k.channel},
		timeout: e.releaseTimeout()}, nil)
}

// readRelease releases a read lock; its answers are those of Unlock. The
// last reader's release wakes the writers waiting on any proxy.
func (e *Engine) readRelease(ctx context.Context, resource, token string) (held bool, err error) {
	return e.readReleaseUntil(ctx, resource, token, time.Time{}, nil)
}

// readReleaseUntil is readRelease of a lease whose holder knows its
// validity ends at known (zero: unknown), counting note's silent voters
// (nil: none); see releaseUntil and confirm.
func (e *Engine) readReleaseUntil(ctx context.Context, resource, token string, known time.Time, note *grantNote) (held bool, err error) {
	t0 := e.now()
	if _, err := e.lockSet([]string{resource}); err != nil {
		return false, err
	}
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	k := e.rwKeys(resource)
	e.awaitForRelease(token)
	r := e.send(ctx, &op{name: "read_unlock", script: scripts.RWRelease, keys: []string{k.lock, k.readers},
		args: []string{token, k.channel}, timeout: e.releaseTimeout(), keepLate: true}, nil)
	one := func(h any) bool { return h == int64(1) }
	t := r.count(strictRule, func(_ int, v any) bool { h, _, _ := releaseReply(v); return one(h) })
	if t.verdict == noQuorum && e.retryReleases() {
		return e.confirm(ctx, r, releaseGroup(lockGroup(1)), true, "read_unlock", e.releaseUntil(ctx, t0, r, one, known), nil, note)
	}
	return t.verdict == decidedYes, t.err(e, "read_unlock")
}

// readExtend resets the ttl of a read lock; its answers are those of
// Extend.
func (e *Engine) readExtend(ctx context.Context, l *Lease, ttl time.Duration) (validity time.Duration, err error) {
	t0 := e.now()
	resource, token := l.resource(), l.Token
	if _, err := e.lockSet([]string{resource}); err != nil {
		return 0, err
	}
	if ttl <= 0 || token == "" {
		return 0, fmt.Errorf("%w: ttl and token are required", ErrBadRequest)
	}
	k := e.rwKeys(resource)
	e.awaitAcquires(token)
	one := func(_ int, v any) bool { return v == int64(1) }
	re := e.track4reenrol(&reenrolment{
		token: token,
		group: func() string { return "" },
		held:  one,
		take: func(*round) *op {
			return &op{name: "read_extend", script: scripts.RWReenrol, keys: []string{k.lock, k.readers, k.lease, e.brokenKey(resource)}, args: []string{token, ms(ttl)}}
		},
		taken: func(v any) bool { return v == int64(1) },
	})
	r := e.send(ctx, &op{name: "read_extend", script: scripts.RWExtend, keys: []string{k.lock, k.readers, k.lease}, args: []string{token, ms(ttl)}, keepLate: true}, nil)
	t := r.count(strictRule, one)
	return e.extendVerdict(ctx, r, t, t.yes, re, l.knownEnd(), t0, ttl, lockGroup(1), "read_extend")
}
