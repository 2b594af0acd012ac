package commands

import (
	"context"
	"errors"
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

// The primitives whose grants AUTOEXTEND keeps alive.
const (
	kindLock = quorum.Lock      // RLOCK, RMULTILOCK, and RFAIRLOCK's (quorum.Fair) leases
	kindSem  = quorum.Semaphore // RSEMACQUIRE: resources[0] is the semaphore
	kindRead = quorum.Read      // RRLOCK
	// kindDropin: a drop-in SET key value NX without a ttl, kept alive
	// while its connection is open. Its client speaks plain Redis, so its
	// end is silent: no -LOST, no push (it ends when the key is deleted
	// through any proxy, which one Redis would also do).
	kindDropin = quorum.SetNX
)

// autoLease is one AUTOEXTEND grant, kept alive by its own goroutine
// until its connection closes, it is released, or it is lost. Its lease
// (primitive, resources, token) is what the engine extends and releases;
// it does not change.
type autoLease struct {
	lease quorum.Lease
	key   string
	stop  chan struct{} // closed: stop extending

	mu  sync.Mutex
	ttl time.Duration // what each extension asks for
	end time.Time     // when the validity known so far ends (local clock)

	// turn is held (a value in it) through one extension round: the
	// keeper's, or the client's own on the keeping connection. A round
	// asks for the ttl known when it starts, so without it a keeper's
	// round that read the shorter ttl before a client's longer extension
	// could land after it on the masters and cut the lock's ttl back
	// below the validity the client was given.
	turn chan struct{}
}

// takeTurn waits for l's extension round in progress to end and holds the
// next one off until the returned function is called; it gives up when
// ctx ends or l is stopped.
func (l *autoLease) takeTurn(ctx context.Context) (func(), error) {
	select {
	case l.turn <- struct{}{}:
		select {
		case <-l.stop: // stopped by the turn just ended
			<-l.turn
			return func() {}, errLeaseStopped
		default:
		}
		return func() { <-l.turn }, nil
	case <-l.stop:
		return func() {}, errLeaseStopped
	case <-ctx.Done():
		return func() {}, ctx.Err()
	}
}

// errLeaseStopped: the lease was released or dropped while waiting for
// its turn to extend.
var errLeaseStopped = errors.New("commands: the lease is no longer kept")

// extend extends l on a quorum of masters for ttl and returns the
// validity (0: known not held by a quorum).
func (l *autoLease) extend(ctx context.Context, eng Engine, ttl time.Duration) (time.Duration, error) {
	lease := l.lease // the engine's own copy: releases may run beside
	// The validity known so far lets the engine re-enrol masters that
	// lost the lease before the extension's verdict.
	lease.Decided = time.Now()
	lease.Validity = l.validUntil().Sub(lease.Decided)
	return eng.Extend(ctx, &lease, ttl)
}

// release gives l back on every master and wakes its waiters.
func (l *autoLease) release(ctx context.Context, eng Engine) {
	lease := l.lease
	lease.Decided = time.Now()
	lease.Validity = l.validUntil().Sub(lease.Decided)
	eng.Release(ctx, &lease)
}

func (l *autoLease) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// leaseKey identifies a lease within its connection: kind, resources in
// a canonical order, token.
func leaseKey(kind quorum.Primitive, resources []string, token string) string {
	rs := slices.Clone(resources)
	slices.Sort(rs)
	rs = slices.Compact(rs)
	return string(kind) + "\x00" + strings.Join(rs, "\x00") + "\x00" + token
}

// connLeases are one connection's auto-extended leases, and the resources
// whose lease was lost and not yet reported. The connection holds them
// (proxy.Session.Value) and releases them when it ends (proxy.Session.OnClose).
type connLeases struct {
	mu     sync.Mutex
	closed bool // the connection ended: its leases were released
	leases map[string]*autoLease
	lost   map[string]bool
}

// keeper keeps AUTOEXTEND leases alive, per connection: it extends each
// about every ttl/3 on a context the connection's end does not cancel,
// releases them all when the connection closes, and reports a lease whose
// extension could not reach a quorum before its validity ended as lost.
// Each connection's leases are a value of its session, under the keeper
// as key.
type keeper struct {
	eng Engine
	max int
	obs LeaseObserver

	live      atomic.Int64 // leases kept alive now, for INFO leases
	lostTotal atomic.Int64 // leases lost since the start, for INFO leases
}

func newKeeper(eng Engine, lim Limits) *keeper {
	return &keeper{eng: eng, max: lim.MaxAutoExtend, obs: lim.Leases}
}

func (k *keeper) event(e string) {
	if e == eventLost {
		k.lostTotal.Add(1)
	}
	if k.obs != nil {
		k.obs.LeaseEvent(e)
	}
}

// count records a change of the number of leases kept alive.
func (k *keeper) count(delta int) {
	k.live.Add(int64(delta))
	if k.obs != nil {
		k.obs.AutoLeases(delta)
	}
}

// leasesOf returns sess's leases, made (with their release on close) the
// first time.
func (k *keeper) leasesOf(sess *proxy.Session) *connLeases {
	return sess.Value(k, func() any {
		cl := &connLeases{leases: map[string]*autoLease{}, lost: map[string]bool{}}
		// Runs at once if the connection has ended already.
		sess.OnClose(func() { k.closed(cl) })
		return cl
	}).(*connLeases)
}

// peek returns sess's leases, nil if it never kept one.
func (k *keeper) peek(sess *proxy.Session) *connLeases {
	v, ok := sess.Lookup(k)
	if !ok {
		return nil
	}
	return v.(*connLeases)
}

// admit reports errTooManyLeases if sess may not keep one more lease.
func (k *keeper) admit(sess *proxy.Session) error {
	cl := k.peek(sess)
	if cl == nil {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.leases) >= max(k.max, 1) {
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
func (k *keeper) keepIf(sess *proxy.Session, auto bool, kind quorum.Primitive, resources []string, token string, ttl time.Duration, v int64) {
	if auto {
		k.keep(sess, kind, resources, token, ttl, time.Now().Add(time.Duration(v)*time.Millisecond))
	}
}

// keep starts extending a grant whose validity ends at end.
func (k *keeper) keep(sess *proxy.Session, kind quorum.Primitive, resources []string, token string, ttl time.Duration, end time.Time) {
	if kind == quorum.Fair {
		// Released and extended like a lock, by RUNLOCK and REXTEND: kept
		// as one.
		kind = kindLock
	}
	l := &autoLease{lease: quorum.Lease{Primitive: kind, Resources: slices.Clone(resources), Token: token}, ttl: ttl, end: end,
		key: leaseKey(kind, resources, token), stop: make(chan struct{}), turn: make(chan struct{}, 1)}
	cl := k.leasesOf(sess)
	cl.mu.Lock()
	if cl.closed {
		// The connection ended while the grant was made: give it back,
		// as its end gave back the others.
		cl.mu.Unlock()
		l.release(context.Background(), k.eng)
		k.event(eventDisconnect)
		return
	}
	if old := cl.leases[l.key]; old != nil {
		close(old.stop) // the same grant again (TOKEN): one extender
		// A round of the old extender may still be in flight: the new
		// lease's rounds, and the client's, come after it.
		l.turn = old.turn
	} else {
		k.count(1)
	}
	cl.leases[l.key] = l
	for _, r := range resources {
		delete(cl.lost, r)
	}
	cl.mu.Unlock()
	go k.extend(sess, cl, l)
}

// forgetDropin stops extending this connection's drop-in leases on any of
// keys (with value, or any value when value is ""): a delete or a release
// through this connection ended them.
func (k *keeper) forgetDropin(sess *proxy.Session, keys []string, value string) {
	k.drop(sess, func(l *autoLease) bool {
		return l.lease.Primitive == kindDropin && (value == "" || l.lease.Token == value) && overlaps(l.lease.Resources, keys)
	})
}

// keptDropin is the value of this connection's kept drop-in lease on key
// (SETNX, SET NX without a ttl), "" if it keeps none.
func (k *keeper) keptDropin(sess *proxy.Session, key string) string {
	cl := k.peek(sess)
	if cl == nil {
		return ""
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, l := range cl.leases {
		if l.lease.Primitive == kindDropin && slices.Contains(l.lease.Resources, key) {
			return l.lease.Token
		}
	}
	return ""
}

// forget stops extending the leases of this connection with token and
// kind that include any of resources (a release through this connection:
// a multi-lock released in part is no longer whole), and reports whether
// there was one.
func (k *keeper) forget(sess *proxy.Session, kind quorum.Primitive, resources []string, token string) bool {
	return k.drop(sess, func(l *autoLease) bool {
		return l.lease.Primitive == kind && l.lease.Token == token && overlaps(l.lease.Resources, resources)
	})
}

// drop stops extending the leases of this connection that match, and
// reports whether there was one.
func (k *keeper) drop(sess *proxy.Session, match func(*autoLease) bool) bool {
	cl := k.peek(sess)
	if cl == nil {
		return false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	found := false
	for key, l := range cl.leases {
		if !match(l) {
			continue
		}
		delete(cl.leases, key)
		close(l.stop)
		found = true
		k.count(-1)
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

// extending waits for the keeper's extension round of the lease this
// connection keeps alive with kind, resources and token (if it keeps one)
// to end, and holds the keeper's next round off until the returned
// function is called: the client's own extension, made meanwhile, then
// reaches the masters after the keeper's and before its next, which asks
// for the client's ttl (extended).
func (k *keeper) extending(ctx context.Context, sess *proxy.Session, kind quorum.Primitive, resources []string, token string) (func(), error) {
	cl := k.peek(sess)
	if cl == nil {
		return func() {}, nil
	}
	cl.mu.Lock()
	l := cl.leases[leaseKey(kind, resources, token)]
	cl.mu.Unlock()
	if l == nil {
		return func() {}, nil
	}
	done, err := l.takeTurn(ctx)
	if errors.Is(err, errLeaseStopped) {
		return done, nil // released meanwhile: the extension goes alone
	}
	return done, err
}

// extended records an extension the client made itself (REXTEND and the
// like) on the connection that keeps the lease: the keeper extends with
// the longer ttl from then on, and knows the new validity.
func (k *keeper) extended(sess *proxy.Session, kind quorum.Primitive, resources []string, token string, ttl, validity time.Duration) {
	cl := k.peek(sess)
	if cl == nil {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if l := cl.leases[leaseKey(kind, resources, token)]; l != nil {
		l.mu.Lock()
		l.ttl = max(l.ttl, ttl)
		l.end = time.Now().Add(validity)
		l.mu.Unlock()
	}
}

// validUntil is when the validity of the lease this connection keeps
// alive with kind, resources and token ends, as far as it knows (the zero
// time when it keeps none).
func (k *keeper) validUntil(sess *proxy.Session, kind quorum.Primitive, resources []string, token string) time.Time {
	cl := k.peek(sess)
	if cl == nil {
		return time.Time{}
	}
	cl.mu.Lock()
	l := cl.leases[leaseKey(kind, resources, token)]
	cl.mu.Unlock()
	if l == nil {
		return time.Time{}
	}
	return l.validUntil()
}

// auto reports whether the connection keeps alive a lock or read lock
// with token on resource, whose validity has not ended.
func (k *keeper) auto(sess *proxy.Session, resource, token string) bool {
	cl := k.peek(sess)
	if cl == nil {
		return false
	}
	var found *autoLease
	cl.mu.Lock()
	for _, l := range cl.leases {
		if l.lease.Primitive != kindSem && l.lease.Token == token && slices.Contains(l.lease.Resources, resource) {
			found = l
			break
		}
	}
	cl.mu.Unlock()
	return found != nil && time.Now().Before(found.validUntil())
}

// takeLost reports, once, the first of resources whose lease on this
// connection was lost, and forgets every one of them it names (one -LOST
// per command).
func (k *keeper) takeLost(sess *proxy.Session, resources [][]byte) (string, bool) {
	cl := k.peek(sess)
	if cl == nil {
		return "", false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
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
	cl := k.peek(sess)
	if cl == nil {
		return false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return len(cl.lost) > 0
}

// extend keeps l, one of sess's leases cl, alive until it is stopped or
// lost.
func (k *keeper) extend(sess *proxy.Session, cl *connLeases, l *autoLease) {
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
			k.lose(sess, cl, l)
			return
		}
		done, err := l.takeTurn(context.Background())
		if err != nil {
			return // released while the client extended it
		}
		if !l.validUntil().Equal(end) {
			// The client extended it meanwhile: the next round is due
			// from its extension.
			done()
			t.Reset(next())
			continue
		}
		if time.Until(end) <= 0 {
			// It ran out while the client's own extension was undecided.
			done()
			k.lose(sess, cl, l)
			return
		}
		l.mu.Lock()
		ttl := l.ttl
		l.mu.Unlock()
		// Not the connection's context: a close while extending must not
		// cut the round halfway; the release that follows comes after it.
		// A round is bounded as any extension is: master_timeout per
		// request, an undecided one asking again at most while the
		// validity lasts.
		v, err := l.extend(context.Background(), k.eng, ttl)
		if err == nil && v > 0 {
			l.mu.Lock()
			l.end = time.Now().Add(v)
			l.mu.Unlock()
		}
		done()
		select {
		case <-l.stop:
			return // released meanwhile: nothing to report
		default:
		}
		if err == nil && v > 0 {
			k.event(eventExtended)
			t.Reset(next())
			continue
		}
		k.event(eventExtendFailed)
		left := time.Until(end)
		if err == nil || left <= 0 {
			// Known not held by a quorum, or the validity ran out.
			k.lose(sess, cl, l)
			return
		}
		// No quorum yet: try again while the validity lasts.
		t.Reset(max(min(ttl/3/4, left/2), 5*time.Millisecond))
	}
}

// lose drops a lease whose validity ended without a quorum's extension:
// the next command on its connection naming one of its resources answers
// -LOST, and a RESP3 connection is told at once.
func (k *keeper) lose(sess *proxy.Session, cl *connLeases, l *autoLease) {
	cl.mu.Lock()
	if cl.leases[l.key] != l {
		// Released, replaced or its connection ended meanwhile.
		cl.mu.Unlock()
		return
	}
	delete(cl.leases, l.key)
	if l.lease.Primitive != kindDropin {
		for _, r := range l.lease.Resources {
			cl.lost[r] = true
		}
	}
	cl.mu.Unlock()
	k.count(-1)
	k.event(eventLost)
	if l.lease.Primitive != kindDropin {
		for _, r := range l.lease.Resources {
			sess.Push("lost", r, l.lease.Token)
		}
	}
	// Lost to timeouts, the keys may still be held on some masters, or
	// even a quorum: give them back so that waiters need not wait out the
	// ttl (the client has been told it holds nothing).
	go l.release(context.Background(), k.eng)
}

// closed releases every lease of a connection that ended, all at once,
// and returns when the releases were answered (each bounded by the
// engine's timeouts). It is the connection's close hook.
func (k *keeper) closed(cl *connLeases) {
	cl.mu.Lock()
	cl.closed = true
	ls := make([]*autoLease, 0, len(cl.leases))
	for _, l := range cl.leases {
		close(l.stop)
		ls = append(ls, l)
	}
	clear(cl.leases)
	clear(cl.lost)
	cl.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.release(context.Background(), k.eng)
			k.event(eventDisconnect)
			k.count(-1)
		}()
	}
	// Wait for the releases, but not for long: this runs in the
	// connection's close hook, and a release whose masters stay silent
	// asks again until the lease's validity ends. The rest carry on.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// closeWait bounds how long a closing connection waits for the releases
// of its auto-extended leases.
const closeWait = time.Second

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
		return []string{
			fmt.Sprintf("autoextend_leases:%d", k.live.Load()),
			fmt.Sprintf("autoextend_lost:%d", k.lostTotal.Load()),
		}
	}}
}
