package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDevMode runs what `make run` runs: the proxy with embedded masters and
// nothing else, and takes a lock through it. It also reads /metrics,
// /healthz and /readyz.
func TestDevMode(t *testing.T) {
	busy(t)
	addr, log := startDev(t, "--metrics-listen", "127.0.0.1:0")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if !strings.Contains(log.String(), "DEV MODE") || !strings.Contains(log.String(), "NOT FOR PRODUCTION") {
		t.Errorf("dev mode is not announced as such:\n%s", log.String())
	}
	g, ok := rlock(t, c, "orders:42", 30000)
	if !ok {
		t.Fatal("RLOCK not granted in dev mode")
	}
	if _, ok := rlock(t, c, "orders:42", 30000); ok {
		t.Fatal("RLOCK of a held resource granted in dev mode")
	}
	if v := do(t, c, "RUNLOCK", "orders:42", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}

	info := c.Info(context.Background(), "commandstats", "locks", "leases").String()
	for _, want := range []string{"cmdstat_rlock:calls=2,usec=", "cmdstat_runlock:calls=1,", "granted_replies:2", "not_granted_replies:1", "waiting_clients:0", "autoextend_leases:0", "autoextend_lost:0"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	// The version stamped at build time (as the Makefile does) is the one
	// INFO and --version show.
	if info := do(t, c, "INFO", "server").(string); !strings.Contains(info, "redlock_proxy_version:"+testVersion+"\r\n") {
		t.Errorf("INFO server lacks redlock_proxy_version:%s:\n%s", testVersion, info)
	}
	if out, err := exec.Command(proxyBin, "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "redlock-proxy "+testVersion+" (go") {
		t.Errorf("--version: %v %q", err, out)
	}

	m := regexp.MustCompile(`metrics=(127\.0\.0\.1:\d+)`).FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", log.String())
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`redlock_proxy_commands_total{command="rlock",result="granted"} 1`,
		`redlock_proxy_commands_total{command="rlock",result="not_granted"} 1`,
		`redlock_proxy_commands_total{command="runlock",result="granted"} 1`,
		`redlock_proxy_commands_total{command="rsemacquire",result="granted"} 0`,
		`redlock_proxy_command_errors_total{code="NOQUORUM",command="rlock"} 0`,
		`redlock_proxy_autoextend_events_total{event="lost"} 0`,
		`redlock_proxy_masters `,
		`redlock_proxy_quorum `,
		`redlock_proxy_operations_total{op="lock",outcome="ok"} 1`,
		`redlock_proxy_master_up{master=`,
		`# HELP redlock_proxy_client_connections`,
		`go_build_info{checksum=`,
		`version="` + testVersion + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// startDev starts the proxy as `make run` does (--dev, embedded masters)
// on a free port, with extra flags, and returns its address once it
// answers, and its log.
func startDev(t *testing.T, extra ...string) (string, *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := ln.(*net.TCPListener).File()
	addr := ln.Addr().String()
	log := &syncBuffer{}
	cmd := exec.Command(proxyBin, append([]string{"--dev", "--listen-fd", "3"}, extra...)...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("proxy log:\n%s", log.String())
		}
	})
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	waitFor(t, 10*time.Second, "the dev proxy to answer", func() bool { return c.Ping(context.Background()).Err() == nil })
	return addr, log
}

// TestDevModeExpiry: the embedded masters of --dev expire keys with the
// wall clock, as real masters do: a lock, a semaphore permit and a latch
// are there until their ttl has passed (not before) and gone after it,
// and the scripts that take them again see them gone.
func TestDevModeExpiry(t *testing.T) {
	busy(t)
	addr, _ := startDev(t, "--metrics-listen", "off")
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	const ttl = 500 * time.Millisecond
	ms := ttl.Milliseconds()

	// held reports RLOCKINFO's held field and ttl_ms.
	info := func(resource string) (int64, int64) {
		t.Helper()
		arr, ok := do(t, c, "RLOCKINFO", resource).([]any)
		if !ok || len(arr) < 4 {
			t.Fatalf("RLOCKINFO %s = %#v", resource, arr)
		}
		return arr[1].(int64), arr[3].(int64)
	}
	// stillThere runs check, which says whether a grant sent at sent is
	// still live, and fails the test if it says no while its reply came
	// back within the ttl of sent: then the grant cannot have expired yet.
	stillThere := func(sent time.Time, what string, check func() error) {
		t.Helper()
		err := check()
		switch {
		case time.Since(sent) >= ttl:
			t.Logf("%s: the check came back after the ttl (a slow machine): it proves nothing about early expiry (%v)", what, err)
		case err != nil:
			t.Fatalf("%s, before its ttl passed: %v", what, err)
		}
	}

	sent := time.Now()
	if _, ok := rlock(t, c, "dev:lock", ms); !ok {
		t.Fatal("RLOCK not granted")
	}
	semSent := time.Now()
	if v := do(t, c, "RSEMACQUIRE", "dev:sem", 1, ms); v == nil {
		t.Fatal("RSEMACQUIRE not granted")
	}
	latchSent := time.Now()
	if v := do(t, c, "RLATCH", "dev:latch", 2, ms); v != int64(1) {
		t.Fatalf("RLATCH = %v", v)
	}
	// A read lock: its readers are scored by the masters' TIME in the
	// scripts, which must agree with the keys' expiry.
	readSent := time.Now()
	if v := do(t, c, "RRLOCK", "dev:rw", ms); v == nil {
		t.Fatal("RRLOCK not granted")
	}

	time.Sleep(ttl / 2)
	stillThere(sent, "lock", func() error {
		if _, ok := rlock(t, c, "dev:lock", ms); ok {
			return errors.New("RLOCK granted again")
		}
		held, left := info("dev:lock")
		if held != 1 || left <= 0 || left > ms {
			return fmt.Errorf("RLOCKINFO: held %d ttl_ms %d, want 1 and in (0, %d]", held, left, ms)
		}
		// The masters' clock moves: halfway through, less than the whole
		// ttl is left (the bug was a ttl_ms that stayed at 500).
		if left >= ms-int64(ttl/4/time.Millisecond) {
			return fmt.Errorf("RLOCKINFO halfway says ttl_ms %d of %d: the masters' clock does not move", left, ms)
		}
		return nil
	})
	stillThere(semSent, "permit", func() error {
		if v := do(t, c, "RSEMCOUNT", "dev:sem"); v != int64(1) {
			return fmt.Errorf("RSEMCOUNT = %v, want 1", v)
		}
		return nil
	})
	stillThere(readSent, "read lock", func() error {
		if _, ok := rlock(t, c, "dev:rw", ms); ok {
			return errors.New("RLOCK granted beside a reader")
		}
		return nil
	})
	stillThere(latchSent, "latch", func() error {
		if v := do(t, c, "RLATCHCOUNT", "dev:latch"); v != int64(2) {
			return fmt.Errorf("RLATCHCOUNT = %v, want 2", v)
		}
		return nil
	})

	// Past the ttl (and the proxy's second of fence lag has no say in it).
	time.Sleep(time.Until(readSent.Add(ttl + 100*time.Millisecond)))
	if held, left := info("dev:lock"); held != 0 || left != -1 {
		t.Fatalf("RLOCKINFO after the ttl: held %d ttl_ms %d, want 0 and -1", held, left)
	}
	if _, ok := rlock(t, c, "dev:lock", ms); !ok {
		t.Fatal("RLOCK not granted after the first grant expired")
	}
	if v := do(t, c, "RSEMCOUNT", "dev:sem"); v != int64(0) {
		t.Fatalf("RSEMCOUNT after the ttl = %v, want 0", v)
	}
	if v := do(t, c, "RSEMACQUIRE", "dev:sem", 1, ms); v == nil {
		t.Fatal("RSEMACQUIRE not granted after the first permit expired")
	}
	expectErr(t, c, "ERR no such latch", "RLATCHCOUNT", "dev:latch")
	if _, ok := rlock(t, c, "dev:rw", ms); !ok {
		t.Fatal("RLOCK not granted after the reader's lock expired")
	}
}
