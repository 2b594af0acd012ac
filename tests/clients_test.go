package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// lockCycle is the scenario every client runs: grant, held, extend,
// release, release again, bad input.
func lockCycle(t *testing.T, do func(args ...string) (any, error), res string) {
	t.Helper()
	v, err := do("RLOCK", res, "10000")
	if err != nil {
		t.Fatalf("RLOCK: %v", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("RLOCK reply %#v", v)
	}
	token := fmt.Sprint(arr[0])
	if v, err := do("RLOCK", res, "10000"); v != nil || err != nil {
		t.Fatalf("held lock: %#v, %v", v, err)
	}
	if v, err := do("REXTEND", res, token, "20000"); err != nil || fmt.Sprint(v) == "0" {
		t.Fatalf("REXTEND: %#v, %v", v, err)
	}
	if v, err := do("RUNLOCK", res, token); err != nil || fmt.Sprint(v) != "1" {
		t.Fatalf("RUNLOCK: %#v, %v", v, err)
	}
	if v, err := do("RUNLOCK", res, token); err != nil || fmt.Sprint(v) != "0" {
		t.Fatalf("second RUNLOCK: %#v, %v", v, err)
	}
	if _, err := do("RLOCK", res, "soon"); err == nil || !strings.Contains(err.Error(), "value is not an integer or out of range") {
		t.Fatalf("bad ttl: %v", err)
	}
}

func TestGoRedis(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	variants := []struct {
		name string
		opts redis.Options
	}{
		{"resp3 default", redis.Options{}},
		{"resp2", redis.Options{Protocol: 2}},
		{"client name", redis.Options{ClientName: "go-worker"}},
		{"resp2 client name", redis.Options{Protocol: 2, ClientName: "go-worker"}},
		{"username password db0", redis.Options{Username: "default", Password: "any", DB: 0}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			opts := v.opts
			opts.Addr = p.Addr
			c := redis.NewClient(&opts)
			defer c.Close()
			ctx := context.Background()
			lockCycle(t, func(args ...string) (any, error) {
				a := make([]any, len(args))
				for i, s := range args {
					a[i] = s
				}
				v, err := c.Do(ctx, a...).Result()
				if errors.Is(err, redis.Nil) {
					return nil, nil
				}
				return v, err
			}, "go:"+v.name)
			if opts.ClientName != "" {
				if n := c.ClientGetName(ctx).Val(); n != opts.ClientName {
					t.Fatalf("CLIENT GETNAME = %q", n)
				}
			}
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRueidis(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	variants := []struct {
		name string
		opts rueidis.ClientOption
	}{
		// rueidis's defaults: HELLO 3 and CLIENT TRACKING ON OPTIN.
		{"default", rueidis.ClientOption{}},
		{"client name", rueidis.ClientOption{ClientName: "rueidis-worker"}},
		{"no cache", rueidis.ClientOption{DisableCache: true}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			opts := v.opts
			opts.InitAddress = []string{p.Addr}
			c, err := rueidis.NewClient(opts)
			if err != nil {
				t.Fatalf("connect with %s options: %v", v.name, err)
			}
			defer c.Close()
			ctx := context.Background()
			lockCycle(t, func(args ...string) (any, error) {
				r := c.Do(ctx, c.B().Arbitrary(args...).Build())
				if rueidis.IsRedisNil(r.Error()) {
					return nil, nil
				}
				if r.Error() != nil {
					return nil, r.Error()
				}
				return r.ToAny()
			}, "rueidis:"+v.name)
		})
	}
}

// required reports whether CI said the client tool must be present
// (REDLOCK_REQUIRE_CLIENTS=python,node), so a missing tool fails instead of
// skipping.
func required(tool string) bool {
	for _, s := range strings.Split(os.Getenv("REDLOCK_REQUIRE_CLIENTS"), ",") {
		if strings.TrimSpace(s) == tool {
			return true
		}
	}
	return false
}

func skipOrFail(t *testing.T, tool, reason string) {
	t.Helper()
	if required(tool) {
		t.Fatalf("%s clients required (REDLOCK_REQUIRE_CLIENTS) but %s", tool, reason)
	}
	t.Skipf("SKIPPED: %s; install them to run this test", reason)
}

// runScript runs a client script against a proxy and logs what it printed.
func runScript(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "clients"
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("%s failed: %v", name, err)
	}
}

// requirePython returns the python3 that imports redis-py, or skips (fails
// when CI requires it).
func requirePython(t *testing.T) string {
	t.Helper()
	const python = "/usr/bin/python3" // Debian's python3-redis installs here
	if err := exec.Command(python, "-c", "import redis").Run(); err != nil {
		skipOrFail(t, "python", "redis-py is not importable by "+python+" (apt-get install python3-redis)")
	}
	return python
}

func TestRedisPy(t *testing.T) {
	busy(t)
	python := requirePython(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	_, port, _ := strings.Cut(p.Addr, ":")
	runScript(t, python, "clients.py", port)
}

func TestNodeClients(t *testing.T) {
	busy(t)
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node", "node is not installed")
	}
	if _, err := os.Stat("clients/node_modules/ioredis"); err != nil {
		skipOrFail(t, "node", "the Node.js clients are not installed (make clients)")
	}
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	_, port, _ := strings.Cut(p.Addr, ":")
	runScript(t, "node", "clients.js", port)
}
