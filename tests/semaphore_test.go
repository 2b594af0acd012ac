package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// permit is a decoded RSEMACQUIRE reply.
type permit struct {
	token    string
	validity int64
}

func trySemAcquire(c *redis.Client, args ...any) (permit, bool, error) {
	v, err := c.Do(context.Background(), append([]any{"RSEMACQUIRE"}, args...)...).Result()
	if err == redis.Nil {
		return permit{}, false, nil
	}
	if err != nil {
		return permit{}, false, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return permit{}, false, fmt.Errorf("RSEMACQUIRE reply %#v, want [token, validity]", v)
	}
	tok, ok1 := arr[0].(string)
	val, ok2 := arr[1].(int64)
	if !ok1 || !ok2 || tok == "" || val <= 0 {
		return permit{}, false, fmt.Errorf("RSEMACQUIRE reply %#v, want [token, validity > 0]", v)
	}
	return permit{token: tok, validity: val}, true, nil
}

func semAcquire(t testing.TB, c *redis.Client, args ...any) (permit, bool) {
	t.Helper()
	p, ok, err := trySemAcquire(c, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p, ok
}

// TestSemaphoreReplies: every reply of the four commands through two
// proxies on 5 real masters, bad input that never reaches a master, and
// nothing left once every permit is gone.
func TestSemaphoreReplies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())).Client(), startProxy(t, defaults(cl.addrs())).Client()
	ctx := context.Background()

	var held []permit
	for i := range 3 {
		p, ok := semAcquire(t, []*redis.Client{a, b}[i%2], "api", 3, 10000)
		if !ok || p.validity > 10000 || p.validity < 9000 {
			t.Fatalf("permit %d: %v %+v", i, ok, p)
		}
		held = append(held, p)
	}
	if _, ok := semAcquire(t, a, "api", 3, 10000); ok {
		t.Fatal("a 4th permit of 3 was granted")
	}
	for _, c := range []*redis.Client{a, b} {
		if n := do(t, c, "RSEMCOUNT", "api"); n != int64(3) {
			t.Fatalf("RSEMCOUNT = %v, want 3", n)
		}
	}
	expectErr(t, b, "ERR semaphore 'api' has limit 3", "RSEMACQUIRE", "api", 4, 1000)
	if v := do(t, b, "RSEMRELEASE", "api", "nope"); v != int64(0) {
		t.Fatalf("RSEMRELEASE with a wrong token = %v", v)
	}
	if err := b.Do(ctx, "RSEMEXTEND", "api", "nope", 1000).Err(); err != redis.Nil {
		t.Fatalf("RSEMEXTEND with a wrong token = %v, want nil", err)
	}
	if v := do(t, b, "RSEMEXTEND", "api", held[0].token, 30000); v.(int64) < 29000 || v.(int64) > 30000 {
		t.Fatalf("RSEMEXTEND = %v", v)
	}
	if v := do(t, a, "RSEMRELEASE", "api", held[0].token); v != int64(1) {
		t.Fatalf("RSEMRELEASE = %v", v)
	}
	if v := do(t, a, "RSEMRELEASE", "api", held[0].token); v != int64(0) {
		t.Fatalf("second RSEMRELEASE = %v", v)
	}
	if n := do(t, b, "RSEMCOUNT", "api"); n != int64(2) {
		t.Fatalf("RSEMCOUNT after a release = %v", n)
	}
	// COUNT: all or nothing.
	if _, ok := semAcquire(t, a, "api", 3, 10000, "COUNT", 2); ok {
		t.Fatal("COUNT 2 granted with 1 permit free")
	}
	p, ok := semAcquire(t, b, "api", 3, 200, "TOKEN", "short")
	if !ok || p.token != "short" {
		t.Fatalf("the freed permit: %v %+v", ok, p)
	}
	// A TOKEN retry takes the same permit, not another one.
	if p, ok := semAcquire(t, a, "api", 3, 200, "TOKEN", "short"); !ok || p.token != "short" {
		t.Fatalf("TOKEN retry: %v %+v", ok, p)
	}
	if n := do(t, b, "RSEMCOUNT", "api"); n != int64(3) {
		t.Fatalf("RSEMCOUNT after a TOKEN retry = %v, want 3", n)
	}
	// Expiry: the 200 ms permit lapses and can be taken again.
	waitFor(t, 2*time.Second, "the 200 ms permit to expire", func() bool { return do(t, a, "RSEMCOUNT", "api") == int64(2) })
	for _, h := range held[1:] {
		if v := do(t, a, "RSEMRELEASE", "api", h.token); v != int64(1) {
			t.Fatalf("RSEMRELEASE = %v", v)
		}
	}
	two, ok := semAcquire(t, a, "api", 3, 10000, "COUNT", 2, "WAIT", 100)
	if !ok {
		t.Fatal("COUNT 2 of 3 free")
	}
	if n := do(t, b, "RSEMCOUNT", "api"); n != int64(2) {
		t.Fatalf("RSEMCOUNT with COUNT 2 held = %v", n)
	}
	if v := do(t, b, "RSEMRELEASE", "api", two.token); v != int64(1) {
		t.Fatalf("RSEMRELEASE of COUNT 2 = %v", v)
	}
	if n := do(t, b, "RSEMCOUNT", "nothing-here"); n != int64(0) {
		t.Fatalf("RSEMCOUNT of an unused semaphore = %v", n)
	}

	// Bad input: Redis's wording, nothing sent to the masters.
	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	for _, tc := range []struct {
		want string
		args []any
	}{
		{"ERR wrong number of arguments for 'rsemacquire' command", []any{"RSEMACQUIRE", "api"}},
		{"ERR semaphore name must not be empty", []any{"RSEMACQUIRE", "", 3, 1000}},
		{"ERR value is not an integer or out of range", []any{"RSEMACQUIRE", "api", "x", 1000}},
		{"ERR limit must be 1 to 1000", []any{"RSEMACQUIRE", "api", 0, 1000}},
		{"ERR limit must be 1 to 1000", []any{"RSEMACQUIRE", "api", 1001, 1000}},
		{"ERR invalid expire time in 'rsemacquire' command", []any{"RSEMACQUIRE", "api", 3, 0}},
		{"ERR count must be 1 to the limit", []any{"RSEMACQUIRE", "api", 3, 1000, "COUNT", 4}},
		{"ERR count must be 1 to the limit", []any{"RSEMACQUIRE", "api", 3, 1000, "COUNT", 0}},
		{"ERR syntax error", []any{"RSEMACQUIRE", "api", 3, 1000, "COUNT"}},
		{"ERR timeout is negative", []any{"RSEMACQUIRE", "api", 3, 1000, "WAIT", -1}},
		{"ERR token must be 1 to 128 bytes", []any{"RSEMACQUIRE", "api", 3, 1000, "TOKEN", ""}},
		{"ERR syntax error", []any{"RSEMACQUIRE", "api", 3, 1000, "NX"}},
		{"ERR wrong number of arguments for 'rsemrelease' command", []any{"RSEMRELEASE", "api"}},
		{"ERR token must be 1 to 128 bytes", []any{"RSEMRELEASE", "api", ""}},
		{"ERR invalid expire time in 'rsemextend' command", []any{"RSEMEXTEND", "api", "t", 0}},
		{"ERR wrong number of arguments for 'rsemcount' command", []any{"RSEMCOUNT"}},
		{"ERR semaphore name must not be empty", []any{"RSEMCOUNT", ""}},
	} {
		expectErr(t, a, tc.want, tc.args...)
	}
	if redistest.Real() {
		if after := cl.scriptCalls(t); after != before {
			t.Errorf("bad input reached the masters: %d script calls, was %d", after, before)
		}
	}
	// Without a limit (RSEMACQUIRE semaphore ttl), one a quorum store is
	// needed: none is, as the semaphore is not in use.
	expectErr(t, a, "ERR no limit stored for the semaphore on a quorum of masters: give one, or set it with RSEMSET", "RSEMACQUIRE", "api", 3)
	// Every permit is gone: nothing is left, not even the recorded limit
	// (only the master-wide lease high-water mark, expiring with the
	// longest permit).
	for i, rc := range cl.direct {
		for _, k := range rc.Keys(ctx, "*").Val() {
			if k != "redlock-proxy:lease-hwm" && k != "redlock-proxy:intact" {
				t.Errorf("master%d holds %v", i, k)
			}
		}
	}
}

// TestSemaphoreWaitWoken: a waiter on one proxy gets the permit another
// proxy's client releases, well before its retry timer.
func TestSemaphoreWaitWoken(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.retryDelay = 5 * time.Second
	cfg.retryJitter = 0
	cfg.maxWait = 10 * time.Second
	a, b := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	p, ok := semAcquire(t, a, "gate", 1, 30000)
	if !ok {
		t.Fatal("first permit")
	}
	got := make(chan error, 1)
	var waited time.Duration
	go func() {
		start := time.Now()
		_, ok, err := trySemAcquire(b, "gate", 1, 30000, "WAIT", 8000)
		waited = time.Since(start)
		if err == nil && !ok {
			err = fmt.Errorf("WAIT ran out")
		}
		got <- err
	}()
	// The waiter subscribes on every master before it sleeps.
	cl.waitSubscribed(t, "redlock-proxy:semreleased:4:gate")
	if v := do(t, a, "RSEMRELEASE", "gate", p.token); v != int64(1) {
		t.Fatalf("RSEMRELEASE = %v", v)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if waited > 3*time.Second {
		t.Fatalf("the waiter took %v: not woken by the release", waited)
	}
}

// TestSemaphoreNeverOverSubscribed: 12 workers on two proxies hammer a
// limit-3 semaphore while one master is paused and resumed and another is
// restarted empty. From the replies alone (a permit is live from its reply
// until its release was sent, or its validity ran out), never more than 3
// are live at once.
func TestSemaphoreNeverOverSubscribed(t *testing.T) {
	busy(t)
	redistest.RequireReal(t, "SIGSTOP and restarts need real masters")
	const limit, workers = 3, 12
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = 2 * time.Second // the quarantine of the restarted master
	proxies := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	type live struct{ from, to time.Time }
	var (
		mu      sync.Mutex
		windows []live
		refused atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, workers)
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(soak(t))*6*time.Second)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(time.Second)
		cl.servers[1].Pause()
		time.Sleep(time.Second)
		cl.servers[1].Resume()
		time.Sleep(500 * time.Millisecond)
		cl.servers[3].Restart()
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := proxies[w%2]
			for ctx.Err() == nil {
				sent := time.Now()
				p, ok, err := trySemAcquire(c, "pool", limit, 500, "WAIT", 1000)
				got := time.Now()
				if err != nil && strings.HasPrefix(err.Error(), "NOQUORUM ") {
					refused.Add(1)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if !ok {
					refused.Add(1)
					continue
				}
				time.Sleep(time.Duration(w%4) * time.Millisecond)
				end := time.Now()
				if valid := sent.Add(time.Duration(p.validity) * time.Millisecond); valid.Before(end) {
					end = valid
				}
				mu.Lock()
				windows = append(windows, live{got, end})
				mu.Unlock()
				v, err := c.Do(context.Background(), "RSEMRELEASE", "pool", p.token).Result()
				if err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM ") {
					errs <- fmt.Errorf("worker %d: RSEMRELEASE: %w", w, err)
					return
				}
				_ = v // 0 is possible when a paused master held a bare quorum's slot
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(windows) < 200 {
		t.Fatalf("only %d permits granted", len(windows))
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].from.Before(windows[j].from) })
	most := 0
	for i, w := range windows {
		n := 0
		for _, o := range windows[:i+1] {
			if o.to.After(w.from) {
				n++
			}
		}
		most = max(most, n)
		if n > limit {
			t.Fatalf("%d permits live at once at grant %d of %d (%v)", n, i, len(windows), w.from)
		}
	}
	t.Logf("%d permits, at most %d live at once, %d tries refused or without quorum", len(windows), most, refused.Load())
	waitFor(t, 5*time.Second, "every permit to be released or expire", func() bool {
		for _, rc := range cl.direct {
			keys, err := rc.Keys(context.Background(), "*").Result()
			if err != nil {
				return false
			}
			for _, k := range keys {
				// Waiters take tickets from the fence sequence, a
				// master-wide key like the lease high-water mark.
				if !masterWide(k) {
					return false
				}
			}
		}
		return true
	})
}

// TestSemaphoreWaitersFirst: 24 clients on two proxies share 3 permits,
// each holding its grant 20 ms and asking again at once with WAIT 1000;
// 3 of them ask COUNT 3 (all the permits). A waiter woken by a release
// gets the permit before a request that arrived after it (the releaser
// asking again), and a COUNT 3 request keeps its place among single
// permits, so fewer than 1% of the requests end nil. From the replies
// alone (live from the reply until the release was sent, or the validity
// ran out), never more than 3 permits are live at once.
func TestSemaphoreWaitersFirst(t *testing.T) {
	busy(t)
	const limit, workers, hold = 3, 24, 20 * time.Millisecond
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	proxies := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	type live struct {
		from, to time.Time
		n        int
	}
	var (
		mu       sync.Mutex
		windows  []live
		asked    [2]atomic.Int64 // by kind: COUNT 1, COUNT 3
		nils     [2]atomic.Int64
		noquorum atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	// At least 4 s and 300 requests (the share that failed is measured
	// on enough of them when the machine is busy), 30 s at most.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(soak(t))*30*time.Second)
	defer cancel()
	minEnd := time.Now().Add(time.Duration(soak(t)) * 4 * time.Second)
	enough := func() bool {
		return time.Now().After(minEnd) && asked[0].Load()+asked[1].Load() >= 300
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := proxies[w%2]
			kind, count := 0, 1
			if w < 3 {
				kind, count = 1, limit
			}
			for ctx.Err() == nil && !enough() {
				sent := time.Now()
				asked[kind].Add(1)
				p, ok, err := trySemAcquire(c, "pool", limit, 1000, "COUNT", count, "WAIT", 1000)
				got := time.Now()
				if err != nil && strings.HasPrefix(err.Error(), "NOQUORUM ") {
					noquorum.Add(1)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if !ok {
					nils[kind].Add(1)
					continue
				}
				time.Sleep(hold)
				end := time.Now()
				if valid := sent.Add(time.Duration(p.validity) * time.Millisecond); valid.Before(end) {
					end = valid
				}
				mu.Lock()
				windows = append(windows, live{got, end, count})
				mu.Unlock()
				if err := c.Do(context.Background(), "RSEMRELEASE", "pool", p.token).Err(); err != nil {
					errs <- fmt.Errorf("worker %d: RSEMRELEASE: %w", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].from.Before(windows[j].from) })
	most := 0
	for i, w := range windows {
		n := 0
		for _, o := range windows[:i+1] {
			if o.to.After(w.from) {
				n += o.n
			}
		}
		most = max(most, n)
		if n > limit {
			t.Fatalf("%d permits live at once at grant %d of %d (%v)", n, i, len(windows), w.from)
		}
	}
	total := asked[0].Load() + asked[1].Load()
	failed := nils[0].Load() + nils[1].Load() + noquorum.Load()
	t.Logf("%d requests (%d COUNT 3), %d granted, at most %d permits live; nil: %d of COUNT 1, %d of COUNT 3, NOQUORUM %d: %.2f%%",
		total, asked[1].Load(), len(windows), most, nils[0].Load(), nils[1].Load(), noquorum.Load(), 100*float64(failed)/float64(total))
	if total < 200 {
		t.Fatalf("only %d requests in the run", total)
	}
	if failed*100 >= total {
		t.Fatalf("%d of %d WAIT 1000 requests ended nil or without quorum (%.2f%%), want under 1%%", failed, total, 100*float64(failed)/float64(total))
	}
}

// TestSemSetTwoProxies (issue 28, resizable semaphores): 12 clients on two
// proxies take permits without giving a limit while the limit stored with
// RSEMSET goes down and up every 150 ms, a master is paused and another
// restarted empty. At no grant are more permits live than the highest
// limit that may be in force (the last RSEMSET answered before the grant
// was asked for, or any sent before its reply); then a waiter for a full
// semaphore is granted at once when RSEMSET raises the limit, far sooner
// than its retry timer; nothing is left after the limit's keep.
func TestSemSetTwoProxies(t *testing.T) {
	waits(t) // mostly waits (retry delays, a quarantine): overlaps the other waiting tests
	redistest.RequireReal(t, "SIGSTOP and restarts need real masters")
	const workers = 12
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = 2 * time.Second // the quarantine of the restarted master
	cfg.retryDelay, cfg.retryJitter = 2*time.Second, time.Millisecond
	proxies := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	ctx := context.Background()
	type resize struct {
		sent, done time.Time
		limit      int
	}
	type live struct{ sent, from, to time.Time }
	var (
		mu      sync.Mutex
		resizes []resize
		windows []live
		wg      sync.WaitGroup
		errs    = make(chan error, workers+1)
	)
	set := func(c *redis.Client, name string, limit int) resize {
		for {
			r := resize{sent: time.Now(), limit: limit}
			err := c.Do(ctx, "RSEMSET", name, limit, "KEEP", 2000).Err()
			r.done = time.Now()
			if err == nil {
				return r
			}
			if !strings.HasPrefix(err.Error(), "NOQUORUM ") {
				t.Errorf("RSEMSET %s %d: %v", name, limit, err)
				return r
			}
		}
	}
	resizes = append(resizes, set(proxies[0], "pool", 3))
	// The run lasts its span, and on past it (up to five spans) until it
	// has the grants and resizes the check needs: on a loaded machine
	// fewer permits fit in one span.
	span := time.Duration(soak(t)) * 4 * time.Second
	runCtx, cancel := context.WithTimeout(ctx, 5*span)
	defer cancel()
	wg.Go(func() {
		minEnd := time.Now().Add(span)
		for sleepCtx(runCtx, 50*time.Millisecond) {
			mu.Lock()
			enough := len(windows) >= 100 && len(resizes) >= 15
			mu.Unlock()
			if enough && time.Now().After(minEnd) {
				cancel()
				return
			}
		}
	})
	wg.Go(func() {
		time.Sleep(500 * time.Millisecond)
		cl.servers[1].Pause()
		time.Sleep(time.Second)
		cl.servers[1].Resume()
		time.Sleep(500 * time.Millisecond)
		cl.servers[3].Restart()
	})
	wg.Go(func() {
		limits := []int{1, 3, 2, 4}
		for i := 0; sleepCtx(runCtx, 150*time.Millisecond); i++ {
			mu.Lock()
			resizes = append(resizes, resize{sent: time.Now(), limit: limits[i%len(limits)]})
			mu.Unlock()
			r := set(proxies[i%2], "pool", limits[i%len(limits)])
			mu.Lock()
			resizes[len(resizes)-1] = r
			mu.Unlock()
		}
	})
	for w := range workers {
		wg.Go(func() {
			c := proxies[w%2]
			for runCtx.Err() == nil {
				sent := time.Now()
				// No WAIT: a try spans few resizes, so the limit in force
				// at its grant is known closely.
				p, ok, err := trySemAcquire(c, "pool", 500)
				got := time.Now()
				if err != nil && (strings.HasPrefix(err.Error(), "NOQUORUM ") || strings.Contains(err.Error(), "no limit stored")) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				time.Sleep(time.Duration(10+10*(w%4)) * time.Millisecond)
				end := time.Now()
				if valid := sent.Add(time.Duration(p.validity) * time.Millisecond); valid.Before(end) {
					end = valid
				}
				mu.Lock()
				windows = append(windows, live{sent, got, end})
				mu.Unlock()
				if err := c.Do(ctx, "RSEMRELEASE", "pool", p.token).Err(); err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM ") {
					errs <- fmt.Errorf("worker %d: RSEMRELEASE: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(windows) < 100 || len(resizes) < 15 {
		t.Fatalf("only %d permits granted, %d resizes", len(windows), len(resizes))
	}
	// bound is the highest limit that may be in force for a grant asked
	// for at sent and answered at got.
	bound := func(sent, got time.Time) int {
		b, last := 0, time.Time{}
		for _, r := range resizes {
			if r.done.Before(sent) && r.done.After(last) {
				b, last = r.limit, r.done
			}
		}
		for _, r := range resizes {
			if !r.done.Before(sent) && r.sent.Before(got) {
				b = max(b, r.limit)
			}
		}
		return b
	}
	sort.Slice(windows, func(i, j int) bool { return windows[i].from.Before(windows[j].from) })
	for i, w := range windows {
		n := 0
		for _, o := range windows[:i+1] {
			if o.to.After(w.from) {
				n++
			}
		}
		if b := bound(w.sent, w.from); n > b {
			t.Fatalf("%d permits live at grant %d of %d (%v), the limit in force at most %d", n, i, len(windows), w.from, b)
		}
	}
	t.Logf("%d permits through %d resizes", len(windows), len(resizes))

	// Raising wakes a waiter on the other proxy at once (its retry timer
	// is 2 s away, past its WAIT).
	set(proxies[0], "raise", 1)
	p, ok := semAcquire(t, proxies[0], "raise", 2000)
	if !ok {
		t.Fatal("the one permit of 'raise'")
	}
	type woken struct {
		p  permit
		at time.Time
	}
	got := make(chan woken, 1)
	go func() {
		w, ok, err := trySemAcquire(proxies[1], "raise", 2000, "WAIT", 1500)
		if err != nil || !ok {
			t.Errorf("the waiter: %v %v", ok, err)
		}
		got <- woken{w, time.Now()}
	}()
	waitFor(t, time.Second, "the waiter to queue", func() bool {
		n := 0
		for _, rc := range cl.direct {
			if rc.Exists(ctx, "redlock-proxy:sem:5:raise:q").Val() == 1 {
				n++
			}
		}
		return n >= 3
	})
	r := set(proxies[0], "raise", 2)
	w := <-got
	if d := w.at.Sub(r.sent); d > time.Second {
		t.Fatalf("the waiter was granted %v after RSEMSET raised the limit", d)
	}
	do(t, proxies[0], "RSEMRELEASE", "raise", p.token)
	do(t, proxies[1], "RSEMRELEASE", "raise", w.p.token)
	// Every permit released or expired, and the limits' keep (2 s) run out.
	cl.expectOnlyFencesWithin(t, 10*time.Second)
}
