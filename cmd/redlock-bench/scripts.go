package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// scriptCost measures what one lock -> unlock cycle costs a master in CPU,
// apart from the network: on a master of its own, cycles are sent 32 at a
// time (pipelined, distinct resources), and the master's CPU time (INFO
// cpu) and the commands its scripts ran (INFO commandstats) are divided by
// the cycles. Four cycles, interleaved within each repeat: the proxy's
// (the plain form of lock_acquire and lock_release with the keys and
// arguments of an RLOCK without WAIT and its RUNLOCK, under the default
// prefixes and the engine's FenceLag of 1s), the same with lock_acquire
// run as its script, the floor of any script (two scripts that return at
// once, same keys and arguments) and the direct client's commands (SET NX
// PX, then the compare-and-delete script).
func scriptCost(dir string, repeat int) error {
	const cycles, depth = 100000, 32
	cmd, addr, err := startRedis(filepath.Join(dir, "scripts"))
	if err != nil {
		return err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()

	acquire, release := redis.NewScript(scripts.LockAcquire.Source()), redis.NewScript(scripts.LockRelease.Source())
	emptyAcquire, emptyRelease := redis.NewScript("return {1, 1, 1}"), redis.NewScript("return 1")
	directRel := redis.NewScript(directRelease)
	const meta = "redlock-proxy:"
	proxyCycle := func(emptyScripts bool) func(p redis.Pipeliner, r string, fence int, second bool) {
		acq, rel := acquire, release
		if emptyScripts {
			acq, rel = emptyAcquire, emptyRelease
		}
		return func(p redis.Pipeliner, r string, fence int, second bool) {
			if !second {
				acq.EvalSha(ctx, p, []string{r, meta + "fence:" + r, meta + "fence-lag", meta + "fence-hwm", meta + "lease-hwm"},
					"token-"+r, "10000", strconv.Itoa(fence), "1000")
				return
			}
			rel.EvalSha(ctx, p, []string{r, meta + "fence:" + r, meta + "rw:" + r, meta + "holds:" + r, meta + "fence-lag", meta + "fairq:" + r}, "token-"+r, meta+"released:"+r)
		}
	}
	rows := []struct {
		name string
		send func(p redis.Pipeliner, r string, fence int, second bool)
	}{
		{"proxy: plain acquire + lock_release", nil}, // plainCycle, below
		{"proxy: lock_acquire + lock_release (scripts only)", proxyCycle(false)},
		{"floor: two scripts that return at once", proxyCycle(true)},
		{"direct: SET NX PX + compare-and-delete", func(p redis.Pipeliner, r string, _ int, second bool) {
			if !second {
				p.Do(ctx, "SET", r, "token-"+r, "NX", "PX", 10000)
				return
			}
			directRel.EvalSha(ctx, p, []string{r}, "token-"+r)
		}},
	}
	for _, s := range []*redis.Script{acquire, release, emptyAcquire, emptyRelease, directRel} {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("loading a script: %w", err)
		}
	}
	// plainCycle is the cycle as the proxy sends it: the plain form of
	// lock_acquire for one resource (its commands, no script), then
	// lock_release. The plain form's follow-up, the lease mark's raise,
	// comes about once per eighth of a ttl and is left out.
	plainCycle := func(p redis.Pipeliner, r string, fence int, second bool) {
		if second {
			proxyCycle(false)(p, r, fence, second)
			return
		}
		st := scripts.LockAcquire.Plain([]string{r, meta + "fence:" + r, meta + "fence-lag", meta + "fence-hwm", meta + "lease-hwm"},
			[]string{"token-" + r, "10000", strconv.Itoa(fence), "1000"})
		for _, c := range st.Commands {
			args := make([]any, len(c))
			for i, a := range c {
				args[i] = a
			}
			p.Do(ctx, args...)
		}
	}
	rows[0].send = plainCycle
	fence := 0
	// one runs the row's cycles and returns the master's CPU per cycle and
	// the commands its scripts ran per cycle.
	one := func(send func(redis.Pipeliner, string, int, bool)) (time.Duration, float64, error) {
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			return 0, 0, err
		}
		before, err := masterCPU(ctx, c)
		if err != nil {
			return 0, 0, err
		}
		for i := 0; i < cycles/depth; i++ {
			for _, second := range []bool{false, true} {
				p := c.Pipeline()
				for j := range depth {
					fence++
					send(p, "bench:"+strconv.Itoa(j), fence, second)
				}
				// redis.Nil: a SET NX GET that took a free key.
				if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
					return 0, 0, err
				}
			}
		}
		after, err := masterCPU(ctx, c)
		if err != nil {
			return 0, 0, err
		}
		stats, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, 0, err
		}
		inner := 0
		for _, l := range strings.Split(stats, "\r\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
			calls, _, _ := strings.Cut(rest, ",")
			n, err := strconv.Atoi(calls)
			if !ok || err != nil || strings.HasPrefix(name, "eval") || name == "info" || strings.HasPrefix(name, "config") {
				continue
			}
			inner += n
		}
		return (after - before) / cycles, float64(inner) / cycles, nil
	}
	cpu := make([][]time.Duration, len(rows))
	inner := make([]float64, len(rows))
	for range repeat {
		for i, r := range rows {
			d, n, err := one(r.send)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			cpu[i] = append(cpu[i], d)
			inner[i] = n
		}
	}
	fmt.Printf("\n## what a cycle costs a master, apart from the network: 1 master, %d cycles pipelined %d deep, median of %d, interleaved\n\n", cycles, depth, repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cycle\tmaster CPU us/cycle\tcommands run per cycle\t")
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t\n", r.name, float64(medianDuration(cpu[i]))/1e3, inner[i])
	}
	tw.Flush()
	fmt.Println("\n(commands run: the plain commands and those the scripts call; the script calls themselves are not counted)")
	return nil
}

// masterCPU is the master's CPU time so far (INFO cpu, user + system).
func masterCPU(ctx context.Context, c *redis.Client) (time.Duration, error) {
	s, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var t float64
	for _, l := range strings.Split(s, "\r\n") {
		k, v, _ := strings.Cut(l, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			t += f
		}
	}
	return time.Duration(t * float64(time.Second)), nil
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
