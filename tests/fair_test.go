package tests

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// rfairlock sends RFAIRLOCK and decodes the reply like rlock.
func rfairlock(c *redis.Client, args ...any) (grant, bool, error) {
	v, err := c.Do(context.Background(), append([]any{"RFAIRLOCK"}, args...)...).Result()
	if err == redis.Nil {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return grant{}, false, fmt.Errorf("RFAIRLOCK reply %#v is not [token, validity, fence]", v)
	}
	g := grant{}
	g.token, _ = arr[0].(string)
	g.validity, _ = arr[1].(int64)
	g.fence, _ = arr[2].(int64)
	if g.token == "" || g.fence < 1 || g.validity < 1 {
		return grant{}, false, fmt.Errorf("RFAIRLOCK reply %#v has no token, validity or fence", v)
	}
	return g, true, nil
}

// fairQueued counts the live masters on which token waits in resource's
// fair queue.
func (c *cluster) fairQueued(resource, token string) int {
	n := 0
	for _, rc := range c.direct {
		if rc.ZScore(context.Background(), "redlock-proxy:fairq:"+resource, token).Err() == nil {
			n++
		}
	}
	return n
}

// masterWide reports whether k is one of the proxy's master-wide keys:
// the fence sequence and lagging bound, the lease high-water mark
// (which expires with the longest grant the master held) and the intact
// mark (set once, when the proxies first meet the masters).
func masterWide(k string) bool {
	return k == "redlock-proxy:fence-hwm" || k == "redlock-proxy:fence-lag" || k == "redlock-proxy:lease-hwm" || k == "redlock-proxy:intact"
}

// expectOnlyFences fails unless every master holds nothing but the
// master-wide keys: no lock, no fence record, no queue.
func (c *cluster) expectOnlyFences(t testing.TB) {
	t.Helper()
	c.expectOnlyFencesWithin(t, 5*time.Second)
}

// expectOnlyFencesWithin is expectOnlyFences allowing d for keys to be
// deleted or expire: a master that was paused may run a request it
// missed (a try, a release) late, and keep a key until its ttl, as any
// straggler master in Redlock.
func (c *cluster) expectOnlyFencesWithin(t testing.TB, d time.Duration) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(d)
	for {
		left = left[:0]
		for i, rc := range c.direct {
			for _, k := range rc.Keys(context.Background(), "*").Val() {
				if !masterWide(k) {
					left = append(left, fmt.Sprintf("master%d:%s (ttl %v)", i, k, rc.PTTL(context.Background(), k).Val()))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left on the masters: %v", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fairConfig is the proxies' config for fair-lock tests: a retry delay so
// long that a hand-off by timer would show, next to the prompt hand-off
// the release announces.
func fairConfig(cl *cluster) proxyConfig {
	cfg := defaults(cl.addrs())
	cfg.retryDelay = 2 * time.Second
	cfg.retryJitter = 0
	return cfg
}

// TestFairLockReplies: the reply, release and extension as RLOCK's, fair
// and plain locks exclude each other both ways, bad input as RLOCK's with
// nothing sent to the masters.
func TestFairLockReplies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())).Client(), startProxy(t, defaults(cl.addrs())).Client()
	g, ok, err := rfairlock(a, "doc", 10000)
	if err != nil || !ok || g.validity > 10000 || g.validity < 9000 {
		t.Fatalf("RFAIRLOCK on a free resource: %+v %v %v", g, ok, err)
	}
	if _, ok := rlock(t, b, "doc", 1000); ok {
		t.Fatal("RLOCK granted over a fair lock")
	}
	if _, ok, err := rfairlock(b, "doc", 1000, "WAIT", 100); ok || err != nil {
		t.Fatalf("RFAIRLOCK granted over a fair lock: %v %v", ok, err)
	}
	if v := do(t, b, "REXTEND", "doc", g.token, 20000); v.(int64) < 19000 {
		t.Fatalf("REXTEND = %v", v)
	}
	if v := do(t, b, "RUNLOCK", "doc", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	p, _ := rlock(t, a, "doc", 10000)
	if _, ok, err := rfairlock(b, "doc", 1000); ok || err != nil {
		t.Fatalf("RFAIRLOCK granted over a plain lock: %v %v", ok, err)
	}
	do(t, a, "RUNLOCK", "doc", p.token)
	g2, ok, err := rfairlock(b, "doc", 1000, "TOKEN", "mine", "WAIT", 100)
	if err != nil || !ok || g2.token != "mine" || g2.fence <= g.fence {
		t.Fatalf("RFAIRLOCK with TOKEN: %+v %v %v (first fence %d)", g2, ok, err, g.fence)
	}
	do(t, a, "RUNLOCK", "doc", "mine")

	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	for _, tc := range []struct {
		want string
		args []any
	}{
		{"ERR wrong number of arguments for 'rfairlock' command", []any{"RFAIRLOCK", "doc"}},
		{"ERR resource name must not be empty", []any{"RFAIRLOCK", "", 1000}},
		{"ERR value is not an integer or out of range", []any{"RFAIRLOCK", "doc", "x"}},
		{"ERR invalid expire time in 'rfairlock' command", []any{"RFAIRLOCK", "doc", 0}},
		{"ERR invalid expire time in 'rfairlock' command (limits.max_ttl is 1h0m0s)", []any{"RFAIRLOCK", "doc", 3600001}},
		{"ERR timeout is negative", []any{"RFAIRLOCK", "doc", 1000, "WAIT", -1}},
		{"ERR syntax error", []any{"RFAIRLOCK", "doc", 1000, "WAIT"}},
		{"ERR syntax error", []any{"RFAIRLOCK", "doc", 1000, "WAIT", 1, "WAIT", 1}},
		{"ERR token must be 1 to 128 bytes", []any{"RFAIRLOCK", "doc", 1000, "TOKEN", ""}},
		{"ERR syntax error", []any{"RFAIRLOCK", "doc", 1000, "NX"}},
	} {
		expectErr(t, a, tc.want, tc.args...)
	}
	if redistest.Real() {
		if after := cl.scriptCalls(t); after != before {
			t.Errorf("bad input reached the masters: %d script calls, was %d", after, before)
		}
	}
	cl.expectOnlyFences(t)
}

// fairWaiter is one RFAIRLOCK caller's outcome.
type fairWaiter struct {
	who     int
	c       *redis.Client // the waiter's client, which releases its lock
	g       grant
	err     error
	granted time.Time
}

// queueWaiters starts n waiters on resource, alternating between the
// clients, each queued (on a quorum of masters) before the next arrives,
// gap apart; waiter i uses TOKEN w<i> and WAIT 30s.
func queueWaiters(t *testing.T, cl *cluster, clients []*redis.Client, resource string, n int, gap time.Duration) chan fairWaiter {
	out := make(chan fairWaiter, n)
	for i := range n {
		tok := fmt.Sprintf("w%d", i)
		c := clients[i%len(clients)]
		go func() {
			g, ok, err := rfairlock(c, resource, 10000, "WAIT", 30000, "TOKEN", tok)
			if err == nil && !ok {
				err = fmt.Errorf("%s: WAIT ran out", tok)
			}
			out <- fairWaiter{who: i, c: c, g: g, err: err, granted: time.Now()}
		}()
		waitFor(t, 5*time.Second, tok+" queued on a quorum", func() bool { return cl.fairQueued(resource, tok) >= 3 })
		time.Sleep(gap) // the next one arrives later
	}
	return out
}

// handOffs releases holder (held through c), then each waiter in turn as
// it is granted, through the waiter's own client, and returns the waiters
// in grant order and each hand-off's latency (release sent -> next
// grant), after each pause(i) (i-th hand-off).
func handOffs(t *testing.T, c *redis.Client, resource string, holder grant, got chan fairWaiter, n int, pause func(i int)) ([]fairWaiter, []time.Duration) {
	t.Helper()
	var order []fairWaiter
	var lat []time.Duration
	release := holder
	for i := range n {
		if pause != nil {
			pause(i)
		}
		t0 := time.Now()
		if v := do(t, c, "RUNLOCK", resource, release.token); v != int64(1) {
			t.Fatalf("RUNLOCK before hand-off %d = %v", i, v)
		}
		var w fairWaiter
		select {
		case w = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("hand-off %d: no waiter granted", i)
		}
		if w.err != nil {
			t.Fatalf("hand-off %d: %v", i, w.err)
		}
		if len(order) > 0 && w.g.fence <= order[len(order)-1].g.fence {
			t.Errorf("hand-off %d: fence %d after %d", i, w.g.fence, order[len(order)-1].g.fence)
		}
		order = append(order, w)
		lat = append(lat, w.granted.Sub(t0))
		release, c = w.g, w.c
	}
	if v := do(t, c, "RUNLOCK", resource, release.token); v != int64(1) {
		t.Fatalf("last RUNLOCK = %v", v)
	}
	return order, lat
}

func whoOrder(ws []fairWaiter) []int {
	out := make([]int, len(ws))
	for i, w := range ws {
		out[i] = w.who
	}
	return out
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestFairLockOrder: 10 waiters arriving 100 ms apart through both
// proxies are granted in exactly that order, each woken by the release
// (the retry delay is 2 s), and nothing is left on the masters.
func TestFairLockOrder(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	holder, ok, err := rfairlock(a, "line", 10000)
	if !ok || err != nil {
		t.Fatalf("holder: %v %v", ok, err)
	}
	const n = 10
	got := queueWaiters(t, cl, []*redis.Client{a, b}, "line", n, 100*time.Millisecond)
	order, lat := handOffs(t, a, "line", holder, got, n, nil)
	if who := whoOrder(order); !slices.Equal(who, upTo(n)) {
		t.Fatalf("granted in order %v, arrived in order %v", who, upTo(n))
	}
	slices.Sort(lat)
	t.Logf("hand-off latency: min %v, median %v, max %v", lat[0], lat[n/2], lat[n-1])
	if lat[n-1] > time.Second {
		t.Errorf("slowest hand-off took %v: a retry timer (2 s), not the release", lat[n-1])
	}
	cl.expectOnlyFences(t)
}

// TestFairLockLeavers: a waiter whose WAIT runs out and one whose client
// disconnects leave the queue at once: the hand-offs skip them without
// waiting for fair.stale_after or a retry timer.
func TestFairLockLeavers(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	a, b := pa.Client(), pb.Client()
	holder, _, _ := rfairlock(a, "door", 10000)
	got := make(chan fairWaiter, 2)
	wait := func(c *redis.Client, who int, tok string) {
		g, ok, err := rfairlock(c, "door", 10000, "WAIT", 30000, "TOKEN", tok)
		if err == nil && !ok {
			err = fmt.Errorf("%s: WAIT ran out", tok)
		}
		got <- fairWaiter{who: who, c: c, g: g, err: err, granted: time.Now()}
	}
	queued := func(tok string) {
		waitFor(t, 5*time.Second, tok+" queued", func() bool { return cl.fairQueued("door", tok) >= 3 })
	}
	go wait(b, 0, "first")
	queued("first")
	expired := make(chan error, 1)
	go func() {
		_, ok, err := rfairlock(a, "door", 10000, "WAIT", 700, "TOKEN", "expires")
		if ok {
			err = fmt.Errorf("granted")
		}
		expired <- err
	}()
	queued("expires")
	// A client that hangs up while it waits.
	conn, err := net.Dial("tcp", pb.Addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "*7\r\n$9\r\nRFAIRLOCK\r\n$4\r\ndoor\r\n$5\r\n10000\r\n$4\r\nWAIT\r\n$5\r\n30000\r\n$5\r\nTOKEN\r\n$7\r\nhangsup\r\n")
	queued("hangsup")
	go wait(a, 1, "last")
	queued("last")
	if err := <-expired; err != nil {
		t.Fatalf("the waiter whose WAIT ran out: %v", err)
	}
	conn.Close()
	waitFor(t, time.Second, "the leavers out of the queue on every master", func() bool {
		return cl.fairQueued("door", "expires") == 0 && cl.fairQueued("door", "hangsup") == 0
	})
	order, lat := handOffs(t, a, "door", holder, got, 2, nil)
	if who := whoOrder(order); !slices.Equal(who, []int{0, 1}) {
		t.Fatalf("granted %v", who)
	}
	for i, d := range lat {
		if d > time.Second {
			t.Errorf("hand-off %d took %v: waited for a leaver or a timer", i, d)
		}
	}
	cl.expectOnlyFences(t)
}

// TestFairLockProxyKilled: a proxy killed (SIGKILL) while its waiters
// queue cannot tell the masters they left. Their places live a second
// past the proxy's latest try, whatever fair.stale_after says (60s here):
// the waiters of the other proxy are granted, in order, about a second
// after the kill, and the queue is gone at the end.
func TestFairLockProxyKilled(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.extra = "fair:\n  stale_after: 60s\n"
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	a, b := pa.Client(), pb.Client()
	holder, _, _ := rfairlock(a, "job", 10000)
	// Two waiters on the doomed proxy, then two on the survivor.
	for _, tok := range []string{"d0", "d1"} {
		go rfairlock(b, "job", 10000, "WAIT", 30000, "TOKEN", tok)
		waitFor(t, 5*time.Second, tok+" queued", func() bool { return cl.fairQueued("job", tok) >= 3 })
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var grants []string
	var at []time.Duration
	start := time.Now()
	for _, tok := range []string{"s0", "s1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, ok, err := rfairlock(a, "job", 10000, "WAIT", 30000, "TOKEN", tok)
			if !ok || err != nil {
				t.Errorf("%s: %v %v", tok, ok, err)
				return
			}
			mu.Lock()
			grants = append(grants, tok)
			at = append(at, time.Since(start))
			mu.Unlock()
			do(t, a, "RUNLOCK", "job", g.token)
		}()
		waitFor(t, 5*time.Second, tok+" queued", func() bool { return cl.fairQueued("job", tok) >= 3 })
	}
	pb.Kill()
	killed := time.Now()
	// On every master, the dead waiters count as gone at most a second
	// after the kill (their deadlines, on the master's clock).
	for i, rc := range cl.direct {
		now, err := rc.Time(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{"d0", "d1"} {
			dl, err := rc.ZScore(context.Background(), "redlock-proxy:fairq-dl:job", tok).Result()
			if err != nil {
				continue // gone already
			}
			if left := time.Duration(int64(dl)-now.UnixMilli()) * time.Millisecond; left > time.Second {
				t.Errorf("master %d: %s counts as queued for %v more after its proxy died", i, tok, left)
			}
		}
	}
	do(t, a, "RUNLOCK", "job", holder.token)
	wg.Wait()
	if !slices.Equal(grants, []string{"s0", "s1"}) {
		t.Fatalf("granted %v, want s0 then s1", grants)
	}
	// The survivors get in once the dead places are a second old, at
	// their next try (a retry: 150 ms at most).
	if d := time.Since(killed); d > time.Second+400*time.Millisecond {
		t.Errorf("survivors waited %v after the kill", d)
	}
	t.Logf("grants at %v after the waiters queued; killed %v after", at, killed.Sub(start))
	cl.expectOnlyFencesWithin(t, 2*time.Second)
}

// TestFairWaiterKeepsItsPlace: a waiter of a live proxy keeps its place
// counted on every master while it waits, however long retry_delay is
// (3s here, three times a place's life): a waiting call tries at least
// every 250 ms, which renews it.
func TestFairWaiterKeepsItsPlace(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.retryDelay, cfg.retryJitter = 3*time.Second, 0
	p := startProxy(t, cfg)
	c := p.Client()
	holder, _, _ := rfairlock(c, "job", 10000)
	wc := p.Client()
	type result struct {
		token string
		ok    bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		g, ok, err := rfairlock(wc, "job", 10000, "WAIT", 30000, "TOKEN", "w")
		done <- result{g.token, ok, err}
	}()
	waitFor(t, 5*time.Second, "w queued", func() bool { return cl.fairQueued("job", "w") >= 3 })
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for i, rc := range cl.direct {
			now, err := rc.Time(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			dl, err := rc.ZScore(context.Background(), "redlock-proxy:fairq-dl:job", "w").Result()
			if err != nil || int64(dl) <= now.UnixMilli() {
				t.Fatalf("master %d: the live waiter's place ran out (deadline %v, now %d, %v)", i, dl, now.UnixMilli(), err)
			}
		}
	}
	do(t, c, "RUNLOCK", "job", holder.token)
	r := <-done
	if !r.ok || r.err != nil {
		t.Fatalf("the waiter was not granted: %v %v", r.ok, r.err)
	}
	do(t, wc, "RUNLOCK", "job", r.token)
	cl.expectOnlyFences(t)
}

// TestFairLockMasterPaused: a master paused (SIGSTOP) for the first half
// of the hand-offs and resumed (with the requests it missed still queued
// on its connections) for the second half changes neither their order
// nor their promptness. The pause starts once the waiters queued: a lease
// held on a bare quorum that includes the paused master could not be
// released (NOQUORUM, as the reply rule says) until its ttl.
func TestFairLockMasterPaused(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	holder, _, _ := rfairlock(b, "paused", 10000)
	const n = 8
	got := queueWaiters(t, cl, []*redis.Client{a, b}, "paused", n, 20*time.Millisecond)
	order, lat := handOffs(t, b, "paused", holder, got, n, func(i int) {
		switch i {
		case 0:
			cl.servers[1].Pause()
		case n / 2:
			cl.servers[1].Resume()
		}
	})
	if who := whoOrder(order); !slices.Equal(who, upTo(n)) {
		t.Fatalf("granted in order %v with a master paused, arrived %v", who, upTo(n))
	}
	t.Logf("hand-offs: %v", lat)
	for i, d := range lat {
		if d > time.Second {
			t.Errorf("hand-off %d took %v", i, d)
		}
	}
	cl.expectOnlyFencesWithin(t, 12*time.Second) // the locks' ttl is 10 s
}
