package tests

import (
	"context"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := ln.(*net.TCPListener).File()
	addr := ln.Addr().String()
	log := &syncBuffer{}
	cmd := exec.Command(proxyBin, "--dev", "--listen-fd", "3", "--metrics-listen", "127.0.0.1:0")
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
	if !strings.Contains(log.String(), "DEV MODE") || !strings.Contains(log.String(), "NOT FOR PRODUCTION") {
		t.Errorf("dev mode is not announced as such:\n%s", log.String())
	}
	g, ok := rlock(t, c, "orders:42", 30000)
	if !ok {
		t.Fatal("RLOCK not granted in dev mode")
	}
	if v := do(t, c, "RUNLOCK", "orders:42", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
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
		`redlock_proxy_commands_total{command="rlock",result="ok"} 1`,
		`redlock_proxy_operations_total{op="lock",outcome="ok"} 1`,
		`redlock_proxy_master_up{master=`,
		`# HELP redlock_proxy_client_connections`,
		`go_build_info{checksum=`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
