// Package tests holds black-box tests of redlock-proxy: the real binary, in
// front of real redis-server masters started by the harness, driven by real
// Redis clients.
package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The package's tests run in two lanes side by side, so that the tests
// that mostly wait do not add their waits to the time of the others:
//   - busy (busy): one test at a time, for the tests that load the CPU or
//     count time (contention, slow or paused masters, clients' runs);
//   - waiting (waits): up to three at once, for the tests that mostly
//     wait (Redis Cluster failovers, quarantines, expiries, rolling
//     restarts), and load the CPU little beside the busy lane's test.
//
// make test runs the package with -parallel 128, so that testing's own
// limit of parallel tests is never what a lane waits for. A test that
// calls neither runs first, alone (t.Setenv needs that; the chaos runs
// and the drop-in corpus have their own make targets).
var lanes = struct{ busy, waiting chan struct{} }{make(chan struct{}, 1), make(chan struct{}, 3)}

// busy runs t in the busy lane: in parallel with the waiting lane's
// tests, and alone in its own.
func busy(t *testing.T) {
	t.Helper()
	t.Parallel()
	enter(t, lanes.busy)
}

// waits runs t in the waiting lane, beside up to two other waiting
// tests and the busy lane's one.
func waits(t *testing.T) {
	t.Helper()
	t.Parallel()
	enter(t, lanes.waiting)
}

// enter takes a place in lane until t and all its cleanups are done (the
// cleanup registered first runs last).
func enter(t *testing.T, lane chan struct{}) {
	lane <- struct{}{}
	t.Cleanup(func() { <-lane })
}

// proxyBin is the redlock-proxy binary built once by TestMain (with -race).
var proxyBin string

// plainBin is the binary built as shipped (without -race), for tests that
// measure memory; built on first use.
var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

func plainProxyBin(t testing.TB) string {
	t.Helper()
	plainOnce.Do(func() {
		plainBin = filepath.Join(filepath.Dir(proxyBin), "redlock-proxy-plain")
		out, err := exec.Command("go", "build", "-ldflags", stampVersion, "-o", plainBin, "../cmd/redlock-proxy").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("building the proxy without -race: %v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}

// testVersion is the version the tests stamp into the proxy as the
// Makefile does (-ldflags -X), for TestDevMode to find in INFO, --version
// and go_build_info.
const (
	testVersion  = "0.0.0-test"
	stampVersion = "-X github.com/redlock-proxy/redlock-proxy/internal/buildinfo.version=v" + testVersion
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redlock-proxy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "redlock-proxy")
	build := exec.Command("go", "build", "-race", "-ldflags", stampVersion, "-o", proxyBin, "../cmd/redlock-proxy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proxyConfig is what a test may change in the proxy's config.yaml.
type proxyConfig struct {
	masters       []string
	clusters      [][]string // masters that are Redis Clusters (their seeds), after masters
	masterTimeout time.Duration
	retryDelay    time.Duration
	retryJitter   time.Duration
	maxTTL        time.Duration
	maxWait       time.Duration
	maxClients    int
	limitsExtra   string      // more YAML lines inside limits:, each indented two spaces
	metricsListen string      // "" = off
	extra         string      // appended YAML
	clientTLS     *tls.Config // set: the proxy listens with TLS; how to reach it
	plain         bool        // run the binary built without -race (memory figures)
	logLevel      string      // "" = debug
}

func (c proxyConfig) yaml() string {
	var b strings.Builder
	if len(c.masters)+len(c.clusters) > 0 {
		b.WriteString("masters:\n")
	}
	for _, m := range c.masters {
		fmt.Fprintf(&b, "  - addr: %q\n", m)
	}
	for _, seeds := range c.clusters {
		fmt.Fprintf(&b, "  - cluster: [\"%s\"]\n", strings.Join(seeds, `", "`))
	}
	level := c.logLevel
	if level == "" {
		level = "debug"
	}
	fmt.Fprintf(&b, "metrics_listen: %q\nmaster_timeout: %s\nretry_delay: %s\nretry_jitter: %s\nlog_level: %s\n",
		c.metricsListen, c.masterTimeout, c.retryDelay, c.retryJitter, level)
	fmt.Fprintf(&b, "limits:\n  max_ttl: %s\n  max_wait: %s\n  max_clients: %d\n", c.maxTTL, c.maxWait, c.maxClients)
	b.WriteString(c.limitsExtra)
	b.WriteString(c.extra)
	return b.String()
}

// Proxy is one running redlock-proxy process.
type Proxy struct {
	Addr string
	t    testing.TB
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func defaults(masters []string) proxyConfig {
	return proxyConfig{
		masters:       masters,
		masterTimeout: 50 * time.Millisecond,
		retryDelay:    100 * time.Millisecond,
		retryJitter:   50 * time.Millisecond,
		maxTTL:        time.Hour,
		maxWait:       5 * time.Minute,
		maxClients:    10000,
	}
}

// startProxy runs the proxy binary on a listener the test opened itself and
// passes down (--listen-fd), so there is no free-port race.
func startProxy(t testing.TB, cfg proxyConfig) *Proxy {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), t: t, log: &syncBuffer{}, done: make(chan struct{})}
	bin := proxyBin
	if cfg.plain {
		bin = plainProxyBin(t)
	}
	p.cmd = exec.Command(bin, "--config", path, "--listen-fd", "3")
	// The race runtime sleeps a second at exit (atexit_sleep_ms) for
	// goroutines still running to report; the proxy joins its goroutines
	// before it exits, and a race is reported when it happens, so it
	// sleeps not at all: a second per proxy stopped was a third of make
	// test, and 100 ms still 20 s of it.
	p.cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	p.cmd.ExtraFiles = []*os.File{f}
	p.cmd.SysProcAttr = redistest.ChildAttr()
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln.Close() // the child holds its own copy of the socket
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("proxy %s log:\n%s", p.Addr, p.log.String())
		}
		if strings.Contains(p.log.String(), "DATA RACE") {
			t.Errorf("proxy %s reported a data race:\n%s", p.Addr, p.log.String())
		}
	})
	c := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2, TLSConfig: cfg.clientTLS})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-p.done:
			t.Fatalf("proxy exited at start:\n%s", p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not answer PING:\n%s", p.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

// RSS is the proxy process's resident set size in bytes, from /proc.
func (p *Proxy) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
	}
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10, err
}

// MetricsURL is the base URL of the proxy's metrics listener, read from its
// start-up log line.
func (p *Proxy) MetricsURL(t testing.TB) string {
	t.Helper()
	m := regexp.MustCompile(`metrics=(127\.0\.0\.1:\d+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("no metrics address in the proxy log:\n%s", p.log.String())
	}
	return "http://" + m[1]
}

// Stop ends the proxy with SIGTERM (graceful), or SIGKILL after 10s.
func (p *Proxy) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the proxy with SIGKILL, wherever it is: nothing is cleaned up.
func (p *Proxy) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Client returns a go-redis client (RESP3 by default, as go-redis does).
func (p *Proxy) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1, ReadTimeout: 30 * time.Second})
	p.t.Cleanup(func() { c.Close() })
	return c
}

// cluster is a set of real masters and clients to inspect them directly.
type cluster struct {
	servers []*redistest.Server
	direct  []*redis.Client
}

func newCluster(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{servers: redistest.StartN(t, n)}
	for _, s := range c.servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
		t.Cleanup(func() { rc.Close() })
		c.direct = append(c.direct, rc)
	}
	return c
}

func (c *cluster) addrs() []string { return redistest.Addrs(c.servers) }

// waitSubscribed waits (5 s at most) until channel has a subscriber on
// every master: a waiter subscribes there before the try it sleeps after.
func (c *cluster) waitSubscribed(t testing.TB, channel string) {
	t.Helper()
	waitFor(t, 5*time.Second, "a subscriber to "+channel+" on every master", func() bool {
		for _, rc := range c.direct {
			if rc.PubSubNumSub(context.Background(), channel).Val()[channel] < 1 {
				return false
			}
		}
		return true
	})
}

// pings is how many PINGs master i has answered since it started (INFO
// commandstats): the proxies' health loops ping every master once a tick,
// so a test can wait for ticks instead of sleeping through them.
func (c *cluster) pings(t testing.TB, i int) int {
	t.Helper()
	info, err := c.direct[i].Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats of master %d: %v", i, err)
	}
	m := regexp.MustCompile(`cmdstat_ping:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// holders counts the masters on which key holds value.
func (c *cluster) holders(key, value string) int {
	n := 0
	for _, rc := range c.direct {
		if v, err := rc.Get(context.Background(), key).Result(); err == nil && v == value {
			n++
		}
	}
	return n
}

// lockKeys lists the keys outside the meta namespace on every live master:
// what the proxy left behind as locks.
func (c *cluster) lockKeys(t testing.TB) []string {
	t.Helper()
	var out []string
	for i, rc := range c.direct {
		keys, err := rc.Keys(context.Background(), "*").Result()
		if err != nil {
			continue // a master that is down holds nothing we can see
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "redlock-proxy:") {
				out = append(out, fmt.Sprintf("master%d:%s", i, k))
			}
		}
	}
	return out
}

// expectNoLocks fails if any master holds a lock key.
func (c *cluster) expectNoLocks(t testing.TB) {
	t.Helper()
	if keys := c.lockKeys(t); len(keys) > 0 {
		t.Fatalf("lock keys left on the masters: %v", keys)
	}
}

// grant is a decoded RLOCK reply.
type grant struct {
	token    string
	validity int64
	fence    int64
}

// rlock sends RLOCK and decodes the reply: (grant, true) when granted,
// (zero, false) on nil; an error reply fails the test.
func rlock(t testing.TB, c *redis.Client, args ...any) (grant, bool) {
	t.Helper()
	g, ok, err := tryRlock(c, args...)
	if err != nil {
		t.Fatalf("RLOCK %v: %v", args, err)
	}
	return g, ok
}

func tryRlock(c *redis.Client, args ...any) (grant, bool, error) {
	v, err := c.Do(context.Background(), append([]any{"RLOCK"}, args...)...).Result()
	if err == redis.Nil {
		return grant{}, false, nil
	}
	if err != nil {
		return grant{}, false, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return grant{}, false, fmt.Errorf("RLOCK reply %#v is not [token, validity, fence]", v)
	}
	g := grant{}
	g.token, _ = arr[0].(string)
	g.validity, _ = arr[1].(int64)
	g.fence, _ = arr[2].(int64)
	if g.token == "" || g.fence < 1 {
		return grant{}, false, fmt.Errorf("RLOCK reply %#v has no token or fence", v)
	}
	return g, true, nil
}

func do(t testing.TB, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func expectErr(t testing.TB, c *redis.Client, want string, args ...any) {
	t.Helper()
	err := c.Do(context.Background(), args...).Err()
	if err == nil || err == redis.Nil || err.Error() != want {
		t.Fatalf("%q: got error %v, want %q", args, err, want)
	}
}

// waitFor polls cond until it holds or the deadline passes. It is for
// waiting on a state the system reaches by itself (a subscription, a
// reconnect), never for hiding a failure.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// soak scales a fault test's length: REDLOCK_SOAK=n (make soak) runs it n
// times longer; unset, 1.
func soak(t testing.TB) int {
	v := os.Getenv("REDLOCK_SOAK")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("REDLOCK_SOAK=%q: want a positive integer", v)
	}
	return n
}

// metricsBody fetches the proxy's /metrics.
func metricsBody(t testing.TB, p *Proxy) string {
	t.Helper()
	resp, err := http.Get(p.MetricsURL(t) + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return string(b)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
