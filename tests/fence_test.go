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

// holding is one grant as its client saw it: from the moment the grant
// arrived to the moment the client sent RUNLOCK.
type holding struct {
	fence    int64
	got      time.Time
	released time.Time
	worker   int
}

// TestFencesUnderContention runs a thousand contended grants of one
// resource through two proxies (more under make soak) while a master is
// killed after a quarter of them, and checks every grant against every
// other: the windows never overlap, and the fences strictly increase in
// grant order.
func TestFencesUnderContention(t *testing.T) {
	busy(t)
	const workers = 6
	target := int64(1000 * soak(t))
	redistest.RequireReal(t, "embedded masters run inside this -race test process, too slow for 50ms master timeouts under this load")
	cl := newCluster(t, 5)
	proxies := []*Proxy{startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))}
	clients := []*redis.Client{proxies[0].Client(), proxies[1].Client()}

	var (
		mu       sync.Mutex
		holds    []holding
		granted  atomic.Int64
		nils     atomic.Int64
		killOnce sync.Once
		killed   [2]time.Time // the kill's start and end
		lost     atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(soak(t))*3*time.Minute)
	defer cancel()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			for granted.Load() < target && ctx.Err() == nil {
				g, ok, err := tryRlock(c, "fenced", 2000, "WAIT", 5000)
				got := time.Now()
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					nils.Add(1)
					continue
				}
				if n := granted.Add(1); n == target/4 {
					killOnce.Do(func() {
						start := time.Now()
						cl.servers[2].Kill()
						mu.Lock()
						killed = [2]time.Time{start, time.Now()}
						mu.Unlock()
					})
				}
				released := time.Now()
				v, err := c.Do(ctx, "RUNLOCK", "fenced", g.token).Result()
				// A grant may hold exactly a quorum; if a master it holds
				// dies while it is held, the release cannot confirm a
				// quorum: NOQUORUM (the four answers decide neither way),
				// or 0. Only that grant may.
				mu.Lock()
				k := killed
				mu.Unlock()
				lostToKill := (err == nil && v == int64(0)) || (err != nil && strings.HasPrefix(err.Error(), "NOQUORUM "))
				if lostToKill && !k[0].IsZero() && !got.After(k[1]) && !released.Before(k[0]) {
					err = nil
					lost.Add(1)
					v = int64(1)
				}
				if err != nil || v != int64(1) {
					errs <- fmt.Errorf("RUNLOCK of grant %+v (held %v, after %d grants) = %v, %v",
						g, time.Since(got), granted.Load(), v, err)
					return
				}
				mu.Lock()
				holds = append(holds, holding{fence: g.fence, got: got, released: released, worker: w})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker failed: %v", err)
	}
	if int64(len(holds)) < target {
		t.Fatalf("only %d grants before the deadline", len(holds))
	}
	checkExclusive(t, holds)
	t.Logf("%d grants, fences %d..%d, %d WAITs ran out, master killed after %d grants (%d grant held across the kill released with NOQUORUM or 0)",
		len(holds), holds[0].fence, holds[len(holds)-1].fence, nils.Load(), target/4, lost.Load())
	if lost.Load() > 1 {
		t.Fatalf("%d grants released with 0 across the kill; only the one held during it may", lost.Load())
	}
	cl.expectNoLocks(t)
}

// checkExclusive checks every grant against every other: ordered by the
// time each grant reached its client, each must arrive after the previous
// one was released (never two holders at once) and carry a greater fence.
func checkExclusive(t *testing.T, holds []holding) {
	t.Helper()
	sort.Slice(holds, func(i, j int) bool { return holds[i].got.Before(holds[j].got) })
	for i := 1; i < len(holds); i++ {
		prev, cur := holds[i-1], holds[i]
		if !cur.got.After(prev.released) {
			t.Fatalf("grant %d (worker %d, fence %d) arrived at %v, before grant %d (worker %d, fence %d) was released at %v: two holders at once",
				i, cur.worker, cur.fence, cur.got.Format(time.StampMicro), i-1, prev.worker, prev.fence, prev.released.Format(time.StampMicro))
		}
		if cur.fence <= prev.fence {
			t.Fatalf("grant %d (worker %d) has fence %d after fence %d", i, cur.worker, cur.fence, prev.fence)
		}
	}
}
