package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// cycles measures lock -> unlock cycles of one resource drawn from K: at
// each of o.concs workers with K=100000 (uncontended) and each of
// o.contended with K=10, every driver in turn within each repeat
// (interleaved, so that a drift of the machine hits them alike): the proxy
// with one client connection per worker, the proxy through go-redis's
// default pool (at 64 workers; proxy B too, when there is one), node-redlock v5 on ioredis (uncontended
// cells, when node and tests/clients' modules are installed), go-redsync,
// and Redlock written directly on rueidis. It prints the median run of each, its ratios to go-redsync and
// to direct rueidis, and the CPU per 1000 cycles of the proxy, of this
// process (the load generator, and the lock client itself for go-redsync
// and rueidis) and of the masters, read from /proc around each run.
func (e *env) cycles(o options) error {
	fmt.Printf("## lock -> unlock cycles, %d masters, %v per cell, median of %d, drivers interleaved\n\n", len(e.addrs), o.duration, o.repeat)
	type cellSpec struct{ k, c int }
	var cells []cellSpec
	for _, c := range o.concs {
		if c > 0 {
			cells = append(cells, cellSpec{100000, c})
		}
	}
	for _, c := range o.contended {
		if c > 0 {
			cells = append(cells, cellSpec{10, c})
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tC\tdriver\tcycles/s\tacq p50\tacq p99\tacq p999\tunl p50\tunl p99\tnot granted\terrors\tkeys left\tx redsync\tx rueidis\tCPU ms/1000: proxy\tclient\tmasters\tscript calls/cycle\tmaster reads/cycle\tproxy per cycle: reads+writes\tswitches\t")
	nodeSaid := false
	for _, cell := range cells {
		k, c := cell.k, cell.c
		drvs := []driver{e.proxyDriver(c)}
		if e.addrB != "" {
			d := e.proxyDriverClient(redis.NewClient(&redis.Options{Addr: e.addrB, PoolSize: 2 * c, MinIdleConns: c, MaxRetries: -1}))
			d.name = "proxy B"
			drvs = append(drvs, d)
		}
		if c == 64 && k == 100000 {
			d := e.proxyDriverClient(redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1}))
			d.name = "proxy, go-redis pool"
			drvs = append(drvs, d)
			if e.addrB != "" {
				d := e.proxyDriverClient(redis.NewClient(&redis.Options{Addr: e.addrB, MaxRetries: -1}))
				d.name = "proxy B, go-redis pool"
				drvs = append(drvs, d)
			}
		}
		if k == 100000 {
			if d, ok := e.nodeRedlockDriver(); ok {
				drvs = append(drvs, d)
			} else if !nodeSaid {
				fmt.Fprintf(os.Stderr, "node-redlock is not measured: no node, or no %s/node_modules (make clients)\n", filepath.Dir(nodeScript))
				nodeSaid = true
			}
		}
		drvs = append(drvs, e.redsyncDriver(c))
		direct, err := e.directDriver()
		if err != nil {
			return err
		}
		drvs = append(drvs, direct)
		runs := make([][]result, len(drvs))
		left := make([]int, len(drvs))
		for range o.repeat {
			for d, drv := range drvs {
				before := e.cpu()
				var r result
				var extCPU time.Duration
				if drv.external != nil {
					var err error
					if r, extCPU, err = drv.external(c, k, o.duration, o.ttl); err != nil {
						return err
					}
				} else {
					r = cycle(drv, c, k, 1, o.duration, o.ttl)
				}
				r.cpu = e.cpu().perK(before, r.rate*o.duration.Seconds())
				if cycles := r.rate * o.duration.Seconds(); cycles > 0 {
					r.cpu.client += time.Duration(float64(extCPU) * 1000 / cycles)
				}
				if r.errors > 0 {
					fmt.Fprintf(os.Stderr, "%s K=%d C=%d: %d errors, the first: %v\n", drv.name, k, c, r.errors, r.firstErr)
				}
				n, err := e.keysLeft()
				if err != nil {
					return fmt.Errorf("%s K=%d C=%d: %w", drv.name, k, c, err)
				}
				left[d] += n
				runs[d] = append(runs[d], r)
			}
		}
		rows := make([]result, len(drvs))
		for d := range drvs {
			rows[d] = median(runs[d])
			rows[d].left = left[d]
			drvs[d].close()
		}
		redsyncRow, directRow := rows[len(rows)-2], rows[len(rows)-1]
		ratio := func(a, b float64) string {
			if b <= 0 {
				return ""
			}
			return fmt.Sprintf("%.2fx", a/b)
		}
		ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) }
		for _, r := range rows {
			proxyCPU := ms(r.cpu.proxy)
			one := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
			io, sw := one(r.cpu.io), one(r.cpu.switches)
			switch {
			case strings.HasPrefix(r.name, "proxy B"):
				proxyCPU, io, sw = ms(r.cpu.proxyB), one(r.cpu.ioB), one(r.cpu.switchesB)
			case !strings.HasPrefix(r.name, "proxy"):
				proxyCPU, io, sw = "-", "-", "-"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t\n", k, c, r.name, r.rate,
				us(r.acq[0]), us(r.acq[1]), us(r.acq[2]), us(r.unl[0]), us(r.unl[1]), r.notGranted, r.errors, r.left,
				ratio(r.rate, redsyncRow.rate), ratio(r.rate, directRow.rate), proxyCPU, ms(r.cpu.client), ms(r.cpu.masters), r.cpu.calls/1000, r.cpu.reads/1000, io, sw)
		}
		if rows[0].rate > 0 && redsyncRow.rate > 0 {
			fmt.Fprintf(tw, "\t\t\tacq p50 proxy/redsync\t%.2fx\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", float64(rows[0].acq[0])/float64(redsyncRow.acq[0]))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("\n(CPU ms/1000: CPU time per 1000 cycles; client is this process: the load generator, and for redsync and rueidis the lock client itself, and for node-redlock its node process; script calls/cycle: EVAL and EVALSHA calls the masters ran per cycle, all masters together; the proxy batches concurrent calls; master reads/cycle: the times a master read a client's socket (INFO stats, total_reads_processed), per cycle, all masters together; proxy per cycle: its read and write system calls, from /proc/<pid>/io, and its threads' context switches, from /proc/<pid>/task/*/status)")
	return nil
}

// proxyDriverClient is the proxy driver on a given go-redis client.
func (e *env) proxyDriverClient(cl *redis.Client) driver {
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	return driver{
		name: "proxy",
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			return rlock(ctx, cl, keys[0], ttl)
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			return runlock(ctx, cl, keys[0], token)
		},
		close: func() { cl.Close() },
	}
}

// pipelined runs redis-benchmark against the proxy: 50 connections sending
// RLOCK on random resources (1 s ttl, never released), one command at a
// time and 16 pipelined, each o.repeat times, interleaved, and prints the
// median rates and their ratio.
func (e *env) pipelined(o options) error {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		return errors.New("redis-benchmark not found (it comes with redis-server)")
	}
	host, port, _ := strings.Cut(e.addr, ":")
	n := int(o.duration.Seconds() * 8000)
	fmt.Printf("\n## pipelined clients: redis-benchmark -c 50 -n %d -r 100000 RLOCK bench:__rand_int__ 1000, median of %d\n\n", n, o.repeat)
	type run struct {
		rate                    float64
		proxy, masters, loadGen float64 // cores used: CPU time over wall time
	}
	runs := map[int][]run{}
	for range o.repeat {
		for _, p := range []int{1, 16} {
			before, t0 := e.cpu(), time.Now()
			cmd := exec.Command("redis-benchmark", "-h", host, "-p", port, "-c", "50", "-n", strconv.Itoa(n),
				"-r", "100000", "-P", strconv.Itoa(p), "--csv", "RLOCK", "bench:__rand_int__", "1000")
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("redis-benchmark -P %d: %w", p, err)
			}
			wall, after := time.Since(t0), e.cpu()
			rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
			if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
				return fmt.Errorf("redis-benchmark -P %d: unexpected output %q", p, out)
			}
			rate, err := strconv.ParseFloat(rows[1][1], 64)
			if err != nil {
				return fmt.Errorf("redis-benchmark -P %d: rate %q", p, rows[1][1])
			}
			ps := cmd.ProcessState
			runs[p] = append(runs[p], run{rate: rate,
				proxy:   float64(after.proxy-before.proxy) / float64(wall),
				masters: float64(after.masters-before.masters) / float64(wall),
				loadGen: float64(ps.UserTime()+ps.SystemTime()) / float64(wall)})
		}
	}
	med := func(v []run) run {
		slices.SortFunc(v, func(a, b run) int { return cmp.Compare(a.rate, b.rate) })
		return v[len(v)/2]
	}
	p1, p16 := med(runs[1]), med(runs[16])
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pipeline\tRLOCK/s\tx unpipelined\tcores: proxy\tmasters\tredis-benchmark\ttotal\t")
	for _, r := range []struct {
		p int
		r run
	}{{1, p1}, {16, p16}} {
		ratio := ""
		if r.p == 16 {
			ratio = fmt.Sprintf("%.2fx", p16.rate/cmp.Or(p1.rate, 1))
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.p, r.r.rate, ratio, r.r.proxy, r.r.masters, r.r.loadGen,
			r.r.proxy+r.r.masters+r.r.loadGen)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("\n(cores: CPU time over wall time of the median run; this machine has %d)\n", runtime.NumCPU())
	// The locks expire after 1 s; the next section counts keys left.
	time.Sleep(1500 * time.Millisecond)
	return nil
}
