package tests

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// rrlock sends RRLOCK and decodes [token, validity]; ok false on nil.
func rrlock(c *redis.Client, args ...any) (string, bool, error) {
	v, err := c.Do(context.Background(), append([]any{"RRLOCK"}, args...)...).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return "", false, fmt.Errorf("RRLOCK reply %#v is not [token, validity]", v)
	}
	tok, ok1 := arr[0].(string)
	val, ok2 := arr[1].(int64)
	if !ok1 || !ok2 || tok == "" || val < 1 {
		return "", false, fmt.Errorf("RRLOCK reply %#v", v)
	}
	return tok, true, nil
}

// TestReadWriteLockReplies: readers share through both proxies; every kind
// of writer is refused beside them and they beside a writer; release and
// extension replies; bad input in Redis's wording with nothing sent to
// the masters; nothing left at the end.
func TestReadWriteLockReplies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())).Client(), startProxy(t, defaults(cl.addrs())).Client()
	start := time.Now()
	r1, ok, err := rrlock(a, "doc", 10000)
	if !ok || err != nil {
		t.Fatalf("first reader: %v %v", ok, err)
	}
	r2, ok, err := rrlock(b, "doc", 10000, "TOKEN", "reader-two")
	if !ok || err != nil || r2 != "reader-two" {
		t.Fatalf("second reader: %q %v %v", r2, ok, err)
	}
	if _, ok := rlock(t, b, "doc", 1000); ok {
		t.Fatal("RLOCK beside readers")
	}
	// RLOCKINFO: a map in RESP3 (go-redis's default), a flat array in RESP2.
	info := func(c *redis.Client, args ...any) map[any]any {
		t.Helper()
		v := do(t, c, append([]any{"RLOCKINFO"}, args...)...)
		switch m := v.(type) {
		case map[any]any:
			return m
		case []any:
			out := map[any]any{}
			for i := 0; i+1 < len(m); i += 2 {
				out[m[i]] = m[i+1]
			}
			return out
		}
		t.Fatalf("RLOCKINFO reply %#v", v)
		return nil
	}
	resp2 := redis.NewClient(&redis.Options{Addr: startProxy(t, defaults(cl.addrs())).Addr, Protocol: 2})
	defer resp2.Close()
	for _, c := range []*redis.Client{a, resp2} {
		// ttl_ms is what is left of the longest reader's 10 s: at most
		// 10000, and at least 10000 less the time since the first
		// reader was asked for, read after the reply (a slow machine makes this window wide,
		// never wrong).
		m := info(c, "doc", r1)
		floor := 10000 - time.Since(start).Milliseconds()
		ttl, _ := m["ttl_ms"].(int64)
		if m["held"] != int64(1) || m["readers"] != int64(2) || m["mine"] != int64(1) || m["autoextend"] != int64(0) || ttl < floor || ttl > 10000 {
			t.Fatalf("RLOCKINFO with 2 readers: %v", m)
		}
	}
	if m := info(b, "doc", "stranger"); m["mine"] != int64(0) {
		t.Fatalf("RLOCKINFO for a stranger: %v", m)
	}
	if _, ok, err := rfairlock(a, "doc", 1000); ok || err != nil {
		t.Fatalf("RFAIRLOCK beside readers: %v %v", ok, err)
	}
	if v := do(t, a, "RMULTILOCK", 1000, 2, "doc", "other"); v != nil {
		t.Fatalf("RMULTILOCK beside readers: %v", v)
	}
	if v := do(t, b, "RREXTEND", "doc", r1, 20000); v.(int64) < 19000 {
		t.Fatalf("RREXTEND = %v", v)
	}
	if err := b.Do(context.Background(), "RREXTEND", "doc", "nobody", 1000).Err(); err != redis.Nil {
		t.Fatalf("RREXTEND of no reader = %v, want nil", err)
	}
	if v := do(t, a, "RUNLOCK", "doc", r1); v != int64(0) {
		t.Fatalf("RUNLOCK with a reader's token = %v, want 0", v)
	}
	for _, tok := range []string{r1, r2} {
		if v := do(t, b, "RRUNLOCK", "doc", tok); v != int64(1) {
			t.Fatalf("RRUNLOCK %s = %v", tok, v)
		}
	}
	if v := do(t, b, "RRUNLOCK", "doc", r1); v != int64(0) {
		t.Fatalf("second RRUNLOCK = %v", v)
	}
	w, ok := rlock(t, a, "doc", 10000)
	if !ok {
		t.Fatal("writer after the readers left")
	}
	if _, ok, err := rrlock(b, "doc", 1000); ok || err != nil {
		t.Fatalf("RRLOCK beside a writer: %v %v", ok, err)
	}
	if m := info(b, "doc", w.token); m["held"] != int64(1) || m["fence"] != nil || m["mine"] != int64(1) || m["readers"] != nil {
		// (No fence: a plain writer's fence is not kept on the masters.)
		t.Fatalf("RLOCKINFO with a writer: %v", m)
	}
	do(t, a, "RUNLOCK", "doc", w.token)
	if m := info(b, "doc"); len(m) != 3 || m["held"] != int64(0) || m["ttl_ms"] != int64(-1) || m["waiters"] != int64(0) {
		t.Fatalf("RLOCKINFO when free: %v", m)
	}

	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	for _, tc := range []struct {
		want string
		args []any
	}{
		{"ERR wrong number of arguments for 'rrlock' command", []any{"RRLOCK", "doc"}},
		{"ERR resource name must not be empty", []any{"RRLOCK", "", 1000}},
		{"ERR invalid expire time in 'rrlock' command", []any{"RRLOCK", "doc", 0}},
		{"ERR timeout is negative", []any{"RRLOCK", "doc", 1000, "WAIT", -1}},
		{"ERR token must be 1 to 128 bytes", []any{"RRLOCK", "doc", 1000, "TOKEN", ""}},
		{"ERR syntax error", []any{"RRLOCK", "doc", 1000, "NX"}},
		{"ERR wrong number of arguments for 'rrunlock' command", []any{"RRUNLOCK", "doc"}},
		{"ERR token must be 1 to 128 bytes", []any{"RRUNLOCK", "doc", ""}},
		{"ERR invalid expire time in 'rrextend' command", []any{"RREXTEND", "doc", "t", 0}},
		{"ERR wrong number of arguments for 'rlockinfo' command", []any{"RLOCKINFO"}},
		{"ERR token must be 1 to 128 bytes", []any{"RLOCKINFO", "doc", ""}},
		{"ERR syntax error", []any{"RLOCKINFO", "doc", "t", "x"}},
		{"ERR wrong number of arguments for 'rlatch' command", []any{"RLATCH", "l", 3}},
		{"ERR latch name must not be empty", []any{"RLATCH", "", 3, 1000}},
		{"ERR value is not an integer or out of range", []any{"RLATCH", "l", "x", 1000}},
		{"ERR count must be 1 to 1024 (limits.max_args)", []any{"RLATCH", "l", 0, 1000}},
		{"ERR count must be 1 to 1024 (limits.max_args)", []any{"RLATCH", "l", 1025, 1000}},
		{"ERR invalid expire time in 'rlatch' command", []any{"RLATCH", "l", 3, 0}},
		{"ERR wrong number of arguments for 'rlatchdown' command", []any{"RLATCHDOWN", "l"}},
		{"ERR token must be 1 to 128 bytes", []any{"RLATCHDOWN", "l", ""}},
		{"ERR wrong number of arguments for 'rlatchwait' command", []any{"RLATCHWAIT", "l"}},
		{"ERR timeout is negative", []any{"RLATCHWAIT", "l", -1}},
		{"ERR wrong number of arguments for 'rlatchcount' command", []any{"RLATCHCOUNT"}},
		{"ERR latch name must not be empty", []any{"RLATCHCOUNT", ""}},
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

// TestWriterWaitsForReaders: a writer waiting on one proxy keeps new
// readers out, is granted within milliseconds of the last reader's
// release on the other proxy (the retry delay is 2 s), and a reader that
// expires stops blocking writers by itself.
func TestWriterWaitsForReaders(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	r1, _, _ := rrlock(a, "doc", 10000)
	r2, _, _ := rrlock(a, "doc", 10000)
	got := make(chan fairWaiter, 1)
	go func() {
		g, ok, err := tryRlock(b, "doc", 10000, "WAIT", 20000)
		if err == nil && !ok {
			err = fmt.Errorf("WAIT ran out")
		}
		got <- fairWaiter{g: g, err: err, granted: time.Now()}
	}()
	waitFor(t, 5*time.Second, "the writer's waiting mark", func() bool {
		n := 0
		for _, rc := range cl.direct {
			if rc.Exists(context.Background(), "redlock-proxy:rw-w:doc").Val() == 1 {
				n++
			}
		}
		return n >= 3
	})
	if _, ok, err := rrlock(a, "doc", 1000); ok || err != nil {
		t.Fatalf("a new reader while a writer waits: %v %v", ok, err)
	}
	do(t, a, "RRUNLOCK", "doc", r1)
	t1 := time.Now()
	do(t, a, "RRUNLOCK", "doc", r2)
	w := <-got
	if w.err != nil {
		t.Fatal(w.err)
	}
	if d := w.granted.Sub(t1); d > time.Second {
		t.Fatalf("writer granted %v after the last reader left: a timer, not the release", d)
	}
	t.Logf("writer granted %v after the last reader's release was sent", w.granted.Sub(t1))
	do(t, b, "RUNLOCK", "doc", w.g.token)

	// An expired reader stops blocking writers.
	rrlock(a, "short", 300)
	t0 := time.Now()
	g, ok, err := tryRlock(b, "short", 1000, "WAIT", 5000)
	if !ok || err != nil {
		t.Fatalf("writer behind an expiring reader: %v %v", ok, err)
	}
	if d := time.Since(t0); d > 2500*time.Millisecond {
		t.Fatalf("writer waited %v for a 300 ms reader", d)
	}
	do(t, b, "RUNLOCK", "short", g.token)
	cl.expectOnlyFences(t)
}

// TestReadWriteContention: 6 readers and 2 writers on one resource through
// two proxies for several seconds, with one master paused for the middle
// of the run: a writer's hold (from its grant to its release) never
// overlaps anyone else's.
func TestReadWriteContention(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.retryDelay, cfg.retryJitter = 20*time.Millisecond, 10*time.Millisecond
	clients := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	type hold struct {
		writer   bool
		from, to time.Time
	}
	var mu sync.Mutex
	var holds []hold
	d := time.Duration(soak(t)) * 4 * time.Second
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range 8 {
		writer := i < 2
		c := clients[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				var tok string
				var ok bool
				var err error
				if writer {
					var g grant
					g, ok, err = tryRlock(c, "hot", 5000, "WAIT", 1000)
					tok = g.token
				} else {
					tok, ok, err = rrlock(c, "hot", 5000, "WAIT", 1000)
				}
				if err != nil || !ok {
					continue // NOQUORUM while the pause is noticed, or WAIT ran out
				}
				from := time.Now()
				time.Sleep(2 * time.Millisecond)
				to := time.Now()
				cmd := "RRUNLOCK"
				if writer {
					cmd = "RUNLOCK"
				}
				c.Do(context.Background(), cmd, "hot", tok)
				mu.Lock()
				holds = append(holds, hold{writer, from, to})
				mu.Unlock()
				if writer {
					time.Sleep(5 * time.Millisecond) // let readers in, too
				}
			}
		}()
	}
	time.Sleep(d / 4)
	cl.servers[2].Pause()
	time.Sleep(d / 2)
	cl.servers[2].Resume()
	wg.Wait()
	sort.Slice(holds, func(i, j int) bool { return holds[i].from.Before(holds[j].from) })
	var nw, nr int
	for i, h := range holds {
		if h.writer {
			nw++
		} else {
			nr++
		}
		for _, o := range holds[i+1:] {
			if !o.from.Before(h.to) {
				break
			}
			if h.writer || o.writer {
				t.Fatalf("overlap: writer=%v %v-%v and writer=%v from %v", h.writer, h.from, h.to, o.writer, o.from)
			}
		}
	}
	if nw < 10 || nr < 10 {
		t.Fatalf("%d writer and %d reader holds: too few to show anything", nw, nr)
	}
	t.Logf("%d writer and %d reader holds, none of a writer beside anyone", nw, nr)
}

// TestLatches: creation, count mismatch, an arrival counted once however
// often and through whichever proxy it is sent, a waiter on the other
// proxy woken at once by the opening arrival, the missing-latch error
// (RLATCHWAIT waits for a missing latch, and errs only with wait 0),
// nothing left after the ttl.
func TestLatches(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	expectErr(t, a, "ERR no such latch", "RLATCHCOUNT", "start")
	expectErr(t, a, "ERR no such latch", "RLATCHDOWN", "start", "w1")
	expectErr(t, a, "ERR no such latch", "RLATCHWAIT", "start", 0)
	if v := do(t, a, "RLATCHWAIT", "start", 100); v != int64(0) {
		t.Fatalf("RLATCHWAIT 100 on a latch not created = %v, want 0 (the wait ran out)", v)
	}
	if v := do(t, a, "RLATCH", "start", 3, 3000); v != int64(1) {
		t.Fatalf("RLATCH = %v", v)
	}
	if v := do(t, b, "RLATCH", "start", 3, 3000); v != int64(0) {
		t.Fatalf("RLATCH again = %v", v)
	}
	expectErr(t, b, "ERR latch 'start' has count 3", "RLATCH", "start", 4, 3000)
	for _, c := range []*redis.Client{a, b, a} { // a lost reply, retried elsewhere
		if v := do(t, c, "RLATCHDOWN", "start", "w1"); v != int64(2) {
			t.Fatalf("RLATCHDOWN w1 = %v, want 2", v)
		}
	}
	if v := do(t, b, "RLATCHWAIT", "start", 100); v != int64(0) {
		t.Fatalf("RLATCHWAIT on a closed latch = %v", v)
	}
	got := make(chan time.Time, 1)
	go func() {
		v, err := b.Do(context.Background(), "RLATCHWAIT", "start", 10000).Result()
		if v != int64(1) || err != nil {
			t.Errorf("RLATCHWAIT = %v %v", v, err)
		}
		got <- time.Now()
	}()
	if v := do(t, a, "RLATCHDOWN", "start", "w2"); v != int64(1) {
		t.Fatalf("RLATCHDOWN w2 = %v", v)
	}
	waitFor(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return cl.direct[0].PubSubNumSub(context.Background(), "redlock-proxy:latch-open:5:start").Val()["redlock-proxy:latch-open:5:start"] >= 1
	})
	t1 := time.Now()
	if v := do(t, a, "RLATCHDOWN", "start", "w3"); v != int64(0) {
		t.Fatalf("RLATCHDOWN w3 = %v", v)
	}
	if d := (<-got).Sub(t1); d > time.Second {
		t.Fatalf("the waiter woke %v after the opening arrival (retry delay 2 s)", d)
	}
	if v := do(t, b, "RLATCHCOUNT", "start"); v != int64(0) {
		t.Fatalf("RLATCHCOUNT = %v", v)
	}
	waitFor(t, 5*time.Second, "the latch to expire", func() bool {
		return a.Do(context.Background(), "RLATCHCOUNT", "start").Err() != nil
	})
	expectErr(t, a, "ERR no such latch", "RLATCHCOUNT", "start")
	for i, rc := range cl.direct {
		for _, k := range rc.Keys(context.Background(), "*").Val() {
			if !masterWide(k) {
				t.Errorf("master%d keeps %s", i, k)
			}
		}
	}
}

// TestLatchWaitBeforeCreate: a worker that waits on a latch before its
// coordinator created it (RLATCHWAIT on proxy A) is answered 1 once the
// coordinator creates it and every arrival comes in through proxy B.
func TestLatchWaitBeforeCreate(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := fairConfig(cl)
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	type result struct {
		v   any
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		v, err := a.Do(context.Background(), "RLATCHWAIT", "job", 10000).Result()
		got <- result{v, err, time.Now()}
	}()
	// The waiter has tried at least once (and found no latch) before the
	// latch exists: its first count reached every master.
	waitFor(t, 5*time.Second, "the waiter's first try", func() bool {
		n := 0
		for _, rc := range cl.direct {
			if rc.PubSubNumSub(context.Background(), "redlock-proxy:latch-open:3:job").Val()["redlock-proxy:latch-open:3:job"] >= 1 {
				n++
			}
		}
		return n == len(cl.direct)
	})
	select {
	case r := <-got:
		t.Fatalf("RLATCHWAIT answered %v %v before the latch existed", r.v, r.err)
	default:
	}
	if v := do(t, b, "RLATCH", "job", 2, 10000); v != int64(1) {
		t.Fatalf("RLATCH = %v", v)
	}
	do(t, b, "RLATCHDOWN", "job", "w1")
	t1 := time.Now()
	if v := do(t, b, "RLATCHDOWN", "job", "w2"); v != int64(0) {
		t.Fatalf("RLATCHDOWN w2 = %v, want 0", v)
	}
	r := <-got
	if r.v != int64(1) || r.err != nil {
		t.Fatalf("RLATCHWAIT before RLATCH = %v %v, want 1", r.v, r.err)
	}
	if d := r.at.Sub(t1); d > time.Second {
		t.Fatalf("the waiter answered %v after the latch opened (retry delay 2 s): not woken by the opening arrival", d)
	}
}

// TestReadWriteFairness: 6 readers and 2 writers that each request again
// as soon as they released (WAIT, 10 ms holds), through two proxies, for
// 6 s. Both sides make progress (a waiting writer's mark used to refuse
// every new reader, and with two writers one was always waiting: 0
// reads), no writer's hold overlaps anyone else's, and no reader waits
// longer than docs/design/rwlock.md's bound allows: the reader phase in
// progress plus one writer hold, each miss of a phase one more hold.
// Here a hold, seen from a client, is at most the 10 ms sleep plus a
// release and a grant through the proxy, and a waiter that misses a
// release's announcement tries again within the retry delay; the bound
// allows three holds and a retry delay each, which a loaded 2-core
// machine stays well within; a starved reader waits its whole WAIT.
func TestReadWriteFairness(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	clients := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	const hold = 10 * time.Millisecond
	perHold := hold + cfg.retryDelay + cfg.retryJitter + 2*cfg.masterTimeout
	bound := 3 * perHold
	const wait = 3000 // ms: a reader still waiting then is starved
	type window struct {
		writer   bool
		from, to time.Time
	}
	var mu sync.Mutex
	var grants []window
	var waits []time.Duration
	var refused [2]int // writers, readers
	d := 6 * time.Second
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range 8 {
		writer := i < 2
		side := 1
		if writer {
			side = 0
		}
		c := clients[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				var tok string
				var ok bool
				var err error
				asked := time.Now()
				if writer {
					var g grant
					g, ok, err = tryRlock(c, "hot", 5000, "WAIT", wait)
					tok = g.token
				} else {
					tok, ok, err = rrlock(c, "hot", 5000, "WAIT", wait)
				}
				from := time.Now()
				if err != nil {
					t.Errorf("writer=%v: %v", writer, err)
					return
				}
				if !ok {
					mu.Lock()
					refused[side]++
					mu.Unlock()
					continue
				}
				time.Sleep(hold)
				to := time.Now()
				cmd := "RRUNLOCK"
				if writer {
					cmd = "RUNLOCK"
				}
				if v, err := c.Do(context.Background(), cmd, "hot", tok).Result(); v != int64(1) || err != nil {
					t.Errorf("%s = %v %v", cmd, v, err)
				}
				mu.Lock()
				grants = append(grants, window{writer, from, to})
				if !writer {
					waits = append(waits, from.Sub(asked))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(grants, func(i, j int) bool { return grants[i].from.Before(grants[j].from) })
	var nw, nr int
	for i, g := range grants {
		if g.writer {
			nw++
		} else {
			nr++
		}
		for _, o := range grants[i+1:] {
			if !o.from.Before(g.to) {
				break
			}
			if g.writer || o.writer {
				t.Fatalf("overlap: writer=%v %v-%v and writer=%v from %v", g.writer, g.from, g.to, o.writer, o.from)
			}
		}
	}
	slices.Sort(waits)
	var worst, p99 time.Duration
	if len(waits) > 0 {
		worst, p99 = waits[len(waits)-1], waits[len(waits)*99/100]
	}
	t.Logf("%d writes, %d reads; refused after WAIT: %d writers, %d readers; reader wait p99 %v, max %v (bound %v)",
		nw, nr, refused[0], refused[1], p99, worst, bound)
	if nw < 20 || nr < 100 {
		t.Errorf("%d writes and %d reads in %v: a side starves (want at least 20 and 100)", nw, nr, d)
	}
	if refused[1] > 0 {
		t.Errorf("%d reader requests waited their whole WAIT (%d ms)", refused[1], wait)
	}
	if worst > bound {
		t.Errorf("a reader waited %v, more than the bound %v", worst, bound)
	}
}

// TestDowngradeTwoProxies (issue 28, downgrade): a writer on one proxy
// takes the read lock with its own token, releases the write lock, then
// the read lock, over and over, while writers and readers on the other
// proxy try the resource all the time and one master is paused for part
// of the run. No writer of the other proxy ever holds while the
// downgrading client holds either lock (from each grant's reply to the
// sending of its release), no reader while it holds the write lock, and
// readers of the other proxy do get in beside the downgraded reader.
func TestDowngradeTwoProxies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	ctx := context.Background()
	type span struct{ from, to time.Time }
	var (
		mu              sync.Mutex
		writes, reads   []span // the downgrading client's holds
		others, readers []span // the other proxy's writers' and readers' holds
	)
	overlaps := func(x span, ys []span) bool {
		for _, y := range ys {
			if x.from.Before(y.to) && y.from.Before(x.to) {
				return true
			}
		}
		return false
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for runCtx.Err() == nil {
				if i%2 == 0 {
					g, ok, err := tryRlock(b, "doc", 1000)
					if err != nil || !ok {
						continue
					}
					got := time.Now()
					time.Sleep(time.Millisecond)
					released := time.Now()
					b.Do(ctx, "RUNLOCK", "doc", g.token)
					mu.Lock()
					others = append(others, span{got, released})
					mu.Unlock()
					continue
				}
				tok, ok, err := rrlock(b, "doc", 1000)
				if err != nil || !ok {
					continue
				}
				got := time.Now()
				time.Sleep(time.Millisecond)
				released := time.Now()
				b.Do(ctx, "RRUNLOCK", "doc", tok)
				mu.Lock()
				readers = append(readers, span{got, released})
				mu.Unlock()
			}
		})
	}
	for round := range 15 {
		if round == 5 {
			cl.servers[2].Pause()
		}
		if round == 10 {
			cl.servers[2].Resume()
		}
		g, ok, err := tryRlock(a, "doc", 3000, "WAIT", 5000)
		if err != nil || !ok {
			t.Fatalf("round %d: the writer: %v %v", round, ok, err)
		}
		w := span{from: time.Now()}
		time.Sleep(20 * time.Millisecond)
		tok, ok, err := rrlock(a, "doc", 3000, "TOKEN", g.token)
		if err != nil || !ok || tok != g.token {
			t.Fatalf("round %d: the downgrade: %q %v %v", round, tok, ok, err)
		}
		r := span{from: time.Now()}
		time.Sleep(20 * time.Millisecond)
		w.to = time.Now()
		if n, err := a.Do(ctx, "RUNLOCK", "doc", g.token).Int64(); n != 1 || err != nil {
			t.Fatalf("round %d: RUNLOCK after the downgrade: %v %v", round, n, err)
		}
		time.Sleep(50 * time.Millisecond)
		r.to = time.Now()
		if n, err := a.Do(ctx, "RRUNLOCK", "doc", g.token).Int64(); n != 1 || err != nil {
			t.Fatalf("round %d: RRUNLOCK: %v %v", round, n, err)
		}
		mu.Lock()
		writes, reads = append(writes, w), append(reads, r)
		mu.Unlock()
	}
	stop()
	wg.Wait()
	for _, o := range others {
		if overlaps(o, writes) || overlaps(o, reads) {
			t.Errorf("a writer on the other proxy held %v..%v beside the downgrading client", o.from, o.to)
		}
	}
	joined := 0
	for _, r := range readers {
		if overlaps(r, writes) {
			t.Errorf("a reader on the other proxy held %v..%v beside the write lock", r.from, r.to)
		}
		if overlaps(r, reads) {
			joined++
		}
	}
	if joined == 0 || len(others) == 0 {
		t.Fatalf("the other proxy's readers joined a downgraded reader %d times, its writers held %d times", joined, len(others))
	}
	t.Logf("%d holds by the other proxy's writers, %d by its readers (%d beside a downgraded reader)", len(others), len(readers), joined)
	cl.expectOnlyFences(t)
}
