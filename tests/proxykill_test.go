package tests

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestProxyKilledMidCommand: of two proxies serving contended clients, one
// is killed with SIGKILL in the middle of their commands. Whatever it left
// half done (acquires, releases, rollbacks) stays on the masters until its
// ttl; the other proxy's clients must still never hold the resource at the
// same time as anybody else, fences keep increasing, and once the orphans
// expire the survivors are granted it again. A client whose proxy died
// before its RUNLOCK answered held the lock until it sent the RUNLOCK.
func TestProxyKilledMidCommand(t *testing.T) {
	busy(t)
	redistest.RequireReal(t, "embedded masters run inside this -race test process, too slow for 50ms master timeouts under this load")
	const (
		ttl        = 1500 // ms
		workers    = 6
		beforeKill = 150
	)
	afterKill := int64(100 * soak(t))
	cl := newCluster(t, 3)
	victim, survivor := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	clients := []*redis.Client{victim.Client(), survivor.Client()}

	var (
		mu       sync.Mutex
		holds    []holding
		granted  atomic.Int64
		after    atomic.Int64 // grants that arrived after the kill
		killing  atomic.Bool  // the kill has begun
		killedAt atomic.Int64 // unix nanoseconds when it ended, 0 before
		victims  atomic.Int64 // victim clients that saw their proxy die
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			onVictim := w%2 == 0
			for after.Load() < afterKill && ctx.Err() == nil {
				g, ok, err := tryRlock(c, "orphan", ttl, "WAIT", 5000)
				got := time.Now()
				if err != nil {
					if onVictim && killing.Load() {
						victims.Add(1)
						return // its proxy is gone; it holds nothing it knows of
					}
					errs <- err
					return
				}
				if !ok {
					continue
				}
				if k := killedAt.Load(); k != 0 && got.UnixNano() > k {
					after.Add(1)
				}
				if granted.Add(1) == beforeKill {
					killing.Store(true)
					go func() {
						victim.Kill()
						killedAt.Store(time.Now().UnixNano())
					}()
				}
				end := time.Now()
				v, err := c.Do(ctx, "RUNLOCK", "orphan", g.token).Result()
				if err != nil || v != int64(1) {
					if !onVictim || !killing.Load() {
						errs <- err
						return
					}
					// Its proxy died during the RUNLOCK: the release may or
					// may not have reached the masters. The client stopped
					// relying on the lock when it sent RUNLOCK (end), and a
					// release that did land frees it for the next holder at
					// once, so its hold ends there; counting it until its
					// validity's end would call a correct hand-off a
					// double grant.
				}
				mu.Lock()
				holds = append(holds, holding{fence: g.fence, got: got, released: end, worker: w})
				mu.Unlock()
				if err != nil {
					victims.Add(1)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker failed: %v", err)
	}
	if after.Load() < afterKill {
		t.Fatalf("only %d grants after the kill (of %d in all): the survivor did not carry on", after.Load(), granted.Load())
	}
	checkExclusive(t, holds)
	t.Logf("%d grants (%d after the victim proxy was killed), fences %d..%d; %d victim clients saw their proxy die",
		len(holds), after.Load(), holds[0].fence, holds[len(holds)-1].fence, victims.Load())
	// Orphans of the killed proxy expire with their ttl.
	waitFor(t, 2*ttl*time.Millisecond, "the killed proxy's orphaned keys to expire", func() bool { return len(cl.lockKeys(t)) == 0 })
}
