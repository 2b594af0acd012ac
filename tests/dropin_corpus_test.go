package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The drop-in corpus (make dropin, issue 24): real lock libraries and
// hand-written idioms, unchanged, each run by a worker program of
// tests/dropin/ (Python, Node.js, PHP, or Go in the nested modules under
// tests/dropin/go/). A worker program runs `workers` workers, the even ones
// connected to the first lock address and the odd ones to the second, each
// looping `cycles` times:
//
//	acquire
//	  INCR inside; ZADD peak GT <inside> peak; SET held:<w> <cycle>   (plain redis)
//	  mutex: GET counter; sleep 1 ms; SET counter <counter+1>
//	  semaphore: sleep 1 ms; INCR counter
//	  DEL held:<w>; DECR inside
//	release
//
// on a separate plain redis-server (the "counter" server). A mutex row is
// exclusive when the counter is exactly workers*cycles (a lost update is an
// overlap) and the peak of `inside` is 1; a semaphore row when the peak
// never passed its limit (in holders) and the counter is workers*cycles.
//
// Each row runs three times: against ONE plain redis-server (the baseline,
// which proves the worker and the harness), through two proxies with
// dropin: true on 5 real masters, and again with 2 of the 5 masters
// SIGSTOPped. While a proxy run goes on, the test samples the masters: a
// worker whose held:<w> marker is the same before and after a direct read
// of every live master held its lock throughout that read, so the lock's
// key must then be on at least 3 masters. After a run (and after the
// paused masters are resumed) nothing may be left on any master but keys
// that expire under the proxy's meta prefix, and the master-wide fence
// keys (masterWide).

// dropinRow is one library or idiom of the corpus.
type dropinRow struct {
	name string
	// lang picks the worker program: "py", "node", "php", "go" (tests/dropin/go)
	// or "go411" (tests/dropin/go/redsync411, go-redsync v4.11.0).
	lang string
	// limit is the number of holders allowed at once: 1 for a mutex.
	limit int
	// keys are the lock keys of the resource "dropin" on the masters; need
	// is how many of them must be on a quorum while the lock is held
	// (rueidislock holds a majority of its keys).
	keys []string
	need int
	// contains: keys are substrings; a master holds the resource when any
	// of its keys contains one (semaphores, whose layout on the masters
	// the proxy chooses).
	contains bool
	// counters are keys the library keeps on one Redis for good (a
	// fencing counter it INCRs): not left over in the baseline. Through
	// the proxies they hold nothing.
	counters []string
}

// dropinCorpus is the table. Every worker locks the resource named
// "dropin" (the library may prefix it: the keys say how).
var dropinCorpus = []dropinRow{
	{name: "redis-py-lock", lang: "py", limit: 1, keys: []string{"dropin"}},
	{name: "redis-py-lock-timeout", lang: "py", limit: 1, keys: []string{"dropin"}},
	{name: "redis-py-pipeline", lang: "py", limit: 1, keys: []string{"dropin"}},
	{name: "redisio-py", lang: "py", limit: 1, keys: []string{"dropin"}},
	{name: "const-set-del", lang: "py", limit: 1, keys: []string{"dropin"}},
	{name: "redisio-goredis", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "redisio-node4", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "redisio-node5", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "redis-lock", lang: "node", limit: 1, keys: []string{"lock.dropin"}},
	{name: "redis-semaphore-mutex", lang: "node", limit: 1, keys: []string{"mutex:dropin"}},
	{name: "redis-semaphore-semaphore", lang: "node", limit: 3, keys: []string{"semaphore:dropin"}, contains: true},
	{name: "redis-semaphore-multisemaphore", lang: "node", limit: 2, keys: []string{"semaphore:dropin"}, contains: true},
	{name: "redis-semaphore-redlockmutex", lang: "node", limit: 1, keys: []string{"mutex:dropin"}},
	{name: "redis-semaphore-redlocksemaphore", lang: "node", limit: 3, keys: []string{"semaphore:dropin"}, contains: true},
	{name: "redlock4", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "redlock5", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "ioredis-lock", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "simple-redis-mutex", lang: "node", limit: 1, keys: []string{"@simple-redis-mutex:lock-dropin"}, counters: []string{"@simple-redis-mutex:fencing-tokens"}},
	{name: "node-redis-lock", lang: "node", limit: 1, keys: []string{"nrl:dropin"}},
	{name: "redlock-universal", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "redlock-universal-batch", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "sesamecare-redlock", lang: "node", limit: 1, keys: []string{"dropin"}},
	{name: "redis-warlock", lang: "node", limit: 1, keys: []string{"dropin:lock"}},
	{name: "redsync-4.11-goredis", lang: "go411", limit: 1, keys: []string{"dropin"}},
	{name: "redsync-4.11-redigo", lang: "go411", limit: 1, keys: []string{"dropin"}},
	{name: "redsync-4.11-rueidis", lang: "go411", limit: 1, keys: []string{"dropin"}},
	{name: "redsync-4.18-goredis", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "redsync-4.18-redigo", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "redsync-4.18-rueidis", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "bsm-redislock", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "rueidislock", lang: "go", limit: 1, keys: []string{"rueidislock:0:dropin", "rueidislock:1:dropin", "rueidislock:2:dropin"}, need: 2},
	{name: "spring-shape", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "redisson-shape", lang: "go", limit: 1, keys: []string{"dropin"}},
	{name: "symfony-lock", lang: "php", limit: 1, keys: []string{"dropin"}},
}

// dropinEnv reads a positive integer knob of the corpus.
func dropinEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// dropinPrograms builds or finds what runs the workers of each language.
type dropinPrograms struct {
	python string
	goBin  map[string]string // lang -> binary
}

func (p *dropinPrograms) command(ctx context.Context, r dropinRow, args ...string) *exec.Cmd {
	switch r.lang {
	case "py":
		return exec.CommandContext(ctx, p.python, append([]string{"dropin/dropin.py", r.name}, args...)...)
	case "node":
		return exec.CommandContext(ctx, "node", append([]string{"dropin/dropin.js", r.name}, args...)...)
	case "php":
		return exec.CommandContext(ctx, "php", append([]string{"dropin/dropin.php", r.name}, args...)...)
	default:
		return exec.CommandContext(ctx, p.goBin[r.lang], append([]string{r.name}, args...)...)
	}
}

// prepareDropin fails, never skips, when something the corpus needs is
// missing: REDLOCK_DROPIN=1 asked for it.
func prepareDropin(t *testing.T) *dropinPrograms {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("drop-in corpus: "+format+" (make dropin installs everything it needs)", args...)
	}
	if !redistest.Real() {
		fail("redis-server is not installed (the corpus runs real masters and pauses them with SIGSTOP)")
	}
	p := &dropinPrograms{python: "/usr/bin/python3", goBin: map[string]string{}}
	if err := exec.Command(p.python, "-c", "import redis").Run(); err != nil {
		fail("redis-py is not importable by %s: %v", p.python, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		fail("node is not installed")
	}
	if out, err := exec.Command("php", "-r", `require '/usr/share/php/Symfony/Component/Lock/autoload.php'; new Redis(); exit(function_exists('pcntl_fork') ? 0 : 1);`).CombinedOutput(); err != nil {
		fail("php with php-redis, pcntl and Symfony Lock (php-cli php-redis php-symfony-lock) is not usable: %v %s", err, out)
	}
	if _, err := os.Stat("dropin/node_modules/redis-semaphore"); err != nil {
		fail("the Node.js libraries are not installed in tests/dropin: %v", err)
	}
	dir := t.TempDir()
	for lang, mod := range map[string]string{"go": "dropin/go", "go411": "dropin/go/redsync411"} {
		bin := filepath.Join(dir, "dropin-"+lang)
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			fail("building the Go workers in tests/%s: %v\n%s", mod, err, out)
		}
		p.goBin[lang] = bin
	}
	return p
}

// dropinPhase is the outcome of one run of a row's workers.
type dropinPhase struct {
	ran      bool
	counter  int64
	peak     int64
	err      string   // the worker's failure, or the harness's
	samples  int      // valid samples of the masters while held
	late     []string // keys with an expiry left on the resumed masters (stragglers)
	short    []string
	leftover []string
}

func (ph dropinPhase) ok(want int64, limit int) bool {
	return ph.ran && ph.err == "" && ph.counter == want && ph.peak >= 1 && ph.peak <= int64(limit) &&
		len(ph.short) == 0 && len(ph.leftover) == 0
}

func (ph dropinPhase) cell(want int64) string {
	if !ph.ran {
		return "-"
	}
	s := fmt.Sprintf("%d/%d peak %d", ph.counter, want, ph.peak)
	if ph.err != "" {
		s += " ERR"
	}
	return s
}

// dropinResult is a row's line of the summary.
type dropinResult struct {
	row                 dropinRow
	want                int64
	base, proxy, paused dropinPhase
	note                string
	passed              bool
	sampleOK            string
}

// TestDropinCorpus runs the corpus: one subtest per row (run one with
// -run 'TestDropinCorpus/redis-py-lock$'), then a summary table.
// Knobs: REDLOCK_DROPIN_WORKERS (8), REDLOCK_DROPIN_CYCLES (200),
// REDLOCK_DROPIN_TIMEOUT (seconds per run of a row's workers, 240).
func TestDropinCorpus(t *testing.T) {
	if os.Getenv("REDLOCK_DROPIN") != "1" {
		t.Skip("!!! SKIPPED: the drop-in corpus runs only with REDLOCK_DROPIN=1: `make dropin` (it installs the libraries and takes minutes)")
	}
	progs := prepareDropin(t)
	workers := dropinEnv(t, "REDLOCK_DROPIN_WORKERS", 8)
	cycles := dropinEnv(t, "REDLOCK_DROPIN_CYCLES", 200)
	timeout := time.Duration(dropinEnv(t, "REDLOCK_DROPIN_TIMEOUT", 240)) * time.Second

	var mu sync.Mutex
	var results []*dropinResult
	// Cleanup runs once every row's subtest, parallel ones included, ended.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		printDropinSummary(t, results, workers, cycles)
	})
	// The negative control: workers that take no lock at all must be
	// caught by the counter and the peak, else the harness proves nothing.
	t.Run("control-nolock", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		counter := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { counter.Close() })
		r := dropinRow{name: "control-nolock", lang: "py", limit: 1}
		ph := runDropinPhase(t, progs, r, []string{srv.Addr, srv.Addr}, counter, nil, nil, workers, cycles, timeout)
		if ph.err != "" || ph.counter >= int64(workers*cycles) || ph.peak < 2 {
			t.Fatalf("the harness did not see workers without a lock overlap: counter %d of %d, peak %d, error %q",
				ph.counter, workers*cycles, ph.peak, ph.err)
		}
	})
	// The sampler's control: a correct lock taken on ONE of the 5 masters
	// directly is held on fewer than 3, which the samples must show; and
	// a key left without an expiry must be reported.
	t.Run("control-one-master", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t)
		counter := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { counter.Close() })
		cl := newCluster(t, 5)
		r := dropinRow{name: "redisio-py", lang: "py", limit: 1, keys: []string{"dropin"}, need: 1}
		m0 := cl.servers[0].Addr
		ph := runDropinPhase(t, progs, r, []string{m0, m0}, counter, cl, []int{0, 1, 2, 3, 4}, workers, cycles, timeout)
		if ph.err != "" || ph.counter != int64(workers*cycles) || ph.samples == 0 || len(ph.short) != ph.samples {
			t.Fatalf("a lock on one master: counter %d, error %q, %d samples of which %d on fewer than 3 masters, want all",
				ph.counter, ph.err, ph.samples, len(ph.short))
		}
		cl.direct[2].Set(context.Background(), "redlock-proxy:forever", 1, 0)
		cl.direct[3].Set(context.Background(), "lockish", 1, time.Minute)
		if left := leftoverKeys(cl.direct, false); len(left) != 2 {
			t.Fatalf("leftoverKeys = %v, want the key without expiry and the lock key", left)
		}
	})
	for _, r := range dropinCorpus {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			res := runDropinRow(t, progs, r, workers, cycles, timeout)
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
		})
	}
}

func printDropinSummary(t *testing.T, results []*dropinResult, workers, cycles int) {
	sort.Slice(results, func(i, j int) bool { return rowIndex(results[i].row.name) < rowIndex(results[j].row.name) })
	var b strings.Builder
	fmt.Fprintf(&b, "drop-in corpus: %d workers x %d cycles, two proxies on 5 masters\n", workers, cycles)
	fmt.Fprintf(&b, "%-34s %-6s %-22s %-22s %-22s %-14s %-13s %s\n", "row", "result", "baseline (1 redis)", "proxy", "2 of 5 paused", "on>=3 sampled", "leftover", "first error")
	pass := 0
	for _, res := range results {
		verdict := "FAIL"
		if res.passed {
			verdict, pass = "ok", pass+1
		}
		left := strconv.Itoa(len(res.proxy.leftover) + len(res.paused.leftover))
		if len(res.paused.late) > 0 {
			left += fmt.Sprintf(" (%d late)", len(res.paused.late))
		}
		fmt.Fprintf(&b, "%-34s %-6s %-22s %-22s %-22s %-14s %-13s %s\n", res.row.name, verdict,
			res.base.cell(res.want), res.proxy.cell(res.want), res.paused.cell(res.want), res.sampleOK, left, res.note)
	}
	fmt.Fprintf(&b, "%d of %d rows pass through the proxy\n", pass, len(results))
	b.WriteString("(counter/expected and peak holders at once; on>=3 sampled: samples of the masters while a worker held the lock, NO = some had the key on fewer than 3;\n" +
		" leftover: lock keys, or keys without expiry, left on the masters after the runs; late: lock keys with an expiry that the resumed masters set from requests they ran late, which expire by themselves)\n")
	t.Log("\n" + b.String())
	fmt.Println(b.String()) // also in the output of a run without -v
}

func rowIndex(name string) int {
	for i, r := range dropinCorpus {
		if r.name == name {
			return i
		}
	}
	return len(dropinCorpus)
}

// runDropinRow runs one row: baseline, proxies, proxies with 2 masters
// paused. The baseline must pass (else the harness or the worker is
// wrong); the proxy runs are the subject.
func runDropinRow(t *testing.T, progs *dropinPrograms, r dropinRow, workers, cycles int, timeout time.Duration) *dropinResult {
	res := &dropinResult{row: r, want: int64(workers * cycles)}
	if r.need == 0 {
		r.need = len(r.keys)
	}
	counterSrv := redistest.Start(t)
	counter := redis.NewClient(&redis.Options{Addr: counterSrv.Addr})
	t.Cleanup(func() { counter.Close() })

	// Baseline: one plain redis-server for every worker.
	baseSrv := redistest.Start(t)
	base := redis.NewClient(&redis.Options{Addr: baseSrv.Addr})
	t.Cleanup(func() { base.Close() })
	res.base = runDropinPhase(t, progs, r, []string{baseSrv.Addr, baseSrv.Addr}, counter, nil, nil, workers, cycles, timeout)
	res.base.leftover = slices.DeleteFunc(leftoverKeys([]*redis.Client{base}, true), func(k string) bool {
		return slices.ContainsFunc(r.counters, func(c string) bool { return strings.HasPrefix(k, "master0:"+c+" ") })
	})
	if !res.base.ok(res.want, r.limit) {
		t.Errorf("BASELINE on one plain redis-server failed (the worker or the harness is wrong): %s", describePhase(res.base, res.want, r.limit))
		res.note = "baseline: " + res.base.err
		return res
	}

	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.extra = "dropin: true\n"
	cfg.plain = true // the corpus measures the libraries, not the race detector: ~10x the throughput
	// Three rows at once on 2 cores (five masters, two proxies and the
	// workers each): with the harness's 50 ms, live masters missed votes
	// on a slower machine (NOQUORUM with every master up). The corpus
	// measures the libraries, not how fast a slow master is left out.
	cfg.masterTimeout = 200 * time.Millisecond
	cfg.logLevel = "info" // not a line per command: a failed row prints its proxies' logs
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	all := []int{0, 1, 2, 3, 4}

	res.proxy = runDropinPhase(t, progs, r, []string{pa.Addr, pb.Addr}, counter, cl, all, workers, cycles, timeout)
	res.proxy.leftover = leftoverWithin(cl.direct, 2*time.Second)
	if !res.proxy.ok(res.want, r.limit) {
		t.Errorf("through the proxies: %s", describePhase(res.proxy, res.want, r.limit))
		res.note = firstNote(res.proxy)
	}

	for _, i := range []int{3, 4} {
		cl.servers[i].Pause()
	}
	res.paused = runDropinPhase(t, progs, r, []string{pa.Addr, pb.Addr}, counter, cl, []int{0, 1, 2}, workers, cycles, timeout)
	for _, i := range []int{3, 4} {
		cl.servers[i].Resume()
	}
	// A resumed master runs the requests it received while stopped, late:
	// a try whose connection the proxy has since given up can set a lock
	// key there that nobody deletes (a straggler, as in any Redlock). After
	// the proxies' own clean-up time, such a key on a resumed master that
	// expires (Redis guarantees it goes) is counted as late, apart; any
	// other lock key, and any key without an expiry, is left over.
	res.paused.late, res.paused.leftover = stragglersWithin(cl.direct, []int{3, 4}, 2*time.Second)
	if !res.paused.ok(res.want, r.limit) {
		t.Errorf("through the proxies with 2 of 5 masters paused: %s", describePhase(res.paused, res.want, r.limit))
		if res.note == "" {
			res.note = "paused: " + firstNote(res.paused)
		}
	}
	n := res.proxy.samples + res.paused.samples
	switch {
	case len(res.proxy.short)+len(res.paused.short) > 0:
		res.sampleOK = fmt.Sprintf("NO (%d)", len(res.proxy.short)+len(res.paused.short))
	case n == 0:
		res.sampleOK = "no sample"
	default:
		res.sampleOK = fmt.Sprintf("yes (%d)", n)
	}
	res.passed = !t.Failed()
	return res
}

func firstNote(ph dropinPhase) string {
	switch {
	case ph.err != "":
		return ph.err
	case len(ph.short) > 0:
		return "held but on <3 masters: " + ph.short[0]
	case len(ph.leftover) > 0:
		return "left: " + ph.leftover[0]
	}
	return fmt.Sprintf("counter %d, peak %d", ph.counter, ph.peak)
}

func describePhase(ph dropinPhase, want int64, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "counter %d (want %d), peak holders %d (limit %d)", ph.counter, want, ph.peak, limit)
	if ph.err != "" {
		fmt.Fprintf(&b, "; worker failed: %s", ph.err)
	}
	if len(ph.short) > 0 {
		fmt.Fprintf(&b, "; held but on fewer than 3 masters in %d of %d samples, e.g. %s", len(ph.short), ph.samples, ph.short[0])
	}
	if len(ph.leftover) > 0 {
		fmt.Fprintf(&b, "; left on the masters: %v", ph.leftover)
	}
	return b.String()
}

// runDropinPhase runs the row's worker program once, sampling the masters
// of cl (when given; live are the ones not paused) while it runs.
func runDropinPhase(t *testing.T, progs *dropinPrograms, r dropinRow, lockAddrs []string, counter *redis.Client, cl *cluster, live []int, workers, cycles int, timeout time.Duration) dropinPhase {
	t.Helper()
	ph := dropinPhase{ran: true}
	bg := context.Background()
	if err := counter.FlushAll(bg).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, timeout)
	defer cancel()
	cmd := progs.command(ctx, r, strings.Join(lockAddrs, ","), counter.Options().Addr, strconv.Itoa(workers), strconv.Itoa(cycles))
	cmd.Dir = "."
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if cl == nil {
		err = <-done
	} else {
		err = sampleWhileRunning(r, counter, cl, live, workers, done, &ph)
	}
	elapsed := time.Since(start)
	ph.counter, _ = counter.Get(bg, "counter").Int64()
	ph.peak = int64(counter.ZScore(bg, "peak", "peak").Val())
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			ph.err = fmt.Sprintf("timed out after %v", timeout)
		} else {
			ph.err = lastErrorLine(out.String(), err)
		}
	}
	t.Logf("%s via %v: %v, counter %d, peak %d, %d samples", r.name, lockAddrs, elapsed.Round(time.Millisecond), ph.counter, ph.peak, ph.samples)
	if err != nil {
		t.Logf("the worker program failed (%v); its output:\n%s", err, tail(out.String(), 3000))
	}
	return ph
}

// sampleWhileRunning reads the masters while the workers run, until the
// worker program exits, and returns its exit error.
func sampleWhileRunning(r dropinRow, counter *redis.Client, cl *cluster, live []int, workers int, done <-chan error, ph *dropinPhase) error {
	bg := context.Background()
	held := make([]string, workers)
	for w := range held {
		held[w] = "held:" + strconv.Itoa(w)
	}
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		before, err := counter.MGet(bg, held...).Result()
		if err != nil || !anyHeld(before) {
			time.Sleep(time.Millisecond)
			continue
		}
		seen := readMasters(r, cl, live)
		after, err := counter.MGet(bg, held...).Result()
		if err != nil {
			continue
		}
		for w := range before {
			if before[w] == nil || before[w] != after[w] {
				continue
			}
			// Worker w held its lock or permit during the whole read.
			ph.samples++
			if got := onQuorum(r, seen); got < r.need {
				ph.short = append(ph.short, fmt.Sprintf("worker %d cycle %v: %d of %d keys on >=3 masters: %v", w, before[w], got, r.need, seen))
			}
			break
		}
		time.Sleep(2 * time.Millisecond) // samples spread over the run
	}
}

func anyHeld(vs []any) bool {
	for _, v := range vs {
		if v != nil {
			return true
		}
	}
	return false
}

// readMasters reads the row's keys on each live master, in parallel: per
// key and master, the string value, or "+" when a key containing it exists
// (contains rows), or "" when absent.
func readMasters(r dropinRow, cl *cluster, live []int) [][]string {
	seen := make([][]string, len(r.keys))
	for k := range seen {
		seen[k] = make([]string, len(cl.direct))
	}
	var wg sync.WaitGroup
	for _, i := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			rc := cl.direct[i]
			if r.contains {
				keys, _ := rc.Keys(ctx, "*").Result()
				for k, sub := range r.keys {
					for _, key := range keys {
						if strings.Contains(key, sub) {
							seen[k][i] = "+"
						}
					}
				}
				return
			}
			vals, _ := rc.MGet(ctx, r.keys...).Result()
			for k, v := range vals {
				if s, ok := v.(string); ok {
					seen[k][i] = s
				}
			}
		}()
	}
	wg.Wait()
	return seen
}

// onQuorum counts the keys that hold one value on at least 3 masters.
func onQuorum(r dropinRow, seen [][]string) int {
	n := 0
	for _, vals := range seen {
		count := map[string]int{}
		for _, v := range vals {
			if v != "" {
				count[v]++
			}
		}
		for _, c := range count {
			if c >= 3 {
				n++
				break
			}
		}
	}
	return n
}

// leftoverKeys lists, with SCAN and PTTL, every key on the servers that
// is a lock key (outside the proxy's meta prefix) or does not expire
// (beyond the master-wide fence keys). baseline: every key is a lock key
// (one plain redis-server has no meta keys).
func leftoverKeys(servers []*redis.Client, baseline bool) []string {
	var out []string
	ctx := context.Background()
	for i, rc := range servers {
		iter := rc.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			if !baseline && masterWide(k) {
				continue
			}
			pttl := rc.PTTL(ctx, k).Val()
			if baseline || !strings.HasPrefix(k, "redlock-proxy:") || pttl < 0 {
				out = append(out, fmt.Sprintf("master%d:%s (pttl %v)", i, k, pttl))
			}
		}
		if err := iter.Err(); err != nil {
			out = append(out, fmt.Sprintf("master%d: SCAN: %v", i, err))
		}
	}
	return out
}

// stragglersWithin is leftoverKeys on the masters, allowing d for the
// proxies' clean-up, with the keys that expire on the resumed masters
// apart (late).
func stragglersWithin(servers []*redis.Client, resumed []int, d time.Duration) (late, left []string) {
	deadline := time.Now().Add(d)
	for {
		late, left = late[:0], left[:0]
		for i, rc := range servers {
			for _, k := range leftoverKeys([]*redis.Client{rc}, false) {
				k = strings.Replace(k, "master0:", fmt.Sprintf("master%d:", i), 1)
				if slices.Contains(resumed, i) && !strings.Contains(k, "(pttl -") {
					late = append(late, k)
				} else {
					left = append(left, k)
				}
			}
		}
		if len(late)+len(left) == 0 || time.Now().After(deadline) {
			return late, left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leftoverWithin is leftoverKeys on the masters, allowing d for keys that
// the proxy deletes after the reply (a late master's rollback) to go.
func leftoverWithin(servers []*redis.Client, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := leftoverKeys(servers, false)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastErrorLine is the worker's own account of its failure: the last line
// it printed that starts with FAIL, else the last line, else err.
func lastErrorLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "FAIL") {
			return truncate(strings.TrimSpace(strings.TrimPrefix(lines[i], "FAIL")), 160)
		}
	}
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return truncate(l, 160)
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
