package proxy

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// recorder is an Observer that keeps each command's name, result and
// error code.
type recorder struct {
	mu   sync.Mutex
	seen []string // "name result code"
}

func (r *recorder) Command(name string, _ time.Duration, result, code string) {
	r.mu.Lock()
	r.seen = append(r.seen, name+" "+result+" "+code)
	r.mu.Unlock()
}
func (r *recorder) Connections(int) {}
func (r *recorder) Rejected()       {}
func (r *recorder) Dropped(string)  {}
func (r *recorder) AuthFailed()     {}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// grantCommands are commands whose replies read as outcomes: GRANT x
// (ResultNull: nil when x is "no"), RELEASE n (ResultZero: the integer
// n), LATEGRANT x (ResultNull, concurrent, a Late reply: nil when x is
// "no") and WAITON resource (may block; returns once the test closes
// release, after telling waiting it runs).
func grantCommands(waiting chan<- struct{}, release <-chan struct{}) []*Command {
	return []*Command{
		{Name: "grant", Arity: 2, Result: ResultNull, Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
			if string(args[0]) == "no" {
				return nil, nil
			}
			return []any{"token", int64(100)}, nil
		}},
		{Name: "release", Arity: 2, Result: ResultZero, Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
			n, _ := ParseInt(args[0])
			return n, nil
		}},
		{Name: "lategrant", Arity: 2, Result: ResultNull, FirstKey: 1, LastKey: 1, Step: 1, Concurrent: func([][]byte) bool { return true },
			Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
				no := string(args[0]) == "no"
				return Late(func() any {
					if no {
						return nil
					}
					return int64(7)
				}), nil
			}},
		{Name: "waiton", Arity: -2, Flags: FlagMayBlock, FirstKey: 1, LastKey: -1, Step: 1, Handler: func(ctx context.Context, _ *Session, _ [][]byte) (any, error) {
			waiting <- struct{}{}
			select {
			case <-release:
				return OK, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}},
	}
}

// TestCommandResults: the observer gets each command's result as its
// table entry reads the reply (granted / not_granted for acquires on a
// value or null, for releases on 1 or 0; ok for the others; error for any
// error reply, with its code), Late replies of pipelined commands
// included.
func TestCommandResults(t *testing.T) {
	rec := &recorder{}
	ts := newTestServer(t, Options{Observer: rec, Commands: grantCommands(nil, nil)})
	c := ts.client(t, redis.Options{PoolSize: 1})
	ctx := context.Background()
	c.Ping(ctx)
	rec.take() // the connection's handshake
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"GRANT", "yes"}, "grant granted "},
		{[]any{"GRANT", "no"}, "grant not_granted "},
		{[]any{"GRANT"}, "grant error ERR"},
		{[]any{"RELEASE", "1"}, "release granted "},
		{[]any{"RELEASE", "0"}, "release not_granted "},
		{[]any{"PING"}, "ping ok "},
		{[]any{"NOTHING"}, "nothing ok "},
		{[]any{"FAIL"}, "fail error ERR"},
		{[]any{"NOSUCH"}, "unknown error ERR"},
	} {
		t.Run(fmt.Sprint(tc.args...), func(t *testing.T) {
			c.Do(ctx, tc.args...)
			if got := rec.take(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("observed %q, want %q", got, tc.want)
			}
		})
	}
	// Pipelined: run beside each other, their Late replies read when
	// written.
	p := c.Pipeline()
	p.Do(ctx, "LATEGRANT", "a")
	p.Do(ctx, "LATEGRANT", "no")
	p.Do(ctx, "LATEGRANT", "b")
	if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rec.take() {
		if strings.HasPrefix(r, "lategrant ") { // not the handshake of a new connection
			got = append(got, r)
		}
	}
	want := []string{"lategrant granted ", "lategrant not_granted ", "lategrant granted "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("pipelined: observed %q, want %q", got, want)
	}
}

// TestInfoCommandstats: INFO commandstats has Redis's layout, counts
// calls, failed calls (ran, answered an error) and rejected calls
// (refused before running) per command, and is left out of a bare INFO;
// INFO errorstats counts error replies by code.
func TestInfoCommandstats(t *testing.T) {
	ts := newTestServer(t, Options{Commands: grantCommands(nil, nil)})
	c := ts.client(t, redis.Options{PoolSize: 1})
	ctx := context.Background()
	errCount := func() int {
		errs, err := c.Info(ctx, "errorstats").Result()
		if err != nil || !strings.HasPrefix(errs, "# Errorstats\r\n") {
			t.Fatalf("INFO errorstats: %q %v", errs, err)
		}
		m := regexp.MustCompile(`errorstat_ERR:count=(\d+)\r\n`).FindStringSubmatch(errs)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := errCount() // the client's handshake may have met an error
	for _, args := range [][]any{{"GRANT", "yes"}, {"GRANT", "no"}, {"GRANT"}, {"FAIL"}, {"FAIL"}, {"NOSUCH"}} {
		c.Do(ctx, args...)
	}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stats, "# Commandstats\r\n") {
		t.Fatalf("INFO commandstats:\n%s", stats)
	}
	line := regexp.MustCompile(`^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d),rejected_calls=(\d+),failed_calls=(\d+)$`)
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stats), "\r\n")[1:] {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a cmdstat line: %q", l)
		}
		got[m[1]] = "calls=" + m[2] + " rejected=" + m[5] + " failed=" + m[6]
	}
	for name, want := range map[string]string{
		"grant": "calls=2 rejected=1 failed=0",
		"fail":  "calls=2 rejected=0 failed=2",
	} {
		if got[name] != want {
			t.Errorf("cmdstat_%s: %q, want %q", name, got[name], want)
		}
	}
	if _, ok := got["nothing"]; ok {
		t.Error("a command never called has a cmdstat line")
	}
	if n := errCount() - before; n != 4 {
		t.Errorf("INFO errorstats counted %d ERR replies, want 4", n)
	}
	bare, _ := c.Info(ctx).Result()
	all, _ := c.Info(ctx, "all").Result()
	if strings.Contains(bare, "# Commandstats") || !strings.Contains(bare, "# Errorstats") || !strings.Contains(all, "# Commandstats") {
		t.Errorf("commandstats in a bare INFO, or not in INFO all:\n%s\n---\n%s", bare, all)
	}
}

// TestClientListResource: CLIENT LIST shows the resources a blocked
// client waits on (escaped so the line still splits on spaces and '='),
// nothing for a client that does not wait, and INFO locks counts the
// waiting clients and resources.
func TestClientListResource(t *testing.T) {
	waiting, release := make(chan struct{}, 2), make(chan struct{})
	ts := newTestServer(t, Options{Commands: grantCommands(waiting, release)})
	c := ts.client(t, redis.Options{})
	ctx := context.Background()
	blocked := ts.client(t, redis.Options{})
	blocked2 := ts.client(t, redis.Options{})
	done := make(chan error, 2)
	go func() { done <- blocked.Do(ctx, "WAITON", "orders:1 a=b", "x,y").Err() }()
	go func() { done <- blocked2.Do(ctx, "WAITON", "orders:1 a=b").Err() }()
	<-waiting
	<-waiting
	list := c.Do(ctx, "CLIENT", "LIST").String()
	var lines []string
	for _, l := range strings.Split(list, "\n") {
		if strings.Contains(l, "cmd=waiton") {
			lines = append(lines, l)
		}
	}
	want := map[string]bool{"resource=orders:1%20a%3Db,x%2Cy": false, "resource=orders:1%20a%3Db": false}
	for _, l := range lines {
		fields := strings.Fields(l)
		last := fields[len(fields)-1]
		if _, ok := want[last]; !ok || !strings.Contains(l, "flags=b") {
			t.Errorf("CLIENT LIST line of a blocked client: %q", l)
		}
		want[last] = true
	}
	for f, seen := range want {
		if !seen {
			t.Errorf("no blocked client with %s in:\n%s", f, list)
		}
	}
	own := c.Do(ctx, "CLIENT", "INFO").String()
	if !strings.HasSuffix(strings.TrimSpace(own), " resource=") {
		t.Errorf("CLIENT INFO of a client that does not wait: %q", own)
	}
	locks, _ := c.Info(ctx, "locks").Result()
	if !strings.Contains(locks, "waiting_clients:2\r\n") || !strings.Contains(locks, "waiting_resources:2\r\n") {
		t.Errorf("INFO locks:\n%s", locks)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	locks, _ = c.Info(ctx, "locks").Result()
	if !strings.Contains(locks, "waiting_clients:0\r\n") || !strings.Contains(locks, "waiting_resources:0\r\n") {
		t.Errorf("INFO locks once no one waits:\n%s", locks)
	}
}

func TestClientListResources(t *testing.T) {
	long := strings.Repeat("r", 200)
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a b", "c"}, "a%20b,c"},
		{[]string{"x=1,%\n\xff"}, "x%3D1%2C%25%0A%FF"},
		{[]string{long}, strings.Repeat("r", maxListedResource) + "..."},
	} {
		if got := clientListResources(tc.in); got != tc.want {
			t.Errorf("clientListResources(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
