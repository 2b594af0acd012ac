package commands

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// keeperEngine grants every acquire and tells the test what AUTOEXTEND's
// keeper asks of it; the methods the keeper's tests do not reach are the
// nil Leases' (they panic).
type keeperEngine struct {
	Leases

	mu     sync.Mutex
	n      int                                                    // leases granted
	extend func(l *quorum.Lease, ttl time.Duration) time.Duration // nil: extended for ttl

	extended chan quorum.Lease
	released chan quorum.Lease
}

func newKeeperEngine() *keeperEngine {
	return &keeperEngine{extended: make(chan quorum.Lease, 64), released: make(chan quorum.Lease, 64)}
}

func (e *keeperEngine) Acquire(_ context.Context, req quorum.Request) (*quorum.Lease, error) {
	e.mu.Lock()
	e.n++
	tok := req.Token
	if tok == "" {
		tok = fmt.Sprintf("t%d", e.n)
	}
	e.mu.Unlock()
	p := req.Primitive
	if p == "" {
		p = quorum.Lock
	}
	now := time.Now()
	so, _ := req.Options.(quorum.SemaphoreOptions)
	return &quorum.Lease{Primitive: p, Resources: slices.Clone(req.Resources), Token: tok, Fences: make([]uint64, len(req.Resources)),
		Count: so.Count, Validity: req.TTL, Start: now, Decided: now}, nil
}

func (e *keeperEngine) Extend(_ context.Context, l *quorum.Lease, ttl time.Duration) (time.Duration, error) {
	e.mu.Lock()
	f := e.extend
	e.mu.Unlock()
	v := ttl
	if f != nil {
		v = f(l, ttl)
	}
	select {
	case e.extended <- *l:
	default:
	}
	return v, nil
}

func (e *keeperEngine) Release(_ context.Context, l *quorum.Lease) (bool, error) {
	e.released <- *l
	return true, nil
}

// leaseCounter is a LeaseObserver: it counts the live leases and signals
// each change on changed.
type leaseCounter struct {
	mu      sync.Mutex
	live    int
	events  []string
	changed chan struct{}
}

func (c *leaseCounter) LeaseEvent(e string) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	c.changed <- struct{}{}
}

func (c *leaseCounter) AutoLeases(delta int) {
	c.mu.Lock()
	c.live += delta
	c.mu.Unlock()
	c.changed <- struct{}{}
}

// waitUntil waits for the counter to satisfy cond, or fails after 5 s.
func (c *leaseCounter) waitUntil(t *testing.T, what string, cond func(live int, events []string) bool) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		ok := cond(c.live, c.events)
		live, events := c.live, slices.Clone(c.events)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-timeout:
			t.Fatalf("waiting for %s: %d live leases, events %q", what, live, events)
		}
	}
}

func countOf(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}

// keeperServer serves the commands over eng on a 127.0.0.1:0 listener.
func keeperServer(t *testing.T, eng Leases, obs LeaseObserver) string {
	t.Helper()
	cmds, info := AllWithInfo(Engine{Leases: eng}, Limits{MaxTTL: time.Hour, MaxWait: time.Minute, MaxLatchCount: 100, MaxAutoExtend: 8, Leases: obs, DropIn: true})
	srv, err := proxy.New(proxy.Options{Commands: cmds, Info: info, MapError: MapError})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// TestKeeperReleasesOnClose: the AUTOEXTEND grants of every primitive a
// connection holds are released, each as the lease it is (primitive,
// resources, token), when that connection closes, and no sooner; INFO
// then counts none.
func TestKeeperReleasesOnClose(t *testing.T) {
	grants := []struct {
		args []any
		want quorum.Lease // Primitive and Resources; Token from the reply
	}{
		{[]any{"RLOCK", "a", 60000, "AUTOEXTEND"}, quorum.Lease{Primitive: quorum.Lock, Resources: []string{"a"}}},
		{[]any{"RFAIRLOCK", "b", 60000, "AUTOEXTEND"}, quorum.Lease{Primitive: quorum.Lock, Resources: []string{"b"}}},
		{[]any{"RMULTILOCK", 60000, 2, "c", "d", "AUTOEXTEND"}, quorum.Lease{Primitive: quorum.Lock, Resources: []string{"c", "d"}}},
		{[]any{"RSEMACQUIRE", "s", 2, 60000, "AUTOEXTEND"}, quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{"s"}}},
		{[]any{"RRLOCK", "r", 60000, "AUTOEXTEND"}, quorum.Lease{Primitive: quorum.Read, Resources: []string{"r"}}},
		{[]any{"SET", "k", "v", "NX"}, quorum.Lease{Primitive: quorum.SetNX, Resources: []string{"k"}, Token: "v"}},
	}
	eng := newKeeperEngine()
	obs := &leaseCounter{changed: make(chan struct{}, 256)}
	addr := keeperServer(t, eng, obs)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	// The owner's one connection: closing the client closes it.
	owner := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, PoolSize: 1})
	var want []string
	for _, g := range grants {
		v, err := owner.Do(ctx, g.args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", g.args, err)
		}
		l := g.want
		if l.Token == "" {
			l.Token = v.([]any)[0].(string)
		}
		want = append(want, fmt.Sprint(l.Primitive, l.Resources, l.Token))
	}
	obs.waitUntil(t, "every grant kept", func(live int, _ []string) bool { return live == len(grants) })
	if s := c.Info(ctx, "leases").Val(); !strings.Contains(s, fmt.Sprintf("autoextend_leases:%d\r\n", len(grants))) {
		t.Fatalf("INFO leases while kept: %q", s)
	}
	select {
	case l := <-eng.released:
		t.Fatalf("%v released while its connection is open", l)
	default:
	}
	owner.Close()
	var got []string
	for range grants {
		select {
		case l := <-eng.released:
			got = append(got, fmt.Sprint(l.Primitive, l.Resources, l.Token))
		case <-time.After(5 * time.Second):
			t.Fatalf("released %q after the close, want %q", got, want)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("released %q, want %q", got, want)
	}
	obs.waitUntil(t, "every lease released on disconnect", func(live int, events []string) bool {
		return live == 0 && countOf(events, eventDisconnect) == len(grants)
	})
	if s := c.Info(ctx, "leases").Val(); !strings.Contains(s, "autoextend_leases:0\r\n") {
		t.Fatalf("INFO leases after the close: %q", s)
	}
}

// TestKeeperExtendsAndLoses: the keeper extends a lease with the engine's
// Extend on the lease it holds; once the engine says it is not held, the
// lease is lost: given back, the next command naming the resource answers
// -LOST once, and the lease is no longer kept (nothing left to release on
// close).
func TestKeeperExtendsAndLoses(t *testing.T) {
	eng := newKeeperEngine()
	obs := &leaseCounter{changed: make(chan struct{}, 256)}
	addr := keeperServer(t, eng, obs)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	v, err := c.Do(ctx, "RLOCK", "x", 300, "AUTOEXTEND").Result()
	if err != nil {
		t.Fatal(err)
	}
	tok := v.([]any)[0].(string)
	for range 2 {
		select {
		case l := <-eng.extended:
			if l.Primitive != quorum.Lock || !slices.Equal(l.Resources, []string{"x"}) || l.Token != tok {
				t.Fatalf("extended %+v, want the lock on x with token %s", l, tok)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not extended")
		}
	}
	eng.mu.Lock()
	eng.extend = func(*quorum.Lease, time.Duration) time.Duration { return 0 } // not held
	eng.mu.Unlock()
	obs.waitUntil(t, "the lease lost", func(live int, events []string) bool {
		return live == 0 && countOf(events, eventLost) == 1
	})
	select {
	case l := <-eng.released:
		if l.Token != tok {
			t.Fatalf("released %+v after the loss, want token %s", l, tok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a lost lease is not given back")
	}
	err = c.Do(ctx, "RUNLOCK", "x", tok).Err()
	if err == nil || err.Error() != "LOST x lease was not extended in time" {
		t.Fatalf("first command naming x after the loss: %v", err)
	}
	if n, err := c.Do(ctx, "RUNLOCK", "x", tok).Result(); err != nil || n != int64(1) {
		t.Fatalf("second RUNLOCK: %v, %v; want the engine's answer (1)", n, err)
	}
}

// TestKeeperOneLeasePerGrant: the same grant again (TOKEN) is kept by one
// extender, a release through the connection stops keeping it, and the
// per-connection cap counts only the leases kept.
func TestKeeperOneLeasePerGrant(t *testing.T) {
	eng := newKeeperEngine()
	obs := &leaseCounter{changed: make(chan struct{}, 256)}
	addr := keeperServer(t, eng, obs)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	for range 3 {
		if err := c.Do(ctx, "RLOCK", "y", 60000, "TOKEN", "mine", "AUTOEXTEND").Err(); err != nil {
			t.Fatal(err)
		}
	}
	obs.waitUntil(t, "one lease kept", func(live int, _ []string) bool { return live == 1 })
	if s := c.Info(ctx, "leases").Val(); !strings.Contains(s, "autoextend_leases:1\r\n") {
		t.Fatalf("INFO leases: %q", s)
	}
	if err := c.Do(ctx, "RUNLOCK", "y", "mine").Err(); err != nil {
		t.Fatal(err)
	}
	<-eng.released
	obs.waitUntil(t, "none kept", func(live int, _ []string) bool { return live == 0 })
	// A fair lock is released (and extended) like a lock.
	if err := c.Do(ctx, "RFAIRLOCK", "f", 60000, "TOKEN", "mine", "AUTOEXTEND").Err(); err != nil {
		t.Fatal(err)
	}
	obs.waitUntil(t, "the fair lock kept", func(live int, _ []string) bool { return live == 1 })
	if err := c.Do(ctx, "RUNLOCK", "f", "mine").Err(); err != nil {
		t.Fatal(err)
	}
	<-eng.released
	obs.waitUntil(t, "the fair lock no longer kept", func(live int, _ []string) bool { return live == 0 })
	for i := range 8 {
		if err := c.Do(ctx, "RLOCK", fmt.Sprint("z", i), 60000, "AUTOEXTEND").Err(); err != nil {
			t.Fatalf("lease %d of 8: %v", i+1, err)
		}
	}
	if err := c.Do(ctx, "RLOCK", "z8", 60000, "AUTOEXTEND").Err(); err == nil || err.Error() != "ERR too many auto-extended leases" {
		t.Fatalf("lease 9 of 8: %v", err)
	}
}

// TestKeeperClientExtensionAfterItsRound: a client's REXTEND of a lease
// its connection keeps alive, sent while the keeper's extension round is
// in flight, reaches the engine after that round and not beside it. The
// round asks for the ttl known when it started (300 ms): landing after the
// client's 60 s on the masters, it would cut the lock's ttl back below the
// validity the client was just given.
func TestKeeperClientExtensionAfterItsRound(t *testing.T) {
	eng := newKeeperEngine()
	entered, gate := make(chan struct{}), make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	var mu sync.Mutex
	var landed []time.Duration // the ttl of each extension, as each ends
	first := true
	eng.extend = func(_ *quorum.Lease, ttl time.Duration) time.Duration {
		mu.Lock()
		block := first && ttl == 300*time.Millisecond
		first = first && !block
		mu.Unlock()
		if block {
			close(entered)
			<-gate
		}
		mu.Lock()
		landed = append(landed, ttl)
		mu.Unlock()
		return ttl
	}
	addr := keeperServer(t, eng, nil)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	v, err := c.Do(ctx, "RLOCK", "x", 300, "AUTOEXTEND").Result()
	if err != nil {
		t.Fatal(err)
	}
	tok := v.([]any)[0].(string)
	select {
	case <-entered: // the keeper's first round is in flight
	case <-time.After(5 * time.Second):
		t.Fatal("not extended by the keeper")
	}
	replied := make(chan error, 1)
	go func() { replied <- c.Do(ctx, "REXTEND", "x", tok, 60000).Err() }()
	select {
	case err := <-replied:
		t.Fatalf("REXTEND answered (%v) while the keeper's round was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	open.Do(func() { close(gate) })
	select {
	case err := <-replied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("REXTEND not answered after the keeper's round")
	}
	mu.Lock()
	got := slices.Clone(landed)
	mu.Unlock()
	if want := []time.Duration{300 * time.Millisecond, time.Minute}; !slices.Equal(got, want) {
		t.Fatalf("extensions landed with ttls %v, want %v (the keeper's round, then the client's)", got, want)
	}
}
