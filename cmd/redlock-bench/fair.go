package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// fairness measures waiters queueing on one resource: o.fairConc workers
// each take the lock with WAIT, hold it for fairHold, release it, and
// queue again, with RFAIRLOCK beside RLOCK in the same run. It reports the
// hand-off latency (a release sent -> the next grant, the lock's idle gap
// under contention), the wait of each acquisition, and how evenly the
// grants went round: the spread of the workers' mean waits (max/min) and
// of their grants (max/min).
func (e *env) fairness(o options) error {
	c := o.fairConc
	fmt.Printf("\n## fair locks: %d waiters on one resource, lock -> hold %v -> unlock -> queue again, %d masters, %v per cell, median of %d\n\n",
		c, fairHold, o.masters, o.duration, o.repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tgrants/s\thand-off p50\thand-off p99\twait p50\twait p99\tmean wait per worker max/min\tgrants per worker max/min\tWAIT ran out\terrors\tkeys left\t")
	for _, cmd := range []string{"RFAIRLOCK", "RLOCK"} {
		var runs []fairResult
		var left int
		for range o.repeat {
			r, err := e.fairCell(cmd, c, o.duration)
			if err != nil {
				return err
			}
			n, err := e.keysLeft()
			if err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			left += n
			runs = append(runs, r)
		}
		slices.SortFunc(runs, func(a, b fairResult) int { return int(a.handOff[0] - b.handOff[0]) })
		r := runs[len(runs)/2]
		fmt.Fprintf(tw, "%s WAIT\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t\n", cmd, r.rate, us(r.handOff[0]), us(r.handOff[1]),
			us(r.wait[0]), us(r.wait[1]), ratio(r.waitMax, r.waitMin), ratio(time.Duration(r.grantsMax), time.Duration(r.grantsMin)),
			r.ranOut, r.errors, left)
	}
	tw.Flush()
	fmt.Println("\n(hand-off: from a RUNLOCK sent to the next grant's reply; the median run by hand-off p50 is shown)")
	return nil
}

// fairHold is how long a worker of the fairness section holds the lock.
const fairHold = time.Millisecond

// fairWait is the WAIT of the fairness section, in ms: far longer than a
// round of the queue, so that a wait that runs out shows starvation.
const fairWait = "10000"

type fairResult struct {
	rate             float64
	handOff, wait    [2]time.Duration // p50, p99
	waitMax, waitMin time.Duration
	grantsMax        int
	grantsMin        int
	ranOut, errors   int64
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "inf"
	}
	return fmt.Sprintf("%.1f", float64(a)/float64(b))
}

// fairCell runs c workers on one resource with cmd ("RFAIRLOCK" or
// "RLOCK") for d.
func (e *env) fairCell(cmd string, c int, d time.Duration) (fairResult, error) {
	cl := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 2 * c, MinIdleConns: c, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer cl.Close()
	ctx := context.Background()
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	resource := "bench:fair:" + cmd
	var (
		released        atomic.Int64 // unix ns of the latest release sent
		ranOut, errs    atomic.Int64
		mu              sync.Mutex
		handOffs, waits []time.Duration
		grants          = make([]int, c)
		waited          = make([]time.Duration, c)
		firstErr        error
		wg              sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hs, ws []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				v, err := cl.Do(ctx, cmd, resource, ttl, "WAIT", fairWait).Slice()
				now := time.Now()
				if errors.Is(err, redis.Nil) {
					ranOut.Add(1)
					continue
				}
				if err != nil || len(v) != 3 {
					errs.Add(1)
					mu.Lock()
					firstErr = cmp.Or(firstErr, fmt.Errorf("%s: %v %v", cmd, v, err))
					mu.Unlock()
					continue
				}
				token, _ := v[0].(string)
				ws = append(ws, now.Sub(t0))
				waited[w] += now.Sub(t0)
				if r := released.Load(); r != 0 && r > t0.UnixNano() {
					// The lock was released while this worker waited:
					// the gap is the hand-off.
					hs = append(hs, now.Sub(time.Unix(0, r)))
				}
				grants[w]++
				time.Sleep(fairHold)
				released.Store(time.Now().UnixNano())
				if err := runlock(ctx, cl, resource, token); err != nil {
					errs.Add(1)
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
			mu.Lock()
			handOffs = append(handOffs, hs...)
			waits = append(waits, ws...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "%s: %d errors, the first: %v\n", cmd, errs.Load(), firstErr)
	}
	slices.Sort(handOffs)
	slices.Sort(waits)
	r := fairResult{
		handOff: [2]time.Duration{pct(handOffs, 0.5), pct(handOffs, 0.99)},
		wait:    [2]time.Duration{pct(waits, 0.5), pct(waits, 0.99)},
		ranOut:  ranOut.Load(),
		errors:  errs.Load(),
	}
	total := 0
	for _, g := range grants {
		total += g
	}
	r.rate = float64(total) / d.Seconds()
	r.grantsMax, r.grantsMin = slices.Max(grants), slices.Min(grants)
	means := make([]time.Duration, c)
	for w, g := range grants {
		means[w] = d // never granted: waited the whole cell
		if g > 0 {
			means[w] = waited[w] / time.Duration(g)
		}
	}
	r.waitMax, r.waitMin = slices.Max(means), slices.Min(means)
	return r, nil
}
