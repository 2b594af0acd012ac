// Command redlock-bench measures redlock-proxy beside go-redsync v4 and
// Redlock written directly on rueidis, in one run, on the same Redis
// masters: closed-loop lock -> unlock cycles with C concurrent workers for a
// fixed time, the drivers interleaved within each repeat, medians reported
// with the ratios to both peers and the CPU per 1000 cycles of the proxy,
// of the load generator (this process) and of the masters. It also
// measures multi-resource locks (one RMULTILOCK over 3 resources beside 3
// sequential RLOCKs), semaphores (RSEMACQUIRE + RSEMRELEASE at limits 1, 10
// and 100 beside RLOCK cycles), fair locks (16 waiters on one resource with
// RFAIRLOCK beside RLOCK: hand-off latency and how evenly grants go round),
// pipelined clients (redis-benchmark with and without -P 16), what a
// cycle's scripts cost a master apart from the network (beside the direct
// client's commands), what one cycle of each primitive costs the masters
// and the proxy (capacity), the proxy's memory with many idle client
// connections and its throughput as the number of masters grows.
//
//	go run ./cmd/redlock-bench                 # everything, 5 local masters
//	go run ./cmd/redlock-bench -quick          # a short smoke run
//	go run ./cmd/redlock-bench -only multi     # one section: cycles, multi, sem, fair, pipeline, scripts, capacity, idle, shards or scale
//	go run ./cmd/redlock-bench -proxy-bin-b /tmp/old-proxy -only cycles   # an earlier build beside this one
//
// It starts redis-server processes on free loopback ports and the proxy
// binary it builds from this module (or -proxy-bin), and stops them all.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"
)

type options struct {
	masters      int
	duration     time.Duration
	repeat       int
	concs        []int
	contended    []int
	multiConcs   []int
	semConc      int
	fairConc     int
	semLimits    []int
	keys         []int
	ttl          time.Duration
	idle         int
	scale        []int
	proxyBin     string
	proxyBinB    string
	skipCycles   bool
	skipMulti    bool
	skipSem      bool
	skipFair     bool
	skipIdle     bool
	skipScale    bool
	skipPipeline bool
	skipScripts  bool
	skipCapacity bool
	skipShards   bool
	shards       []int

	proxyProfile string
	proxyYAML    string
}

func main() {
	var o options
	var concs, contended, multiConcs, semLimits, keys, scale, shards, only string
	var quick bool
	flag.IntVar(&o.masters, "masters", 5, "number of redis-server masters")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "duration of each cell")
	flag.IntVar(&o.repeat, "repeat", 3, "runs of each cell (the median is reported)")
	flag.StringVar(&concs, "c", "1,16,64", "concurrent workers of the uncontended cycles, comma-separated")
	flag.StringVar(&contended, "contended-c", "64", "concurrent workers of the contended cycles (K=10), comma-separated")
	flag.StringVar(&multiConcs, "multi-c", "16,64", "concurrent workers of the multi-resource section, comma-separated")
	flag.StringVar(&keys, "k", "100000,10", "number of distinct resources of the multi-resource section, comma-separated (100000 = uncontended, 10 = contended)")
	flag.DurationVar(&o.ttl, "ttl", 10*time.Second, "lock ttl")
	flag.IntVar(&o.idle, "idle", 10000, "idle client connections for the memory measurement")
	flag.StringVar(&scale, "scale", "3,5,7,9", "numbers of masters for the scaling measurement (C=64, uncontended)")
	flag.StringVar(&shards, "shards", "1,2,4", "shards per cluster master for the shards measurement (3 Redis Cluster masters, C=64, uncontended)")
	flag.StringVar(&o.proxyBin, "proxy-bin", "", "redlock-proxy binary (default: go build ./cmd/redlock-proxy)")
	flag.StringVar(&o.proxyBinB, "proxy-bin-b", "", "a second redlock-proxy binary (an earlier build) measured beside the first in the cycles section, as \"proxy B\" (on a connection per worker, and at 64 workers through go-redis's default pool too)")
	flag.BoolVar(&o.skipMulti, "skip-multi", false, "skip the multi-resource measurement")
	flag.IntVar(&o.semConc, "sem-c", 64, "concurrent workers of the semaphore section")
	flag.StringVar(&semLimits, "sem-limits", "1,10,100", "semaphore limits, comma-separated")
	flag.BoolVar(&o.skipSem, "skip-sem", false, "skip the semaphore measurement")
	flag.IntVar(&o.fairConc, "fair-c", 16, "waiters of the fair-lock section")
	flag.BoolVar(&o.skipFair, "skip-fair", false, "skip the fair-lock measurement")
	flag.BoolVar(&o.skipIdle, "skip-idle", false, "skip the idle-connections measurement")
	flag.BoolVar(&o.skipScale, "skip-scale", false, "skip the scaling measurement")
	flag.BoolVar(&o.skipScripts, "skip-scripts", false, "skip the measurement of what a cycle's scripts cost a master")
	flag.BoolVar(&o.skipPipeline, "skip-pipeline", false, "skip the pipelined-clients measurement (redis-benchmark)")
	flag.BoolVar(&o.skipCapacity, "skip-capacity", false, "skip the measurement of what one cycle of each primitive costs the masters and the proxy")
	flag.StringVar(&o.proxyProfile, "proxy-cpuprofile", "", "have the proxy of the first environment write a CPU profile here")
	flag.StringVar(&o.proxyYAML, "proxy-config", "", "extra YAML for the proxy's configuration, e.g. 'master_flush_delay: 300us'")
	flag.BoolVar(&quick, "quick", false, "short run: 1s cells, 1 repeat, 1000 idle connections, no scaling")
	flag.StringVar(&only, "only", "", "run only this section: cycles, multi, sem, fair, pipeline, scripts, capacity, idle, shards or scale")
	flag.Parse()
	o.contended = ints(contended)
	o.concs, o.multiConcs, o.semLimits, o.keys, o.scale = ints(concs), ints(multiConcs), ints(semLimits), ints(keys), ints(scale)
	o.shards = ints(shards)
	if quick {
		o.duration, o.repeat, o.idle, o.skipScale = time.Second, 1, 1000, true
	}
	if only != "" {
		if !slices.Contains([]string{"cycles", "multi", "sem", "fair", "pipeline", "scripts", "capacity", "idle", "shards", "scale"}, only) {
			fmt.Fprintf(os.Stderr, "redlock-bench: -only %q: want cycles, multi, sem, fair, pipeline, scripts, capacity, idle, shards or scale\n", only)
			os.Exit(2)
		}
		o.skipCycles, o.skipMulti, o.skipSem, o.skipIdle, o.skipScale = only != "cycles", only != "multi", only != "sem", only != "idle", only != "scale"
		o.skipFair, o.skipPipeline, o.skipScripts, o.skipCapacity = only != "fair", only != "pipeline", only != "scripts", only != "capacity"
		o.skipShards = only != "shards"
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "redlock-bench:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func run(o options) error {
	raiseFileLimit()
	dir, err := os.MkdirTemp("", "redlock-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.proxyBin == "" {
		o.proxyBin = filepath.Join(dir, "redlock-proxy")
		build := exec.Command("go", "build", "-o", o.proxyBin, "./cmd/redlock-proxy")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the proxy: %w", err)
		}
	}
	fmt.Printf("redlock-bench %s: %s/%s, %d CPUs, GOMAXPROCS %d, %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), redisVersion())
	if o.proxyYAML != "" {
		fmt.Printf("proxy configuration: %s\n", o.proxyYAML)
	}
	fmt.Println()

	env, err := start(dir, o.masters, o.proxyBin, o.proxyBinB, o.ttl, o.proxyProfile, o.proxyYAML)
	if err != nil {
		return err
	}
	defer env.stop()
	if !o.skipCycles {
		if err := env.cycles(o); err != nil {
			return err
		}
	}

	if !o.skipMulti {
		if err := env.multi(o); err != nil {
			return err
		}
	}

	if !o.skipSem {
		if err := env.semaphores(o); err != nil {
			return err
		}
	}

	if !o.skipFair {
		if err := env.fairness(o); err != nil {
			return err
		}
	}

	if !o.skipPipeline {
		if err := env.pipelined(o); err != nil {
			return err
		}
	}

	if !o.skipScripts {
		if err := scriptCost(dir, o.repeat); err != nil {
			return err
		}
	}

	if !o.skipCapacity {
		if err := env.capacity(o); err != nil {
			return err
		}
	}

	if !o.skipIdle {
		if err := env.idleMemory(o.idle); err != nil {
			return err
		}
	}
	env.stop()

	if !o.skipShards {
		if err := shardScaling(dir, o, o.shards); err != nil {
			return err
		}
	}

	if !o.skipScale {
		fmt.Printf("\n## cost of masters: cycles/s at C=64, K=100000, median of %d\n\n", o.repeat)
		tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "masters\tproxy\tredsync\tproxy/redsync\t(proxy x N) / (proxy@3 x 3)\t")
		var base float64
		for _, n := range o.scale {
			e, err := start(dir, n, o.proxyBin, "", o.ttl, "", o.proxyYAML)
			if err != nil {
				return err
			}
			var rates [2]float64
			for d, drv := range []driver{e.proxyDriver(64), e.redsyncDriver(64)} {
				var runs []result
				for range o.repeat {
					runs = append(runs, cycle(drv, 64, 100000, 1, o.duration, o.ttl))
				}
				rates[d] = median(runs).rate
				drv.close()
			}
			e.stop()
			if base == 0 {
				base = rates[0] * float64(n)
			}
			fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.2fx\t%.2f\t\n", n, rates[0], rates[1], rates[0]/rates[1], rates[0]*float64(n)/base)
		}
		tw.Flush()
		fmt.Println("\n(the last column stays >= 1 when throughput falls no faster than 1/N)")
	}
	return nil
}

// multiWidth is the number of resources of a multi-resource cycle.
const multiWidth = 3

// multi measures multi-resource locks on e: a cycle takes multiWidth
// distinct resources drawn from K and releases them, either with one
// RMULTILOCK and one RMULTIUNLOCK ("multi") or with one RLOCK after the
// other and then one RUNLOCK each ("3xRLOCK"), at each of o.multiConcs
// workers, each cell repeated and its median reported with the
// multi/3xRLOCK ratio.
func (e *env) multi(o options) error {
	fmt.Printf("\n## multi-resource locks: RMULTILOCK over %d resources beside %d sequential RLOCKs, %d masters, %v per cell, median of %d\n\n",
		multiWidth, multiWidth, o.masters, o.duration, o.repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tC\tmode\tcycles/s\tacq p50\tacq p99\tunl p50\tnot granted\terrors\tkeys left\tmulti/3xRLOCK\t")
	for _, k := range o.keys {
		if k < multiWidth {
			fmt.Fprintf(os.Stderr, "multi-resource locks: K=%d skipped, fewer than %d resources\n", k, multiWidth)
			continue
		}
		for _, c := range o.multiConcs {
			var rows [2]result
			for d, drv := range []driver{e.multiDriver(c), e.rlocksDriver(c, multiWidth)} {
				var runs []result
				var left int
				for range o.repeat {
					r := cycle(drv, c, k, multiWidth, o.duration, o.ttl)
					if r.errors > 0 {
						fmt.Fprintf(os.Stderr, "%s K=%d C=%d: %d errors, the first: %v\n", drv.name, k, c, r.errors, r.firstErr)
					}
					n, err := e.keysLeft()
					if err != nil {
						return fmt.Errorf("%s K=%d C=%d: %w", drv.name, k, c, err)
					}
					left += n
					runs = append(runs, r)
				}
				rows[d] = median(runs)
				rows[d].left = left
				drv.close()
			}
			for d, r := range rows {
				ratio := ""
				if d == 0 && rows[1].rate > 0 {
					ratio = fmt.Sprintf("%.2fx", r.rate/rows[1].rate)
				}
				fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", k, c, r.name, r.rate,
					us(r.acq[0]), us(r.acq[1]), us(r.unl[0]), r.notGranted, r.errors, r.left, ratio)
			}
			if rows[0].rate > 0 && rows[1].rate > 0 {
				fmt.Fprintf(tw, "\t\t\tacq p50 multi/3xRLOCK\t%.2fx\t\t\t\t\t\t\t\n", float64(rows[0].acq[0])/float64(rows[1].acq[0]))
			}
		}
	}
	return tw.Flush()
}

// semaphores measures RSEMACQUIRE + RSEMRELEASE cycles of one semaphore
// at each of o.semLimits with o.semConc workers, beside RLOCK + RUNLOCK
// cycles of one resource (a limit-1 semaphore's peer) and of 100,000
// resources (uncontended) in the same run. A refused acquire counts as
// not granted.
func (e *env) semaphores(o options) error {
	c := o.semConc
	fmt.Printf("\n## semaphores: RSEMACQUIRE -> RSEMRELEASE beside RLOCK -> RUNLOCK, C=%d, %d masters, %v per cell, median of %d\n\n",
		c, o.masters, o.duration, o.repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\tcycles/s\tacq p50\tacq p99\tunl p50\tnot granted\terrors\tkeys left\t")
	type cell struct {
		drv driver
		k   int
	}
	var cells []cell
	for _, l := range o.semLimits {
		cells = append(cells, cell{e.semDriver(c, l), 1})
	}
	cells = append(cells, cell{e.proxyDriver(c), 1}, cell{e.proxyDriver(c), 100000})
	for i, cl := range cells {
		var runs []result
		var left int
		for range o.repeat {
			r := cycle(cl.drv, c, cl.k, 1, o.duration, o.ttl)
			if r.errors > 0 {
				fmt.Fprintf(os.Stderr, "%s: %d errors, the first: %v\n", cl.drv.name, r.errors, r.firstErr)
			}
			n, err := e.keysLeft()
			if err != nil {
				return fmt.Errorf("%s: %w", cl.drv.name, err)
			}
			left += n
			runs = append(runs, r)
		}
		r := median(runs)
		name := r.name
		if i >= len(o.semLimits) {
			name = fmt.Sprintf("RLOCK, %d resources", cl.k)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t\n", name, r.rate, us(r.acq[0]), us(r.acq[1]), us(r.unl[0]), r.notGranted, r.errors, left)
		cl.drv.close()
	}
	return tw.Flush()
}

// semDriver takes one permit of a limit-l semaphore named after the
// cycle's resource with RSEMACQUIRE (reply [token, validity]; nil is "not
// granted") and gives it back with RSEMRELEASE (reply 1).
func (e *env) semDriver(c, l int) driver {
	cl := e.proxyClient(c)
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	limit := strconv.Itoa(l)
	return driver{
		name: "RSEMACQUIRE, limit " + limit,
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			v, err := cl.Do(ctx, "RSEMACQUIRE", "sem"+limit+":"+keys[0], limit, ttl).Slice()
			if errors.Is(err, redis.Nil) {
				return "", false, nil
			}
			if err != nil || len(v) != 2 {
				return "", false, fmt.Errorf("RSEMACQUIRE: %v %v", v, err)
			}
			token, isString := v[0].(string)
			if !isString {
				return "", false, fmt.Errorf("RSEMACQUIRE: token %v", v[0])
			}
			return token, true, nil
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			n, err := cl.Do(ctx, "RSEMRELEASE", "sem"+limit+":"+keys[0], token).Int()
			if err == nil && n != 1 {
				err = fmt.Errorf("RSEMRELEASE answered %d", n)
			}
			return err
		},
		close: func() { cl.Close() },
	}
}

func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }

// driver is one way of taking and releasing locks. A cycle names one
// resource (keys[0]), or several for the multi-resource drivers, which take
// them all or none: ok is false, and nothing is left held, when any of them
// was not granted.
type driver struct {
	name   string
	lock   func(ctx context.Context, keys []string) (token string, ok bool, err error)
	unlock func(ctx context.Context, keys []string, token string) error
	close  func()
	// external, when set, runs a whole cell in another process (lock and
	// unlock unset): c workers on one resource drawn from k each cycle,
	// for d, with ttl; it returns the result and that process's CPU.
	external func(c, k int, d, ttl time.Duration) (result, time.Duration, error)
}

type result struct {
	name       string
	rate       float64
	acq        [3]time.Duration // p50, p99, p999
	unl        [2]time.Duration // p50, p99
	notGranted int64
	errors     int64
	firstErr   error     // one of the errors, if any
	cpu        cpuSample // CPU per 1000 cycles (set by the cycles section)
	left       int       // lock keys left on the masters after the cells (all repeats)
}

// cycle runs c workers doing lock -> unlock on k resources for d, each
// cycle on width distinct resources drawn at random (width <= k).
func cycle(drv driver, c, k, width int, d, ttl time.Duration) result {
	ctx := context.Background()
	var (
		cycles, notGranted, errs atomic.Int64
		mu                       sync.Mutex
		acqAll, unlAll           []time.Duration
		firstErr                 error
		wg                       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var acq, unl []time.Duration
			var werr error // this worker's first error
			ids, keys := make([]int, width), make([]string, width)
			for time.Now().Before(deadline) {
				for i := range keys {
					ids[i] = rng.IntN(k)
					for slices.Contains(ids[:i], ids[i]) {
						ids[i] = rng.IntN(k)
					}
					keys[i] = "bench:" + strconv.Itoa(ids[i])
				}
				t0 := time.Now()
				token, ok, err := drv.lock(ctx, keys)
				acq = append(acq, time.Since(t0))
				if err != nil {
					errs.Add(1)
					werr = cmp.Or(werr, err)
					continue
				}
				if !ok {
					notGranted.Add(1)
					continue
				}
				t1 := time.Now()
				if err := drv.unlock(ctx, keys, token); err != nil {
					errs.Add(1)
					werr = cmp.Or(werr, err)
				}
				unl = append(unl, time.Since(t1))
				cycles.Add(1)
			}
			mu.Lock()
			acqAll = append(acqAll, acq...)
			unlAll = append(unlAll, unl...)
			firstErr = cmp.Or(firstErr, werr)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(acqAll)
	slices.Sort(unlAll)
	return result{
		name:       drv.name,
		rate:       float64(cycles.Load()) / d.Seconds(),
		acq:        [3]time.Duration{pct(acqAll, 0.50), pct(acqAll, 0.99), pct(acqAll, 0.999)},
		unl:        [2]time.Duration{pct(unlAll, 0.50), pct(unlAll, 0.99)},
		notGranted: notGranted.Load(),
		errors:     errs.Load(),
		firstErr:   firstErr,
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// median is the run with the median rate.
func median(runs []result) result {
	sort.Slice(runs, func(i, j int) bool { return runs[i].rate < runs[j].rate })
	return runs[len(runs)/2]
}

// env is a set of masters and one proxy in front of them.
type env struct {
	masters []*exec.Cmd
	addrs   []string
	direct  []*redis.Client
	proxy   *exec.Cmd
	addr    string
	proxyB  *exec.Cmd // the second proxy (-proxy-bin-b), if any
	addrB   string
	ttl     time.Duration
	stopped bool
}

func start(dir string, n int, proxyBin, proxyBinB string, ttl time.Duration, profile, extraYAML string) (*env, error) {
	e := &env{ttl: ttl}
	for i := range n {
		cmd, addr, err := startRedis(filepath.Join(dir, fmt.Sprintf("m%d-%d", n, i)))
		if err != nil {
			e.stop()
			return nil, err
		}
		e.masters = append(e.masters, cmd)
		e.addrs = append(e.addrs, addr)
		e.direct = append(e.direct, redis.NewClient(&redis.Options{Addr: addr}))
	}
	cfg := "metrics_listen: \"\"\nlog_level: warn\nlimits: {max_clients: 15000}\nmasters:\n"
	for _, a := range e.addrs {
		cfg += fmt.Sprintf("  - addr: %q\n", a)
	}
	if extraYAML != "" {
		cfg += extraYAML + "\n"
	}
	path := filepath.Join(dir, fmt.Sprintf("proxy-%d.yaml", n))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	var err error
	if e.proxy, e.addr, err = startProxy(proxyBin, path, profile); err != nil {
		e.stop()
		return nil, err
	}
	if proxyBinB != "" {
		if e.proxyB, e.addrB, err = startProxy(proxyBinB, path, ""); err != nil {
			e.stop()
			return nil, err
		}
	}
	return e, nil
}

// startProxy starts a proxy binary with a configuration file on a listener
// it hands over, and waits until it answers.
func startProxy(bin, cfgPath, profile string) (*exec.Cmd, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	f, _ := ln.(*net.TCPListener).File()
	addr := ln.Addr().String()
	args := []string{"--config", cfgPath, "--listen-fd", "3"}
	if profile != "" {
		args = append(args, "--cpuprofile", profile)
	}
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	f.Close()
	ln.Close()
	if err != nil {
		return nil, "", err
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", fmt.Errorf("the proxy %s did not start", bin)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, addr, nil
}

func startRedis(dir string, extra ...string) (*exec.Cmd, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		addr := "127.0.0.1:" + strconv.Itoa(port)
		cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--loglevel", "warning", "--maxclients", "20000"}, extra...)...)
		if err := cmd.Start(); err != nil {
			return nil, "", fmt.Errorf("redis-server: %w (is it installed?)", err)
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if c.Ping(context.Background()).Err() == nil {
				c.Close()
				return cmd, addr, nil
			}
		}
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}
	return nil, "", errors.New("could not start redis-server")
}

func (e *env) stop() {
	if e.stopped {
		return
	}
	e.stopped = true
	for _, p := range []*exec.Cmd{e.proxy, e.proxyB} {
		if p != nil && p.Process != nil {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
	}
	for _, c := range e.direct {
		c.Close()
	}
	for _, m := range e.masters {
		m.Process.Kill()
		m.Wait()
	}
}

// keysLeft counts the lock keys (bench:*) left on the masters once the
// cell is over and the releases still in flight had a moment to land: every
// grant must have been released. It deletes them so that the next cell
// starts clean.
func (e *env) keysLeft() (int, error) {
	time.Sleep(200 * time.Millisecond)
	n := 0
	for i, c := range e.direct {
		var keys []string
		// Lock keys, and every key of a semaphore (all under the meta
		// prefix; a released semaphore leaves none).
		for _, pattern := range []string{"bench:*", "redlock-proxy:sem:*", "redlock-proxy:fairq*"} {
			iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
			for iter.Next(context.Background()) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return 0, err
			}
		}
		n += len(keys)
		for _, k := range keys {
			// Where a key was left says why: on a minority, a release or
			// rollback that never reached that master; on a quorum, a grant
			// nobody released.
			fmt.Fprintf(os.Stderr, "key left: master%d %s (ttl %v)\n", i, k, c.PTTL(context.Background(), k).Val())
		}
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	}
	return n, nil
}

// proxyClient is a pool of client connections to the proxy sized for c
// workers, the same for every proxy driver.
func (e *env) proxyClient(c int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 2 * c, MinIdleConns: c, MaxRetries: -1})
}

func (e *env) proxyDriver(c int) driver { return e.proxyDriverClient(e.proxyClient(c)) }

// rlock is RLOCK key ttl: the token, or ok false if the lock is held.
func rlock(ctx context.Context, cl *redis.Client, key, ttl string) (token string, ok bool, err error) {
	v, err := cl.Do(ctx, "RLOCK", key, ttl).Slice()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil || len(v) != 3 {
		return "", false, fmt.Errorf("RLOCK: %v %v", v, err)
	}
	token, isString := v[0].(string)
	if !isString {
		return "", false, fmt.Errorf("RLOCK: token %v", v[0])
	}
	return token, true, nil
}

// runlock is RUNLOCK key token; anything but 1 is an error.
func runlock(ctx context.Context, cl *redis.Client, key, token string) error {
	n, err := cl.Do(ctx, "RUNLOCK", key, token).Int()
	if err == nil && n != 1 {
		err = fmt.Errorf("RUNLOCK answered %d", n)
	}
	return err
}

// multiDriver takes the resources of a cycle with one RMULTILOCK
// (reply [token, validity, [fence, ...]], one fence per resource) and
// releases them with one RMULTIUNLOCK (reply 1). A null RMULTILOCK reply is
// "not granted"; any other reply that is not of that shape is an error.
func (e *env) multiDriver(c int) driver {
	cl := e.proxyClient(c)
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	return driver{
		name: "multi",
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			args := make([]any, 0, 3+len(keys))
			args = append(args, "RMULTILOCK", ttl, strconv.Itoa(len(keys)))
			for _, k := range keys {
				args = append(args, k)
			}
			v, err := cl.Do(ctx, args...).Slice()
			if errors.Is(err, redis.Nil) {
				return "", false, nil
			}
			if err != nil || len(v) != 3 {
				return "", false, fmt.Errorf("RMULTILOCK: %v %v", v, err)
			}
			token, isString := v[0].(string)
			_, isInt := v[1].(int64)
			fences, isArray := v[2].([]any)
			if !isString || !isInt || !isArray || len(fences) != len(keys) {
				return "", false, fmt.Errorf("RMULTILOCK: %v, want [token, validity, %d fences]", v, len(keys))
			}
			for _, f := range fences {
				if _, isInt := f.(int64); !isInt {
					return "", false, fmt.Errorf("RMULTILOCK: fence %v in %v", f, v)
				}
			}
			return token, true, nil
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			args := make([]any, 0, 2+len(keys))
			args = append(args, "RMULTIUNLOCK", token)
			for _, k := range keys {
				args = append(args, k)
			}
			n, err := cl.Do(ctx, args...).Int()
			if err == nil && n != 1 {
				err = fmt.Errorf("RMULTIUNLOCK answered %d", n)
			}
			if err != nil {
				return fmt.Errorf("RMULTIUNLOCK: %w", err)
			}
			return nil
		},
		close: func() { cl.Close() },
	}
}

// rlocksDriver takes the width resources of a cycle with one RLOCK each,
// one after the other, and releases them with one RUNLOCK each. When one
// is not granted (or fails), those already taken are released at once and
// the attempt is "not granted" (or an error); its acquire latency includes
// those releases. The token of a cycle is the RLOCK tokens, space-separated
// (the proxy's tokens are hex).
func (e *env) rlocksDriver(c, width int) driver {
	cl := e.proxyClient(c)
	ttl := strconv.FormatInt(e.ttl.Milliseconds(), 10)
	return driver{
		name: strconv.Itoa(width) + "xRLOCK",
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			tokens := make([]string, 0, len(keys))
			for _, k := range keys {
				token, ok, err := rlock(ctx, cl, k, ttl)
				if err != nil || !ok {
					for i, t := range tokens {
						err = errors.Join(err, runlock(ctx, cl, keys[i], t))
					}
					return "", false, err
				}
				tokens = append(tokens, token)
			}
			return strings.Join(tokens, " "), true, nil
		},
		unlock: func(ctx context.Context, keys []string, token string) error {
			tokens := strings.Split(token, " ")
			if len(tokens) != len(keys) {
				return fmt.Errorf("%d tokens for %d resources", len(tokens), len(keys))
			}
			var err error
			for i, t := range tokens {
				err = errors.Join(err, runlock(ctx, cl, keys[i], t))
			}
			return err
		},
		close: func() { cl.Close() },
	}
}

func (e *env) redsyncDriver(c int) driver {
	var pools []redsyncredis.Pool
	var clients []*redis.Client
	for _, a := range e.addrs {
		cl := redis.NewClient(&redis.Options{Addr: a, PoolSize: 2 * c, MinIdleConns: c})
		clients = append(clients, cl)
		pools = append(pools, goredis.NewPool(cl))
	}
	rs := redsync.New(pools...)
	var mu sync.Mutex
	held := map[string]*redsync.Mutex{}
	return driver{
		name: "redsync",
		lock: func(ctx context.Context, keys []string) (string, bool, error) {
			m := rs.NewMutex(keys[0], redsync.WithExpiry(e.ttl), redsync.WithTries(1))
			err := m.LockContext(ctx)
			var taken *redsync.ErrTaken
			if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
				return "", false, nil
			}
			if err != nil {
				return "", false, err
			}
			mu.Lock()
			held[m.Value()] = m
			mu.Unlock()
			return m.Value(), true, nil
		},
		unlock: func(ctx context.Context, _ []string, token string) error {
			mu.Lock()
			m := held[token]
			delete(held, token)
			mu.Unlock()
			ok, err := m.UnlockContext(ctx)
			if err == nil && !ok {
				err = errors.New("unlock failed")
			}
			return err
		},
		close: func() {
			for _, cl := range clients {
				cl.Close()
			}
		},
	}
}

// idleMemory opens n idle connections to the proxy and reports its RSS.
func (e *env) idleMemory(n int) error {
	before, err := rss(e.proxy.Process.Pid)
	if err != nil {
		return err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			return fmt.Errorf("after %d connections: %w", len(conns), err)
		}
		conns = append(conns, c)
	}
	// Every connection answers, so the proxy has really set each one up.
	buf := make([]byte, 7)
	for _, c := range conns {
		c.Write([]byte("PING\r\n"))
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "+PONG\r\n" {
			return fmt.Errorf("an idle connection got %q", buf)
		}
	}
	time.Sleep(time.Second)
	after, err := rss(e.proxy.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("\n## idle connections\n\n%d idle client connections: proxy RSS %.1f MB (%.1f MB before them, %.1f KB each)\n",
		n, float64(after)/1e6, float64(before)/1e6, float64(after-before)/float64(n)/1e3)
	return nil
}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server not found"
	}
	return strings.TrimSpace(strings.SplitN(string(out), " sha=", 2)[0])
}
