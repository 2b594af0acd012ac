package commands

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// fakeEngine is an Engine whose every method answers what the test
// scripted for it, and records the call, so that a test can drive every
// reply and error of a handler without masters, and assert that bad input
// never reached the engine.
type fakeEngine struct {
	mu      sync.Mutex
	answers map[string][]answer // by method; taken in order, the last repeats
	calls   []string            // "Method arg arg ...", in the order made
	called  chan string         // each call's method, for tests that wait on one
	status  quorum.Status       // what Status answers
}

// answer is one scripted answer. v is what the method returns besides the
// error: *quorum.Lease, *quorum.Info, bool, time.Duration, int or
// quorum.NodeStatus; nil for the zero value. A lease whose Decided is zero
// is decided when it is returned (its Validity then counts down from the
// call).
type answer struct {
	v   any
	err error
	// block: wait until the call's context ends first (a client that hangs
	// up while it waits), then answer.
	block bool
	// delay: take this long first (a slow round).
	delay time.Duration
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{answers: map[string][]answer{}, called: make(chan string, 1024)}
}

// on scripts the answers of method, in order; the last one repeats.
func (f *fakeEngine) on(method string, as ...answer) *fakeEngine {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[method] = as
	return f
}

// Calls returns the calls made so far.
func (f *fakeEngine) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// waitCall waits until method is called (or 5 s pass) and reports whether
// it was.
func (f *fakeEngine) waitCall(method string) bool {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-f.called:
			if m == method {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func (f *fakeEngine) call(ctx context.Context, method string, args ...any) answer {
	f.mu.Lock()
	c := method
	for _, a := range args {
		c += fmt.Sprint(" ", a)
	}
	f.calls = append(f.calls, c)
	var a answer
	if as := f.answers[method]; len(as) > 0 {
		a = as[0]
		if len(as) > 1 {
			f.answers[method] = as[1:]
		}
	}
	f.mu.Unlock()
	select {
	case f.called <- method:
	default: // nobody waits for so many calls
	}
	if a.block {
		<-ctx.Done()
	}
	time.Sleep(a.delay)
	switch l := a.v.(type) {
	case *quorum.Lease:
		cp := *l
		if cp.Decided.IsZero() {
			cp.Start, cp.Decided = time.Now(), time.Now()
		}
		a.v = &cp
	}
	return a
}

// prim is p as the engine reads it ("" is Lock).
func prim(p quorum.Primitive) quorum.Primitive {
	if p == "" {
		return quorum.Lock
	}
	return p
}

// req is how a call records a request.
func req(r quorum.Request) string {
	s := fmt.Sprintf("%s %q ttl=%v wait=%v token=%q", prim(r.Primitive), r.Resources, r.TTL, r.Wait, r.Token)
	switch o := r.Options.(type) {
	case quorum.SemaphoreOptions:
		s += fmt.Sprintf(" limit=%d count=%d", o.Limit, o.Count)
	case quorum.ElectionOptions:
		s += fmt.Sprintf(" value=%q", o.Value)
	}
	if o, ok := r.Options.(quorum.LockOptions); ok && o.Reentrant {
		s += " reentrant"
	}
	return s
}

// lease is how a call records a lease.
func lease(l *quorum.Lease) string {
	return fmt.Sprintf("%s %q %s", prim(l.Primitive), l.Resources, l.Token)
}

func (f *fakeEngine) Acquire(ctx context.Context, r quorum.Request) (*quorum.Lease, error) {
	a := f.call(ctx, "Acquire", req(r))
	l, _ := a.v.(*quorum.Lease)
	if l != nil && l.Primitive == "" {
		l.Primitive = prim(r.Primitive) // the engine's lease names its primitive
	}
	return l, a.err
}
func (f *fakeEngine) Release(ctx context.Context, l *quorum.Lease) (bool, error) {
	a := f.call(ctx, "Release", lease(l))
	held, _ := a.v.(bool)
	return held, a.err
}
func (f *fakeEngine) Extend(ctx context.Context, l *quorum.Lease, ttl time.Duration) (time.Duration, error) {
	a := f.call(ctx, "Extend", lease(l), ttl)
	v, _ := a.v.(time.Duration)
	return v, a.err
}
func (f *fakeEngine) Abandon(ctx context.Context, l *quorum.Lease) {
	f.call(ctx, "Abandon", lease(l))
}
func (f *fakeEngine) Info(ctx context.Context, p quorum.Primitive, name string) (*quorum.Info, error) {
	a := f.call(ctx, "Info", prim(p), name)
	info, _ := a.v.(*quorum.Info)
	if info == nil && a.err == nil {
		info = &quorum.Info{}
	}
	return info, a.err
}

// List records the cursor and count, and answers the scripted
// listPage; match is applied to its entries, as the engine would.
func (f *fakeEngine) List(ctx context.Context, cursor uint64, count int, match func(string) bool) (uint64, []quorum.ListEntry, error) {
	a := f.call(ctx, "List", cursor, count)
	p, _ := a.v.(listPage)
	var out []quorum.ListEntry
	for _, e := range p.entries {
		if match(e.Name) {
			out = append(out, e)
		}
	}
	return p.next, out, a.err
}

// listPage is a scripted answer of List.
type listPage struct {
	next    uint64
	entries []quorum.ListEntry
}

func (f *fakeEngine) Waiters(ctx context.Context, p quorum.Primitive, name, token string) (int, int, error) {
	a := f.call(ctx, "Waiters", prim(p), name, fmt.Sprintf("%q", token))
	w, _ := a.v.([2]int)
	return w[0], w[1], a.err
}
func (f *fakeEngine) Latch(ctx context.Context, r quorum.LatchRequest) (int, error) {
	a := f.call(ctx, "Latch", fmt.Sprintf("op=%d %s count=%d ttl=%v token=%q wait=%v", r.Op, r.Name, r.Count, r.TTL, r.Token, r.Wait))
	n, _ := a.v.(int)
	return n, a.err
}
func (f *fakeEngine) Delete(ctx context.Context, resources []string) (int, error) {
	a := f.call(ctx, "Delete", fmt.Sprintf("%q", resources))
	n, _ := a.v.(int)
	return n, a.err
}
func (f *fakeEngine) Status() quorum.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}
func (f *fakeEngine) EndQuarantine(ctx context.Context, master, by string) (quorum.NodeStatus, error) {
	a := f.call(ctx, "EndQuarantine", master, by)
	st, _ := a.v.(quorum.NodeStatus)
	return st, a.err
}

func (f *fakeEngine) Proclaim(ctx context.Context, election, token, value string) (bool, error) {
	a := f.call(ctx, "Proclaim", election, token, value)
	ok, _ := a.v.(bool)
	return ok, a.err
}

func (f *fakeEngine) Break(ctx context.Context, resource, by string) (bool, error) {
	a := f.call(ctx, "Break", resource)
	ok, _ := a.v.(bool)
	return ok, a.err
}

func (f *fakeEngine) Set(ctx context.Context, name string, limit int, keep time.Duration) error {
	return f.call(ctx, "SemSet", name, limit, keep).err
}

// WatchElection records the call, then hands fn every scripted answer of
// "WatchElection" in order (an *quorum.Info or an error; each after its
// delay), as the reads of one watch: it returns nil as soon as fn returns
// true, else, once they are all read, when ctx ends.
func (f *fakeEngine) Watch(ctx context.Context, election string, fn func(*quorum.Info, error) bool) error {
	f.mu.Lock()
	as := f.answers["WatchElection"]
	f.calls = append(f.calls, "WatchElection "+election)
	f.mu.Unlock()
	select {
	case f.called <- "WatchElection":
	default:
	}
	for _, a := range as {
		select {
		case <-time.After(a.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		info, _ := a.v.(*quorum.Info)
		if fn(info, a.err) {
			return nil
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

var (
	_ Leases     = (*fakeEngine)(nil)
	_ Operator   = (*fakeEngine)(nil)
	_ Elections  = (*fakeEngine)(nil)
	_ Semaphores = (*fakeEngine)(nil)
)

// engine is the commands' Engine with f for every part.
func (f *fakeEngine) engine() Engine {
	return Engine{Leases: f, Operator: f, Elections: f, Semaphores: f}
}
