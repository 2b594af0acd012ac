package tests

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// masterLine returns master i's line of INFO masters.
func masterLine(t testing.TB, c *redis.Client, i int) string {
	t.Helper()
	info := do(t, c, "INFO", "masters").(string)
	m := regexp.MustCompile(fmt.Sprintf(`(?m)^master%d:(.*)\r$`, i)).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no master%d in INFO masters:\n%s", i, info)
	}
	return m[1]
}

func restartScenario(t *testing.T, quarantine bool) (holder grant, other *redis.Client, cl *cluster, started time.Time) {
	redistest.RequireReal(t, "embedded masters report no run_id, so a restart cannot be seen")
	cl = newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = 4 * time.Second
	if !quarantine {
		cfg.extra = "restart_quarantine: false\n"
	}
	a, b := startProxy(t, cfg), startProxy(t, cfg)
	ca, cb := a.Client(), b.Client()
	// Both proxies know the masters' run_ids before anything restarts.
	for _, c := range []*redis.Client{ca, cb} {
		waitFor(t, 5*time.Second, "every master to be up", func() bool {
			return strings.Contains(do(t, c, "INFO", "masters").(string), "masters_up:5")
		})
	}
	started = time.Now()
	g, ok := rlock(t, ca, "ledger", 4000)
	if !ok {
		t.Fatal("not granted")
	}
	// The lock reaches all five masters, and their fence sequences its
	// fence (write-backs go to every holder, stragglers included).
	waitFor(t, time.Second, "the lock and its fence on all five masters", func() bool {
		return cl.fenceRecords(g.fence) == 5 && cl.holders("ledger", g.token) == 5
	})
	for _, s := range cl.servers[:3] {
		s.Restart() // killed and started again, empty
	}
	return g, cb, cl, started
}

// TestRestartQuarantine: A holds a lock granted on all 5 masters; 3 of them
// restart empty. A client on another proxy is refused for as long as A's
// grant is valid, INFO shows the quarantine, and after max_ttl the masters
// rejoin and locks work again, with a greater fence.
func TestRestartQuarantine(t *testing.T) {
	waits(t) // mostly waits (expiries, quarantines, restarts): overlaps the other waiting tests
	g, cb, _, started := restartScenario(t, true)
	validUntil := started.Add(time.Duration(g.validity) * time.Millisecond)
	// One WAIT spanning the rest of A's validity: every try must fail.
	wait := time.Until(validUntil).Milliseconds()
	if wait < 500 {
		t.Fatalf("too little validity left to test (%dms)", wait)
	}
	_, ok, err := tryRlock(cb, "ledger", 1000, "WAIT", wait)
	if ok {
		t.Fatal("a second client was granted the lock while the first grant was valid: quarantine failed")
	}
	if err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM 2 of 5 masters answered, 3 needed") {
		t.Fatalf("refusal: %v", err)
	}
	line := masterLine(t, cb, 0)
	if !strings.Contains(line, "state=quarantined") || !strings.Contains(line, "restarts=1") {
		t.Fatalf("INFO masters does not show the quarantine: %s", line)
	}
	if q := regexp.MustCompile(`quarantine_ms=(\d+)`).FindStringSubmatch(line); q == nil || q[1] == "0" {
		t.Fatalf("no quarantine time left shown: %s", line)
	}
	// After max_ttl (4s from when the proxy saw the restart) they rejoin.
	waitFor(t, 10*time.Second, "the restarted masters to rejoin", func() bool {
		return strings.Contains(do(t, cb, "INFO", "masters").(string), "masters_up:5")
	})
	g2, ok := rlock(t, cb, "ledger", 1000)
	if !ok {
		t.Fatal("not granted after the masters rejoined")
	}
	if g2.fence <= g.fence {
		t.Fatalf("fence %d after %d", g2.fence, g.fence)
	}
}

// TestRestartWithoutQuarantine is the same scenario with
// restart_quarantine: false: the second client IS granted the lock while
// the first grant is still valid. It shows what the quarantine prevents
// (and that the test above can fail).
func TestRestartWithoutQuarantine(t *testing.T) {
	busy(t)
	g, cb, _, started := restartScenario(t, false)
	validUntil := started.Add(time.Duration(g.validity) * time.Millisecond)
	g2, ok, err := tryRlock(cb, "ledger", 1000, "WAIT", time.Until(validUntil).Milliseconds()-100)
	if err != nil || !ok {
		t.Fatalf("without quarantine the double grant did not happen (%v, %v): this test no longer shows the danger", ok, err)
	}
	if time.Now().After(validUntil) {
		t.Fatal("granted only after the first grant expired")
	}
	t.Logf("double grant: token %s (fence %d) while %s (fence %d) is valid for %v more",
		g2.token, g2.fence, g.token, g.fence, time.Until(validUntil).Round(time.Millisecond))
}

// TestFencesAcrossRestarts: fences strictly increase through two proxies
// while masters lose their data. The sequence builds the case the fence
// floor exists for: C misses fences 6-10 (its scripts
// are refused, as in a partition), B restarts empty and rejoins, A dies;
// the next grants can only use {B, C}, where C still holds 5.
func TestFencesAcrossRestarts(t *testing.T) {
	waits(t) // mostly waits (expiries, quarantines, restarts): overlaps the other waiting tests
	redistest.RequireReal(t, "embedded masters report no run_id and have no ACL")
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = time.Second
	cfg.masterTimeout = 50 * time.Millisecond
	proxies := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	ctx := context.Background()
	var fences []int64
	grant := func(n int) {
		t.Helper()
		for i := range n {
			c := proxies[len(fences)%2]
			g, ok, err := tryRlock(c, "ledger", 1000, "WAIT", 3000)
			if err != nil || !ok {
				t.Fatalf("grant %d of %d: %v %v (fences so far %v)", i, n, ok, err, fences)
			}
			fences = append(fences, g.fence)
			do(t, c, "RUNLOCK", "ledger", g.token)
		}
	}
	grant(5)
	waitFor(t, time.Second, "fence 5 to reach C's fence sequence", func() bool {
		return cl.direct[2].Get(ctx, "redlock-proxy:fence-hwm").Val() == "5"
	})
	// C refuses scripts: it takes no part in grants 6-10.
	if err := cl.direct[2].Do(ctx, "ACL", "SETUSER", "default", "-eval", "-evalsha").Err(); err != nil {
		t.Fatal(err)
	}
	grant(5)
	if err := cl.direct[2].Do(ctx, "ACL", "SETUSER", "default", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if v := cl.direct[2].Get(ctx, "redlock-proxy:fence-hwm").Val(); v != "5" {
		t.Fatalf("C's fence sequence is %q, want the stale 5 this test is about", v)
	}
	cl.servers[1].Restart()
	for _, c := range proxies {
		waitFor(t, 10*time.Second, "B's restart to be seen and B to rejoin", func() bool {
			line := masterLine(t, c, 1)
			return strings.Contains(line, "restarts=1") && strings.Contains(line, "state=up")
		})
	}
	cl.servers[0].Kill()
	grant(6)
	// Then every master restarts empty, one after another, with grants
	// going on through both proxies meanwhile (on the two that vote).
	for _, i := range []int{0, 2, 1} {
		cl.servers[i].Restart()
		for _, c := range proxies {
			waitFor(t, 10*time.Second, fmt.Sprintf("master %d's restart to be seen", i), func() bool {
				return !strings.Contains(masterLine(t, c, i), "state=up")
			})
		}
		grant(3)
		for _, c := range proxies {
			waitFor(t, 10*time.Second, fmt.Sprintf("master %d to rejoin", i), func() bool {
				return strings.Contains(masterLine(t, c, i), "state=up")
			})
		}
		grant(3)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence went from %d to %d: %v", fences[i-1], fences[i], fences)
		}
	}
	t.Logf("fences: %v", fences)
}

// TestStartWithMastersDown: a proxy whose masters are mostly unreachable
// starts anyway, says it is not ready, answers NOQUORUM, and serves once
// they come up (dialled again in the background). The master that is up
// does not vote either: no proxy marked these masters yet, and they are
// taken as new only once every one of them answered (a master down while
// the others were marked lacks the mark too: docs/design/restarts.md).
func TestStartWithMastersDown(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cl.servers[0].Kill()
	cl.servers[1].Kill()
	cfg := defaults(cl.addrs())
	cfg.metricsListen = "127.0.0.1:0"
	p := startProxy(t, cfg)
	c := p.Client()
	ready := func() int {
		resp, err := http.Get(p.MetricsURL(t) + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with 1 of 3 masters up", code)
	}
	expectErr(t, c, "NOQUORUM 0 of 3 masters answered, 2 needed", "RLOCK", "boot", 1000)
	if line := masterLine(t, c, 2); !strings.Contains(line, "state=quarantined") {
		t.Fatalf("the master that is up, not checked yet: %s", line)
	}
	cl.servers[0].Restart()
	cl.servers[1].Restart()
	waitFor(t, 10*time.Second, "the proxy to become ready", func() bool { return ready() == http.StatusOK })
	if _, ok := rlock(t, c, "boot", 1000); !ok {
		t.Fatal("not granted once the masters are up")
	}
}

// TestRollingRestart: every master restarts empty, one after the other,
// under a steady load of 1.5 s locks through two proxies (max_ttl is 1 h).
// Each restarted master is quarantined only as long as the longest grant
// still live (about 1.5 s), not max_ttl, so the service keeps a quorum
// throughout; and no resource is ever granted twice at once.
func TestRollingRestart(t *testing.T) {
	waits(t) // mostly waits (expiries, retries, restarts): overlaps the other waiting tests
	redistest.RequireReal(t, "embedded masters report no run_id, so a restart cannot be seen")
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	clients := []*redis.Client{startProxy(t, cfg).Client(), startProxy(t, cfg).Client()}
	for _, c := range clients {
		waitFor(t, 5*time.Second, "every master to be up", func() bool {
			return strings.Contains(do(t, c, "INFO", "masters").(string), "masters_up:5")
		})
	}
	type hold struct {
		from, to time.Time
	}
	var mu sync.Mutex
	holds := map[string][]hold{}
	var grants, noQuorum, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := fmt.Sprintf("acct:%d", (w+i)%3)
				g, ok, err := tryRlock(c, r, 1500)
				switch {
				case err != nil && strings.HasPrefix(err.Error(), "NOQUORUM"):
					noQuorum.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				case err != nil:
					t.Errorf("RLOCK: %v", err)
					return
				case !ok:
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				from := time.Now()
				time.Sleep(20 * time.Millisecond)
				to := time.Now()
				c.Do(context.Background(), "RUNLOCK", r, g.token)
				grants.Add(1)
				mu.Lock()
				holds[r] = append(holds[r], hold{from, to})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	for i, s := range cl.servers {
		t0 := time.Now()
		s.Restart()
		waitFor(t, 15*time.Second, fmt.Sprintf("master%d to rejoin on both proxies", i), func() bool {
			for _, c := range clients {
				line := masterLine(t, c, i)
				if !strings.Contains(line, "restarts=1") || !strings.Contains(line, "state=up") {
					return false
				}
			}
			return true
		})
		d := time.Since(t0)
		t.Logf("master%d restarted empty and rejoined after %v", i, d.Round(time.Millisecond))
		if d > 6*time.Second {
			t.Errorf("master%d was out for %v with 1.5 s leases", i, d)
		}
	}
	close(stop)
	wg.Wait()
	for r, hs := range holds {
		sort.Slice(hs, func(i, j int) bool { return hs[i].from.Before(hs[j].from) })
		for i := 1; i < len(hs); i++ {
			if hs[i].from.Before(hs[i-1].to) {
				t.Fatalf("%s granted twice: %v-%v and from %v", r, hs[i-1].from, hs[i-1].to, hs[i].from)
			}
		}
	}
	t.Logf("%d grants, %d refused, %d NOQUORUM during the rolling restart", grants.Load(), refused.Load(), noQuorum.Load())
	if grants.Load() < 100 {
		t.Fatalf("only %d grants: the load did not run", grants.Load())
	}
}
