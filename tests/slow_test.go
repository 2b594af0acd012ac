package tests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSlowMastersExclusion: two of five masters flap (paused 200ms, running
// 50ms, out of phase), so requests to them time out and land late. Workers
// on two proxies contend for one resource; half reuse one TOKEN for all
// their calls and retries (the trap where a late rollback of an earlier try
// deletes a later try's key), half use fresh tokens. Every grant's window
// is checked against every other: none may overlap, fences must increase.
func TestSlowMastersExclusion(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	proxies := []*Proxy{startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))}
	clients := []*redis.Client{proxies[0].Client(), proxies[1].Client()}

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(soak(t))*8*time.Second)
	defer cancel()
	var flap sync.WaitGroup
	for i, phase := range []time.Duration{0, 120 * time.Millisecond} {
		s := cl.servers[i]
		flap.Add(1)
		go func() {
			defer flap.Done()
			defer s.Resume()
			time.Sleep(phase)
			for ctx.Err() == nil {
				s.Pause()
				time.Sleep(200 * time.Millisecond)
				s.Resume()
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}

	var (
		mu        sync.Mutex
		holds     []holding
		undecided atomic.Int64
		refused   atomic.Int64
		wg        sync.WaitGroup
		errs      = make(chan error, 8)
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			args := []any{"contended", 2000, "WAIT", 1000}
			if w%4 < 2 {
				args = append(args, "TOKEN", fmt.Sprintf("worker-%d", w))
			}
			for ctx.Err() == nil {
				g, ok, err := tryRlock(c, args...)
				got := time.Now()
				if err != nil {
					errs <- fmt.Errorf("worker %d: RLOCK: %w", w, err)
					return
				}
				if !ok {
					refused.Add(1)
					continue
				}
				time.Sleep(time.Millisecond) // the protected work
				released := time.Now()
				v, err := c.Do(context.Background(), "RUNLOCK", "contended", g.token).Result()
				switch {
				case err != nil && strings.HasPrefix(err.Error(), "NOQUORUM "):
					// The answers in time decided nothing: allowed, as a
					// slow master is no evidence either way.
					undecided.Add(1)
				case err != nil:
					errs <- fmt.Errorf("worker %d: RUNLOCK: %w", w, err)
					return
				case v != int64(1):
					// 0 means at least N-q+1 masters said the lock was not
					// held: a grant released well within its validity was
					// lost (say, to a late rollback of an earlier try).
					errs <- fmt.Errorf("worker %d: RUNLOCK of an intact grant = %v", w, v)
					return
				}
				mu.Lock()
				holds = append(holds, holding{fence: g.fence, got: got, released: released, worker: w})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	flap.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(holds) < 50 {
		t.Fatalf("only %d grants in 8s", len(holds))
	}
	checkExclusive(t, holds)
	t.Logf("%d grants with two flapping masters; %d WAITs ran out; %d releases undecided (NOQUORUM)",
		len(holds), refused.Load(), undecided.Load())
	// Once the masters run again, nothing may be left behind.
	waitFor(t, 5*time.Second, "the late requests to drain", func() bool { return len(cl.lockKeys(t)) == 0 })
}
