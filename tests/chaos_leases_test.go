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

// TestChaosLeases (make chaos; issue 29, requirement 2): AUTOEXTEND
// leases with a 3 s ttl, held while 2 of 5 masters are paused 3 s in
// turn (first half of each run) and then one master is slowed by 300 ms
// (second half), are never lost. Ten leases per run (locks, multi-resource
// locks, read locks, semaphore permits), on both proxies; REDLOCK_CHAOS=n
// makes n runs of 12n s (CHAOS=10: 10 runs of 2 minutes). Lost means the
// proxy reported it (INFO leases autoextend_lost, -LOST), its release did
// not find it held on a quorum, or a competitor on the other proxy was
// granted what it holds.
func TestChaosLeases(t *testing.T) {
	scale := chaosScale(t)
	d := time.Duration(scale) * 12 * time.Second
	for run := range scale {
		t.Run(fmt.Sprintf("run %d", run+1), func(t *testing.T) { chaosLeaseRun(t, run, d) })
	}
}

// chaosLease is one kept lease: how to take it, how a competitor would
// take it, how to release it.
type chaosLease struct {
	take    []any
	compete []any
	release func(token string) []any
}

func chaosLeases(run int) []chaosLease {
	var out []chaosLease
	for i := range 10 {
		r := fmt.Sprintf("lease-%d-%d", run, i)
		switch i % 5 {
		case 0, 1:
			out = append(out, chaosLease{
				take:    []any{"RLOCK", r, 3000, "AUTOEXTEND"},
				compete: []any{"RLOCK", r, 3000},
				release: func(tok string) []any { return []any{"RUNLOCK", r, tok} },
			})
		case 2:
			out = append(out, chaosLease{
				take:    []any{"RMULTILOCK", 3000, 2, r + "a", r + "b", "AUTOEXTEND"},
				compete: []any{"RLOCK", r + "b", 3000},
				release: func(tok string) []any { return []any{"RMULTIUNLOCK", tok, r + "a", r + "b"} },
			})
		case 3:
			out = append(out, chaosLease{
				take:    []any{"RRLOCK", r, 3000, "AUTOEXTEND"},
				compete: []any{"RLOCK", r, 3000},
				release: func(tok string) []any { return []any{"RRUNLOCK", r, tok} },
			})
		case 4:
			out = append(out, chaosLease{
				take:    []any{"RSEMACQUIRE", r, 1, 3000, "AUTOEXTEND"},
				compete: []any{"RSEMACQUIRE", r, 1, 3000},
				release: func(tok string) []any { return []any{"RSEMRELEASE", r, tok} },
			})
		}
	}
	return out
}

func chaosLeaseRun(t *testing.T, run int, d time.Duration) {
	r := newChaosRun(t, true)
	leases := chaosLeases(run)
	tokens := make([]string, len(leases))
	owners := make([]*redis.Client, len(leases))
	for i, l := range leases {
		// One connection per lease: the keeper is the connection's.
		c := redis.NewClient(&redis.Options{Addr: r.proxies[i%2].Addr, PoolSize: 1, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		owners[i] = c
		v, err := c.Do(context.Background(), l.take...).Result()
		a, ok := v.([]any)
		if err != nil || !ok || len(a) == 0 {
			t.Fatalf("%v: %v %v", l.take, v, err)
		}
		tokens[i] = a[0].(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r.start = time.Now()
	var wg sync.WaitGroup
	wg.Go(func() {
		half, stop := context.WithTimeout(ctx, d/2)
		pauseInTurn(half, r)
		stop()
		slowOne(ctx, r)
	})
	// Competitors on the other proxy: none may be granted what a kept
	// lease holds.
	var stolen atomic.Int32
	var tries atomic.Int64
	for i, l := range leases {
		c := r.clients[1-i%2]
		wg.Go(func() {
			for sleepCtx(ctx, 200*time.Millisecond) {
				v, err := c.Do(context.Background(), l.compete...).Result()
				tries.Add(1)
				if a, ok := v.([]any); err == nil && ok && len(a) > 0 {
					stolen.Add(1)
					t.Errorf("%v granted while lease %d (%v) is kept: %v", l.compete, i, l.take, a)
					c.Do(context.Background(), l.release(a[0].(string))...)
				}
			}
		})
	}
	wg.Wait()
	r.slow.setDelay(0)
	for _, p := range r.clients {
		info := do(t, p, "INFO", "leases").(string)
		if !strings.Contains(info, "autoextend_lost:0") {
			t.Errorf("a proxy lost auto-extended leases: %s", info)
		}
	}
	for i, l := range leases {
		v, err := owners[i].Do(context.Background(), l.release(tokens[i])...).Result()
		if err != nil || v != int64(1) {
			t.Errorf("lease %d (%v) at its release after %v of faults: %v %v", i, l.take, d, v, err)
		}
	}
	t.Logf("%v of faults; competitors: %d tries, %d granted", d, tries.Load(), stolen.Load())
}
