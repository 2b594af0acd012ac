package tests

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// listAll pages through RLOCKLIST with count from cursor 0 until it
// ends, and returns each name with how many times it was listed, and its
// last entry.
func listAll(t *testing.T, c *redis.Client, count int, match string) (map[string]int, map[string][]any) {
	t.Helper()
	seen, last := map[string]int{}, map[string][]any{}
	cursor := "0"
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("RLOCKLIST never returned cursor 0")
		}
		args := []any{"RLOCKLIST", cursor, "COUNT", count}
		if match != "" {
			args = append(args, "MATCH", match)
		}
		v, err := c.Do(context.Background(), args...).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("RLOCKLIST %s: %v %v", cursor, v, err)
		}
		for _, e := range v[1].([]any) {
			entry := e.([]any)
			if len(entry) != 6 {
				t.Fatalf("entry %v: want 6 fields", entry)
			}
			seen[entry[0].(string)]++
			last[entry[0].(string)] = entry
		}
		cursor = v[0].(string)
		if cursor == "0" {
			return seen, last
		}
	}
}

// TestLockList: RLOCKLIST through one proxy lists, once each, the 10,000
// locks taken through two, and every kind of primitive with its ttl,
// fence or term, holders and waiters; MATCH and the user's resource
// patterns filter it; with a master restarted empty (in quarantine) and
// another paused it still lists what a quorum holds; what is released is
// no longer listed.
func TestLockList(t *testing.T) {
	busy(t) // 10,000 locks taken in pipelines and listed: it loads the CPU
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	// Each page reads every entry on the masters (32 at once) while
	// 10,000 locks live and the other parallel tests run: in a CI run
	// under -race three masters answered later than the tests' 50 ms,
	// and the page was NOQUORUM. Timeouts are not what this test is
	// about; the paused master below costs this once per read.
	cfg.masterTimeout = 250 * time.Millisecond
	cfg.extra = "auth:\n  users:\n" +
		"    - {name: ops, password: opw, resources: [\"*\"]}\n" +
		"    - {name: app, password: apw, resources: [\"app:*\"]}\n"
	p1, p2 := startProxy(t, cfg), startProxy(t, cfg)
	client := func(p *Proxy, user, pass string) *redis.Client {
		// A pipeline of 5,000 RLOCKs takes over a second; with the other
		// parallel tests running it can take more than go-redis's default
		// 3 s read timeout, which is not what this test is about.
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: pass, MaxRetries: -1, ReadTimeout: 30 * time.Second})
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	ops1, ops2, app := client(p1, "ops", "opw"), client(p2, "ops", "opw"), client(p2, "app", "apw")

	const n = 10000
	t0 := time.Now()
	for half, c := range []*redis.Client{ops1, ops2} {
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, 0, n/2)
		for i := half * n / 2; i < (half+1)*n/2; i++ {
			cmds = append(cmds, pipe.Do(ctx, "RLOCK", fmt.Sprintf("many:%05d", i), 60000))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("taking %d locks: %v", n, err)
		}
		for _, cmd := range cmds {
			if v, err := cmd.Slice(); err != nil || len(v) != 3 {
				t.Fatalf("RLOCK: %v %v", v, err)
			}
		}
	}
	t.Logf("%d locks taken in %v", n, time.Since(t0))
	// The first master restarted empty: in quarantine while the 10,000
	// live, the listing passes over it and meets each lock on the others.
	cl.servers[0].Restart()
	t0 = time.Now()
	seen, _ := listAll(t, ops2, 1000, "many:*")
	t.Logf("%d locks taken, then listed in %v", n, time.Since(t0))
	for i := range n {
		name := fmt.Sprintf("many:%05d", i)
		if seen[name] != 1 {
			t.Errorf("%s listed %d times", name, seen[name])
		}
	}
	if len(seen) != n {
		t.Errorf("listed %d names, want %d", len(seen), n)
	}

	// One of each kind, under app:.
	g, ok := rlock(t, app, "app:lock", 30000)
	if !ok {
		t.Fatal("app:lock")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a waiter for app:lock on the other proxy
		defer wg.Done()
		w := redis.NewClient(&redis.Options{Addr: p1.Addr, Username: "app", Password: "apw", MaxRetries: -1, ReadTimeout: 30 * time.Second})
		defer w.Close()
		if _, err := w.Do(ctx, "RLOCK", "app:lock", 1000, "WAIT", 20000).Result(); err != nil && err != redis.Nil {
			t.Errorf("the waiter: %v", err)
		}
	}()
	for range 2 {
		if _, ok, err := rrlock(app, "app:doc", 30000); !ok || err != nil {
			t.Fatalf("a reader: %v %v", ok, err)
		}
	}
	for range 2 {
		if v, err := app.Do(ctx, "RSEMACQUIRE", "app:sem", 3, 30000).Slice(); err != nil || len(v) < 2 {
			t.Fatalf("a permit: %v %v", v, err)
		}
	}
	do(t, app, "RLATCH", "app:latch", 3, 30000)
	do(t, app, "RLATCHDOWN", "app:latch", "one")
	e, err := app.Do(ctx, "RELECT", "CAMPAIGN", "app:leader", 30000, "me").Slice()
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	rlock(t, ops1, "other:lock", 30000) // not app's to see

	want := map[string][]any{
		"app:lock":   {"lock", int64(0), int64(1), int64(1)}, // a plain lock's fence is not kept
		"app:doc":    {"read", int64(0), int64(2), int64(0)},
		"app:sem":    {"semaphore", int64(0), int64(2), int64(0)},
		"app:latch":  {"latch", int64(0), int64(2), int64(0)},
		"app:leader": {"election", e[2].(int64), int64(1), int64(0)},
	}
	check := func(c *redis.Client, match string) {
		t.Helper()
		var seen map[string]int
		var last map[string][]any
		start := time.Now()
		waitFor(t, 5*time.Second, "the waiter to be counted", func() bool {
			seen, last = listAll(t, c, 500, match)
			ok := len(last["app:lock"]) == 6 && last["app:lock"][5] == int64(1)
			if !ok && time.Since(start) > 4*time.Second {
				t.Logf("listed %v", last)
			}
			return ok
		})
		if len(seen) != len(want) {
			t.Errorf("listed %v, want %d names", seen, len(want))
		}
		for name, w := range want {
			entry := last[name]
			if seen[name] != 1 || entry[1] != w[0] || entry[3] != w[1] || entry[4] != w[2] || entry[5] != w[3] {
				t.Errorf("%s listed %d times as %v, want kind, fence, holders, waiters %v", name, seen[name], entry, w)
				continue
			}
			ttl := entry[2].(int64)
			switch w[0] {
			case "semaphore", "latch":
				if ttl != -1 {
					t.Errorf("%s ttl_ms %d, want -1", name, ttl)
				}
			default:
				if ttl <= 0 || ttl > 30000 {
					t.Errorf("%s ttl_ms %d, want in (0, 30000]", name, ttl)
				}
			}
		}
	}
	check(app, "")       // the user's patterns alone
	check(ops1, "app:*") // MATCH alone
	check(app, "*")      // both
	// The second master paused as well (the first is in quarantine): the
	// listing passes over both.
	cl.servers[1].Pause()
	check(ops2, "app:*")
	cl.servers[1].Resume()
	do(t, app, "RUNLOCK", "app:lock", g.token)
	wg.Wait()
	waitFor(t, 5*time.Second, "the released lock to leave the listing", func() bool {
		seen, _ := listAll(t, app, 100, "app:lock")
		return len(seen) == 0
	})
	v, err := app.Do(ctx, "RLOCKLIST", strconv.Itoa(7)).Result() // master 7 of 5
	if err == nil || err.Error() != "ERR invalid cursor" {
		t.Errorf("a cursor RLOCKLIST never gave: %v %v", v, err)
	}
}
