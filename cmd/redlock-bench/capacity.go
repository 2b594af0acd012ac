package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// capacity measures what one cycle of each primitive costs the masters and
// the proxy (C=64, 100,000 resources, so that nothing contends): its rate,
// the masters' CPU per cycle (all of them, and one master's share: every
// cycle runs on every master), the proxy's CPU per cycle, and what follows
// for a deployment: cycles/s per master core (one Redis process is one
// core, and every master runs every cycle, so that is the ceiling of the
// whole deployment) and proxy cores per 100,000 cycles/s. docs/capacity.md
// is written from this section.
func (e *env) capacity(o options) error {
	const c = 64
	fmt.Printf("\n## capacity: what one cycle of each primitive costs, C=%d, K=100000, %d masters, %v per cell, median of %d\n\n",
		c, len(e.addrs), o.duration, o.repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cycle\tcycles/s\terrors\tkeys left\tmasters' CPU us/cycle\tone master's\tproxy CPU us/cycle\tcycles/s per master core\tproxy cores per 100k cycles/s\t")
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	drvs := []driver{
		e.proxyDriver(c),
		e.multiDriver(c),
		e.commandDriver(c, "RFAIRLOCK -> RUNLOCK", "RFAIRLOCK", "RUNLOCK", ttl),
		e.commandDriver(c, "RRLOCK -> RRUNLOCK", "RRLOCK", "RRUNLOCK", ttl),
		e.semDriver(c, 1),
		e.semDriver(c, 100),
	}
	drvs[0].name, drvs[1].name = "RLOCK -> RUNLOCK", "RMULTILOCK of 3 -> RMULTIUNLOCK"
	widths := []int{1, multiWidth, 1, 1, 1, 1}
	for d, drv := range drvs {
		var runs []result
		left := 0
		for range o.repeat {
			before := e.cpu()
			r := cycle(drv, c, 100000, widths[d], o.duration, o.ttl)
			r.cpu = e.cpu().perK(before, r.rate*o.duration.Seconds())
			if r.errors > 0 {
				fmt.Fprintf(os.Stderr, "%s: %d errors, the first: %v\n", drv.name, r.errors, r.firstErr)
			}
			n, err := e.keysLeft()
			if err != nil {
				return fmt.Errorf("%s: %w", drv.name, err)
			}
			left += n
			runs = append(runs, r)
		}
		drv.close()
		r := median(runs)
		masters := float64(r.cpu.masters) / float64(time.Microsecond) / 1000 // us per cycle
		proxy := float64(r.cpu.proxy) / float64(time.Microsecond) / 1000
		one := masters / float64(len(e.addrs))
		perCore, proxyCores := 0.0, 0.0
		if one > 0 {
			perCore = 1e6 / one
		}
		proxyCores = 100000 * proxy / 1e6
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%.0f\t%.1f\t%.0f\t%.0f\t%.1f\t\n", drv.name, r.rate, r.errors, left, masters, one, proxy, perCore, proxyCores)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("\n(one master's: the masters' CPU per cycle divided by their number, since every cycle runs on each; cycles/s per master core: 1 s over one master's CPU per cycle, the most the masters can do whatever the number of proxies; proxy cores: CPU per cycle times 100,000)")
	return nil
}

// commandDriver is a proxy driver for a lock-like command with the reply
// [token, ...] (nil when not granted), taken with "acquire resource ttl"
// and given back with "release resource token" (reply 1).
func (e *env) commandDriver(c int, name, acquire, release, ttl string) driver {
	cl := e.proxyClient(c)
	return driver{
		name: name,
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			v, err := cl.Do(ctx, acquire, keys[0], ttl).Slice()
			if errors.Is(err, redis.Nil) {
				return "", false, nil
			}
			if err != nil || len(v) < 2 {
				return "", false, fmt.Errorf("%s: %v %v", acquire, v, err)
			}
			token, isString := v[0].(string)
			if !isString {
				return "", false, fmt.Errorf("%s: token %v", acquire, v[0])
			}
			return token, true, nil
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			n, err := cl.Do(ctx, release, keys[0], token).Int()
			if err == nil && n != 1 {
				err = fmt.Errorf("%s answered %d", release, n)
			}
			return err
		},
		close: func() { cl.Close() },
	}
}
