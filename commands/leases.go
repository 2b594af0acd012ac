package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// LeaseObserver is told about auto-extended leases, for metrics. It must
// be safe for concurrent use and must not block.
type LeaseObserver interface {
	// LeaseEvent reports one event: "extended", "extend_failed", "lost"
	// or "released_on_disconnect".
	LeaseEvent(event string)
	// AutoLeases reports a change of the number of live auto-extended
	// leases.
	AutoLeases(delta int)
}

// The lease events a LeaseObserver sees.
const (
	eventExtended     = "extended"
	eventExtendFailed = "extend_failed"
	eventLost         = "lost"
	eventDisconnect   = "released_on_disconnect"
)

var errTooManyLeases = proxy.Errorf("too many auto-extended leases")

// leaseKind is what an auto-extended lease is, for extending and
// releasing it.
type leaseKind int

const (
	kindLock leaseKind = iota // RLOCK, RFAIRLOCK, RMULTILOCK
	kindSem                   // RSEMACQUIRE: resources[0] is the semaphore
	kindRead                  // RRLOCK
	// kindDropin: a drop-in SET key value NX without a ttl, kept alive
	// while its connection is open. Its client speaks plain Redis, so its
	// end is silent: no -LOST, no push (it ends when the key is deleted
	// through any proxy, which one Redis would also do).
	kindDropin
)

// autoLease is one AUTOEXTEND grant, kept alive by its own goroutine
// until its connection closes, it is released, or it is lost.
type autoLease struct {
	kind      leaseKind
	resources []string
	token     string
	ttl       time.Duration
	key       string
	stop      chan struct{} // closed: stop extending

	mu  sync.Mutex
	end time.Time // when the validity known so far ends (local clock)
}

func (l *autoLease) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// leaseKey identifies a lease within its connection: kind, resources in
// a canonical order, token.
func leaseKey(kind leaseKind, resources []string, token string) string {
	rs := slices.Clone(resources)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	return string(rune('0'+kind)) + "\x00" + strings.Join(rs, "\x00") + "\x00" + token
}

// connLeases are one connection's auto-extended leases, and the resources
// whose lease was lost and not yet reported.
type connLeases struct {
	leases map[string]*autoLease
	lost   map[string]bool
}

// keeper keeps AUTOEXTEND leases alive, per connection: it extends each
// about every ttl/3 on a context the connection's end does not cancel,
// releases them all when the connection closes, and reports a lease whose
// extension could not reach a quorum before its validity ended as lost.
type keeper struct {
	eng Engine
	max int
	obs LeaseObserver

	mu    sync.Mutex
	conns map[*proxy.Session]*connLeases

	lostTotal atomic.Int64 // leases lost since the start, for INFO leases
}

func newKeeper(eng Engine, lim Limits) *keeper {
	return &keeper{eng: eng, max: lim.MaxAutoExtend, obs: lim.Leases, conns: map[*proxy.Session]*connLeases{}}
}

func (k *keeper) event(e string) {
	if e == eventLost {
		k.lostTotal.Add(1)
	}
	if k.obs != nil {
		k.obs.LeaseEvent(e)
	}
}

// admit reports errTooManyLeases if sess may not keep one more lease.
func (k *keeper) admit(sess *proxy.Session) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cl := k.conns[sess]; cl != nil && len(cl.leases) >= max(k.max, 1) {
		return errTooManyLeases
	}
	return nil
}

// admitIf is admit for a command with AUTOEXTEND.
func (k *keeper) admitIf(sess *proxy.Session, auto bool) error {
	if !auto {
		return nil
	}
	return k.admit(sess)
}

// keepIf is keep for a command with AUTOEXTEND; v is the validity in ms
// just given to the client.
func (k *keeper) keepIf(sess *proxy.Session, auto bool, kind leaseKind, resources []string, token string, ttl time.Duration, v int64) {
	if auto {
		k.keep(sess, kind, resources, token, ttl, time.Now().Add(time.Duration(v)*time.Millisecond))
	}
}

// keep starts extending a grant whose validity ends at end.
func (k *keeper) keep(sess *proxy.Session, kind leaseKind, resources []string, token string, ttl time.Duration, end time.Time) {
	l := &autoLease{kind: kind, resources: slices.Clone(resources), token: token, ttl: ttl, end: end,
		key: leaseKey(kind, resources, token), stop: make(chan struct{})}
	k.mu.Lock()
	cl := k.conns[sess]
	fresh := cl == nil
	if fresh {
		cl = &connLeases{leases: map[string]*autoLease{}, lost: map[string]bool{}}
		k.conns[sess] = cl
	}
	if old := cl.leases[l.key]; old != nil {
		close(old.stop) // the same grant again (TOKEN): one extender
	} else if k.obs != nil {
		k.obs.AutoLeases(1)
	}
	cl.leases[l.key] = l
	for _, r := range resources {
		delete(cl.lost, r)
	}
	k.mu.Unlock()
	if fresh {
		// Runs at once if the connection closed while the grant was
		// made: the lease is released then.
		sess.OnClose(func() { k.closed(sess) })
	}
	go k.extend(sess, l)
}

// forgetDropin stops extending this connection's drop-in leases on any of
// keys (with value, or any value when value is ""): a delete or a release
// through this connection ended them.
func (k *keeper) forgetDropin(sess *proxy.Session, keys []string, value string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cl := k.conns[sess]
	if cl == nil {
		return
	}
	for key, l := range cl.leases {
		if l.kind != kindDropin || (value != "" && l.token != value) || !overlaps(l.resources, keys) {
			continue
		}
		delete(cl.leases, key)
		close(l.stop)
		if k.obs != nil {
			k.obs.AutoLeases(-1)
		}
	}
}

// forget stops extending the leases of this connection with token and
// kind that include any of resources (a release through this connection:
// a multi-lock released in part is no longer whole), and reports whether
// there was one.
func (k *keeper) forget(sess *proxy.Session, kind leaseKind, resources []string, token string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	cl := k.conns[sess]
	if cl == nil {
		return false
	}
	found := false
	for key, l := range cl.leases {
		if l.kind != kind || l.token != token || !overlaps(l.resources, resources) {
			continue
		}
		delete(cl.leases, key)
		close(l.stop)
		found = true
		if k.obs != nil {
			k.obs.AutoLeases(-1)
		}
	}
	return found
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// extended records an extension the client made itself (REXTEND and the
// like) on the connection that keeps the lease: the keeper extends with
// the longer ttl from then on, and knows the new validity.
func (k *keeper) extended(sess *proxy.Session, kind leaseKind, resources []string, token string, ttl, validity time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cl := k.conns[sess]
	if cl == nil {
		return
	}
	if l := cl.leases[leaseKey(kind, resources, token)]; l != nil {
		l.mu.Lock()
		l.ttl = max(l.ttl, ttl)
		l.end = time.Now().Add(validity)
		l.mu.Unlock()
	}
}

// auto reports whether the connection keeps alive a lock or read lock
// with token on resource, whose validity has not ended.
func (k *keeper) auto(sess *proxy.Session, resource, token string) bool {
	k.mu.Lock()
	var found *autoLease
	if cl := k.conns[sess]; cl != nil {
		for _, l := range cl.leases {
			if l.kind != kindSem && l.token == token && slices.Contains(l.resources, resource) {
				found = l
				break
			}
		}
	}
	k.mu.Unlock()
	return found != nil && time.Now().Before(found.validUntil())
}

// takeLost reports, once, the first of resources whose lease on this
// connection was lost, and forgets every one of them it names (one -LOST
// per command).
func (k *keeper) takeLost(sess *proxy.Session, resources [][]byte) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cl := k.conns[sess]
	if cl == nil || len(cl.lost) == 0 {
		return "", false
	}
	first, found := "", false
	for _, r := range resources {
		if cl.lost[string(r)] {
			delete(cl.lost, string(r))
			if !found {
				first, found = string(r), true
			}
		}
	}
	return first, found
}

// anyLost reports whether the connection has a lost lease not yet
// reported: the cheap check before a command's keys are looked at.
func (k *keeper) anyLost(sess *proxy.Session) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	cl := k.conns[sess]
	return cl != nil && len(cl.lost) > 0
}

// extend keeps l alive until it is stopped or lost.
func (k *keeper) extend(sess *proxy.Session, l *autoLease) {
	// next is when to try: every ttl/3, but never later than half the
	// validity left, so that a slow grant still gets its extension.
	next := func() time.Duration {
		l.mu.Lock()
		defer l.mu.Unlock()
		return max(min(l.ttl/3, time.Until(l.end)/2), time.Millisecond)
	}
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		select {
		case <-l.stop: // released while the timer fired
			return
		default:
		}
		end := l.validUntil()
		if time.Until(end) <= 0 {
			k.lose(sess, l)
			return
		}
		// Not the connection's context: a close while extending must not
		// cut the round halfway; the release that follows comes after it.
		// Each round is bounded by master_timeout.
		v, err := k.extendOnce(context.Background(), l)
		select {
		case <-l.stop:
			return // released meanwhile: nothing to report
		default:
		}
		if err == nil && v > 0 {
			l.mu.Lock()
			l.end = time.Now().Add(v)
			l.mu.Unlock()
			k.event(eventExtended)
			t.Reset(next())
			continue
		}
		k.event(eventExtendFailed)
		left := time.Until(end)
		if err == nil || left <= 0 {
			// Known not held by a quorum, or the validity ran out.
			k.lose(sess, l)
			return
		}
		// No quorum yet: try again while the validity lasts.
		l.mu.Lock()
		every := l.ttl / 3
		l.mu.Unlock()
		t.Reset(max(min(every/4, left/2), 5*time.Millisecond))
	}
}

func (k *keeper) extendOnce(ctx context.Context, l *autoLease) (time.Duration, error) {
	l.mu.Lock()
	ttl := l.ttl
	l.mu.Unlock()
	switch l.kind {
	case kindSem:
		return k.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{l.resources[0]}, Token: l.token}, ttl)
	case kindRead:
		return k.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Read, Resources: []string{l.resources[0]}, Token: l.token}, ttl)
	case kindDropin:
		return k.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: l.resources, Token: l.token}, ttl)
	}
	return k.eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Lock, Resources: l.resources, Token: l.token}, ttl)
}

// release gives l back on every master and wakes its waiters.
func (k *keeper) release(l *autoLease) {
	ctx := context.Background()
	switch l.kind {
	case kindSem:
		k.eng.Release(ctx, &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{l.resources[0]}, Token: l.token})
	case kindRead:
		k.eng.Release(ctx, &quorum.Lease{Primitive: quorum.Read, Resources: []string{l.resources[0]}, Token: l.token})
	case kindDropin:
		k.eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{l.resources[0]}, Token: l.token})
	default:
		k.eng.Release(ctx, &quorum.Lease{Primitive: quorum.Lock, Resources: l.resources, Token: l.token})
	}
}

// lose drops a lease whose validity ended without a quorum's extension:
// the next command on its connection naming one of its resources answers
// -LOST, and a RESP3 connection is told at once.
func (k *keeper) lose(sess *proxy.Session, l *autoLease) {
	k.mu.Lock()
	cl := k.conns[sess]
	if cl == nil || cl.leases[l.key] != l {
		k.mu.Unlock()
		return
	}
	delete(cl.leases, l.key)
	if l.kind != kindDropin {
		for _, r := range l.resources {
			cl.lost[r] = true
		}
	}
	k.mu.Unlock()
	if k.obs != nil {
		k.obs.AutoLeases(-1)
	}
	k.event(eventLost)
	if l.kind != kindDropin {
		for _, r := range l.resources {
			sess.Push("lost", r, l.token)
		}
	}
	// Lost to timeouts, the keys may still be held on some masters, or
	// even a quorum: give them back so that waiters need not wait out the
	// ttl (the client has been told it holds nothing).
	go k.release(l)
}

// closed releases every lease of a connection that closed, all at once,
// and returns when the releases were answered (each bounded by the
// engine's timeouts).
func (k *keeper) closed(sess *proxy.Session) {
	k.mu.Lock()
	cl := k.conns[sess]
	delete(k.conns, sess)
	var ls []*autoLease
	if cl != nil {
		for _, l := range cl.leases {
			close(l.stop)
			ls = append(ls, l)
		}
	}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.release(l)
			k.event(eventDisconnect)
			if k.obs != nil {
				k.obs.AutoLeases(-1)
			}
		}()
	}
	wg.Wait()
}

// lostGuard wraps the handlers of commands that name resources: the first
// command on a connection that names a resource whose auto-extended lease
// was lost answers -LOST, once.
func (k *keeper) lostGuard(cmd *proxy.Command) {
	if cmd.FirstKey <= 0 && cmd.Keys == nil {
		return
	}
	h := cmd.Handler
	cmd.Handler = func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
		if !k.anyLost(sess) {
			return h(ctx, sess, args)
		}
		full := make([][]byte, 0, len(args)+1)
		full = append(append(full, []byte(cmd.Name)), args...)
		if r, ok := k.takeLost(sess, cmd.KeysOf(full)); ok {
			return nil, &proxy.Error{Code: "LOST", Msg: r + " lease was not extended in time"}
		}
		return h(ctx, sess, args)
	}
}

// info is INFO's "leases" section: the AUTOEXTEND leases the proxy keeps
// alive now, and those lost since the start (an extension could not reach
// a quorum before the validity ended).
func (k *keeper) info() proxy.InfoSection {
	return proxy.InfoSection{Name: "leases", Lines: func() []string {
		k.mu.Lock()
		n := 0
		for _, cl := range k.conns {
			n += len(cl.leases)
		}
		k.mu.Unlock()
		return []string{
			fmt.Sprintf("autoextend_leases:%d", n),
			fmt.Sprintf("autoextend_lost:%d", k.lostTotal.Load()),
		}
	}}
}
