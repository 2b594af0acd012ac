package tests

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var hexToken = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestLockReplies walks every reply of RLOCK, RUNLOCK and REXTEND in
// PROTOCOL.md against 5 real masters.
func TestLockReplies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	ctx := context.Background()

	g, ok := rlock(t, c, "orders:42", 30000)
	if !ok {
		t.Fatal("RLOCK on a free resource was not granted")
	}
	if !hexToken.MatchString(g.token) {
		t.Errorf("fresh token %q is not 128 bits of hex", g.token)
	}
	if g.validity <= 0 || g.validity > 30000-300-2 {
		t.Errorf("validity %d outside (0, ttl - drift]", g.validity)
	}
	if g.fence != 1 {
		t.Errorf("first fence %d, want 1", g.fence)
	}
	// The lock is a plain string key holding the token, with the ttl.
	if h := cl.holders("orders:42", g.token); h != 5 {
		t.Errorf("lock held on %d of 5 masters", h)
	}
	if pttl := cl.direct[0].PTTL(ctx, "orders:42").Val(); pttl <= 29000*time.Millisecond || pttl > 30*time.Second {
		t.Errorf("PTTL %v, want about 30s", pttl)
	}

	// Held: nil, like SET NX.
	if _, ok := rlock(t, c, "orders:42", 30000); ok {
		t.Fatal("second RLOCK granted while held")
	}

	// REXTEND: the new validity, with the right token only.
	if v := do(t, c, "REXTEND", "orders:42", g.token, 60000); v.(int64) <= 30000 || v.(int64) > 60000 {
		t.Errorf("REXTEND validity %v", v)
	}
	if pttl := cl.direct[1].PTTL(ctx, "orders:42").Val(); pttl <= 59*time.Second {
		t.Errorf("PTTL after REXTEND %v, want about 60s", pttl)
	}
	if v := do(t, c, "REXTEND", "orders:42", "not-the-token", 60000); v != nil {
		t.Errorf("REXTEND with a wrong token = %v, want nil", v)
	}

	// RUNLOCK: 0 for a wrong token, 1 while held, 0 after.
	if v := do(t, c, "RUNLOCK", "orders:42", "not-the-token"); v != int64(0) {
		t.Errorf("RUNLOCK with wrong token = %v", v)
	}
	if v := do(t, c, "RUNLOCK", "orders:42", g.token); v != int64(1) {
		t.Errorf("RUNLOCK = %v, want 1", v)
	}
	if v := do(t, c, "RUNLOCK", "orders:42", g.token); v != int64(0) {
		t.Errorf("second RUNLOCK = %v, want 0", v)
	}
	if v := do(t, c, "REXTEND", "orders:42", g.token, 1000); v != nil {
		t.Errorf("REXTEND after release = %v, want nil", v)
	}
	cl.expectNoLocks(t)

	// The next grant has a greater fence; an RUNLOCK then RLOCK at once
	// works (no straggler left behind by the release).
	g2, ok := rlock(t, c, "orders:42", 30000)
	if !ok || g2.fence <= g.fence {
		t.Fatalf("re-lock: %v %+v after fence %d", ok, g2, g.fence)
	}
	do(t, c, "RUNLOCK", "orders:42", g2.token)
	cl.expectNoLocks(t)
}

// TestTokenRetry: a client that lost the reply of RLOCK ... TOKEN t may send
// it again and gets the lock, with a reset ttl and the same fence (the same
// grant; never a lower one); nobody else can take it meanwhile.
func TestTokenRetry(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	g1, ok := rlock(t, c, "job", 5000, "TOKEN", "client-7:attempt")
	if !ok || g1.token != "client-7:attempt" {
		t.Fatalf("RLOCK with TOKEN: %v %+v", ok, g1)
	}
	g2, ok := rlock(t, c, "job", 20000, "TOKEN", "client-7:attempt")
	if !ok || g2.token != g1.token || g2.fence < g1.fence {
		t.Fatalf("retry with the same token: %v %+v after %+v", ok, g2, g1)
	}
	if pttl := cl.direct[2].PTTL(context.Background(), "job").Val(); pttl <= 19*time.Second {
		t.Errorf("retry did not reset the ttl: %v", pttl)
	}
	if _, ok := rlock(t, c, "job", 5000, "TOKEN", "someone-else"); ok {
		t.Fatal("another token took a held lock")
	}
	if v := do(t, c, "RUNLOCK", "job", "client-7:attempt"); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	cl.expectNoLocks(t)
}

// TestBadInput checks every error of PROTOCOL.md's table, in Redis's
// wording, and that none leaves anything on any master.
func TestBadInput(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = time.Minute
	cfg.maxWait = 10 * time.Second
	p := startProxy(t, cfg)
	c := p.Client()
	long := strings.Repeat("t", 129)
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"RLOCK", "r"}, "ERR wrong number of arguments for 'rlock' command"},
		{[]any{"RLOCK"}, "ERR wrong number of arguments for 'rlock' command"},
		{[]any{"RUNLOCK", "r"}, "ERR wrong number of arguments for 'runlock' command"},
		{[]any{"RUNLOCK", "r", "t", "x"}, "ERR wrong number of arguments for 'runlock' command"},
		{[]any{"REXTEND", "r", "t"}, "ERR wrong number of arguments for 'rextend' command"},
		{[]any{"RLOCK", "r", "ten"}, "ERR value is not an integer or out of range"},
		{[]any{"RLOCK", "r", "1.5"}, "ERR value is not an integer or out of range"},
		{[]any{"RLOCK", "r", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]any{"RLOCK", "r", 0}, "ERR invalid expire time in 'rlock' command"},
		{[]any{"RLOCK", "r", -5}, "ERR invalid expire time in 'rlock' command"},
		{[]any{"RLOCK", "r", 60001}, "ERR invalid expire time in 'rlock' command (limits.max_ttl is 1m0s)"},
		{[]any{"REXTEND", "r", "t", 0}, "ERR invalid expire time in 'rextend' command"},
		{[]any{"REXTEND", "r", "t", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"RLOCK", "r", 1000, "WAIT"}, "ERR syntax error"},
		{[]any{"RLOCK", "r", 1000, "WAIT", "soon"}, "ERR value is not an integer or out of range"},
		{[]any{"RLOCK", "r", 1000, "WAIT", -1}, "ERR timeout is negative"},
		{[]any{"RLOCK", "r", 1000, "WAIT", 10001}, "ERR timeout is out of range (limits.max_wait is 10s)"},
		{[]any{"RLOCK", "r", 1000, "NX"}, "ERR syntax error"},
		{[]any{"RLOCK", "r", 1000, "WAIT", 1, "WAIT", 1}, "ERR syntax error"},
		{[]any{"RLOCK", "r", 1000, "TOKEN"}, "ERR syntax error"},
		{[]any{"RLOCK", "r", 1000, "TOKEN", long}, "ERR token must be 1 to 128 bytes"},
		{[]any{"RLOCK", "r", 1000, "TOKEN", ""}, "ERR token must be 1 to 128 bytes"},
		{[]any{"RLOCK", "", 1000}, "ERR resource name must not be empty"},
		{[]any{"RUNLOCK", "", "t"}, "ERR resource name must not be empty"},
		{[]any{"RUNLOCK", "r", long}, "ERR token must be 1 to 128 bytes"},
		{[]any{"RLOCK", "redlock-proxy:fence:r", 1000}, "ERR resource name is reserved"},
		{[]any{"RLOCKX", "a", "b"}, "ERR unknown command 'RLOCKX', with args beginning with: 'a' 'b' "},
		{[]any{"GET", "x"}, "ERR unknown command 'GET', with args beginning with: 'x' (served in drop-in mode: set dropin: true in the configuration, see docs/PROTOCOL.md, Drop-in mode)"},
		{[]any{"SELECT", 1}, "ERR DB index is out of range"},
	}
	for _, tc := range tests {
		expectErr(t, c, tc.want, tc.args...)
	}
	for i, rc := range cl.direct {
		for _, k := range rc.Keys(context.Background(), "*").Val() {
			if !masterWide(k) {
				t.Errorf("master %d holds %s after bad input", i, k)
			}
		}
	}
	// Option names are case-insensitive and come in any order.
	g, ok := rlock(t, c, "r", 1000, "token", "abc", "wait", 10)
	if !ok || g.token != "abc" {
		t.Fatalf("lower-case options: %v %+v", ok, g)
	}
}

// TestTwoProxies: two stateless proxies in front of the same masters
// exclude each other and share fences.
func TestTwoProxies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	ca, cb := a.Client(), b.Client()
	g, ok := rlock(t, ca, "shared", 10000)
	if !ok {
		t.Fatal("not granted")
	}
	if _, ok := rlock(t, cb, "shared", 10000); ok {
		t.Fatal("second proxy granted a held lock")
	}
	if v := do(t, cb, "REXTEND", "shared", g.token, 20000); v == nil {
		t.Fatal("REXTEND through the other proxy failed")
	}
	if v := do(t, cb, "RUNLOCK", "shared", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK through the other proxy = %v", v)
	}
	g2, ok := rlock(t, cb, "shared", 10000)
	if !ok || g2.fence <= g.fence {
		t.Fatalf("after release: %v %+v (previous fence %d)", ok, g2, g.fence)
	}
}

// TestNoQuorum: with 3 of 5 masters down, RLOCK answers NOQUORUM and leaves
// nothing on the two that are up; RUNLOCK and REXTEND too.
func TestNoQuorum(t *testing.T) {
	waits(t) // mostly waits (expiries, retries, restarts): overlaps the other waiting tests
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	g, ok := rlock(t, c, "held", 60000)
	if !ok {
		t.Fatal("not granted")
	}
	for _, s := range cl.servers[:3] {
		s.Kill()
	}
	expectErr(t, c, "NOQUORUM 2 of 5 masters answered, 3 needed", "RLOCK", "fresh", 10000)
	expectErr(t, c, "NOQUORUM 2 of 5 masters answered, 3 needed", "RLOCK", "fresh", 10000, "WAIT", 300)
	expectErr(t, c, "NOQUORUM 2 of 5 masters answered, 3 needed", "REXTEND", "held", g.token, 10000)
	expectErr(t, c, "NOQUORUM 2 of 5 masters answered, 3 needed", "RUNLOCK", "held", g.token)
	for i, rc := range cl.direct[3:] {
		if n := rc.Exists(context.Background(), "fresh").Val(); n != 0 {
			t.Errorf("master %d holds the refused lock", i+3)
		}
	}
	info := do(t, c, "INFO", "masters").(string)
	if strings.Count(info, "state=down") != 3 || !strings.Contains(info, "masters_up:2") {
		t.Errorf("INFO masters does not show 3 down:\n%s", info)
	}
}

// TestMasterFaults: one master killed and another paused (SIGSTOP) leave a
// quorum of 5: locks are still granted, each within the per-master timeout;
// after SIGCONT the paused master catches up and nothing is left behind.
func TestMasterFaults(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	cl.servers[0].Kill()
	cl.servers[1].Pause()
	defer cl.servers[1].Resume()
	for i := range 20 {
		t0 := time.Now()
		g, ok := rlock(t, c, "faulty", 5000)
		if !ok {
			t.Fatalf("try %d: not granted with 3 of 5 masters", i)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("try %d took %v: the paused master was waited for", i, d)
		}
		t1 := time.Now()
		if v := do(t, c, "RUNLOCK", "faulty", g.token); v != int64(1) {
			t.Fatalf("RUNLOCK = %v", v)
		}
		t.Logf("lock %v unlock %v", t1.Sub(t0), time.Since(t1))
	}
	cl.servers[1].Resume()
	// The paused master now runs the queued acquires and their releases, in
	// order: it must end up holding nothing.
	waitFor(t, 5*time.Second, "the resumed master to drain its queue", func() bool {
		return cl.direct[1].Ping(context.Background()).Err() == nil
	})
	waitFor(t, 5*time.Second, "no lock left on the resumed master", func() bool {
		return cl.direct[1].Exists(context.Background(), "faulty").Val() == 0
	})
	cl.expectNoLocks(t)
}

// TestWaitWokenAcrossProxies: a WAIT on proxy B is woken by a release on
// proxy A through the masters' pub/sub, long before its retry timer.
func TestWaitWokenAcrossProxies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.retryDelay = 10 * time.Second
	cfg.retryJitter = time.Millisecond
	a, b := startProxy(t, cfg), startProxy(t, cfg)
	ca, cb := a.Client(), b.Client()
	g, _ := rlock(t, ca, "queue", 60000)

	type result struct {
		g   grant
		ok  bool
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		g, ok, err := tryRlock(cb, "queue", 5000, "WAIT", 20000)
		got <- result{g, ok, err, time.Now()}
	}()
	// The waiter subscribes on every master before it sleeps.
	cl.waitSubscribed(t, "redlock-proxy:released:queue")
	released := time.Now()
	if v := do(t, ca, "RUNLOCK", "queue", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	r := <-got
	if r.err != nil || !r.ok {
		t.Fatalf("waiter: %+v", r)
	}
	woke := r.at.Sub(released)
	t.Logf("waiter granted %v after the release on the other proxy (retry timer: 10s)", woke)
	if woke > 500*time.Millisecond {
		t.Fatalf("waiter granted %v after the release: woken by its timer, not the release", woke)
	}
	// Once it has left, nobody is subscribed any more.
	waitFor(t, 5*time.Second, "the waiter to unsubscribe", func() bool {
		for _, rc := range cl.direct {
			if rc.PubSubNumSub(context.Background(), "redlock-proxy:released:queue").Val()["redlock-proxy:released:queue"] != 0 {
				return false
			}
		}
		return true
	})
}

// TestWaitRunsOut: a WAIT that runs out answers nil after about wait ms.
func TestWaitRunsOut(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	rlock(t, c, "busy", 60000)
	t0 := time.Now()
	if _, ok := rlock(t, c, "busy", 1000, "WAIT", 300); ok {
		t.Fatal("granted while held")
	}
	if d := time.Since(t0); d < 300*time.Millisecond || d > 2*time.Second {
		t.Fatalf("WAIT 300 returned after %v", d)
	}
}

// TestWaiterHangsUp: a client that disconnects while waiting stops waiting
// and holds nothing, even when the resource frees up afterwards.
func TestWaiterHangsUp(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	g, _ := rlock(t, c, "door", 60000)

	waiter := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
	err := waiter.Do(context.Background(), "RLOCK", "door", 60000, "WAIT", 60000).Err()
	if err == nil {
		t.Fatal("waiter returned without a timeout")
	}
	waiter.Close() // the client gives up and hangs up
	waitFor(t, 5*time.Second, "the proxy to notice the hang-up", func() bool {
		return strings.Contains(do(t, c, "INFO", "clients").(string), "blocked_clients:0")
	})
	if v := do(t, c, "RUNLOCK", "door", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	cl.expectNoLocks(t)
	if _, ok := rlock(t, c, "door", 1000); !ok {
		t.Fatal("the resource is taken after its only waiter hung up")
	}
}

// TestMalformedRESP: a protocol error closes that connection only.
func TestMalformedRESP(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	tests := []struct{ send, want string }{
		{"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'\r\n"},
	}
	for _, tc := range tests {
		reply, closed := rawExchange(t, p.Addr, tc.send)
		if reply != tc.want || !closed {
			t.Errorf("sent %q: got %q (closed %v), want %q and a close", tc.send, reply, closed, tc.want)
		}
	}
	if _, ok := rlock(t, c, "still-serving", 1000); !ok {
		t.Fatal("proxy stopped serving other clients")
	}
}
