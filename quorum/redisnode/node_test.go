package redisnode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

func keys(rs ...string) quorum.Keys {
	var k quorum.Keys
	for _, r := range rs {
		k.Locks = append(k.Locks, r)
		k.Fences = append(k.Fences, "meta:fence:"+r)
		k.Channels = append(k.Channels, "meta:released:"+r)
	}
	k.Floor, k.HighWater = "meta:fence-floor", "meta:fence-hwm"
	return k
}

func setup(t *testing.T, notify func(string)) (*Node, *redis.Client, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	n, err := New(Options{Addr: srv.Addr, Notify: notify})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rc.Close() })
	return n, rc, srv
}

func TestScripts(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	k := keys("a", "b")

	// Acquire takes the next fence of each resource with the lock.
	r, err := n.Acquire(ctx, k, "t1", time.Minute)
	if err != nil || !r.OK || len(r.Fences) != 2 || r.Fences[0] != 1 || r.Fences[1] != 1 {
		t.Fatalf("acquire = %+v, %v", r, err)
	}
	if rc.Get(ctx, "meta:fence:a").Val() != "1" || rc.Get(ctx, "meta:fence-hwm").Val() != "1" {
		t.Fatal("acquire did not store the fence and the high-water mark")
	}
	if v := rc.Get(ctx, "a").Val(); v != "t1" {
		t.Fatalf("lock key holds %q, want the token", v)
	}
	if ttl := rc.PTTL(ctx, "b").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("pttl %v", ttl)
	}
	// Same token again: allowed, resets the ttl, next fence.
	if r, err := n.Acquire(ctx, k, "t1", time.Hour); err != nil || !r.OK || r.Fences[0] != 2 {
		t.Fatalf("re-acquire with same token = %+v, %v", r, err)
	}
	// Another token, overlapping set: refused, nothing changed.
	if r, err := n.Acquire(ctx, keys("c", "b"), "t2", time.Minute); err != nil || r.OK {
		t.Fatalf("overlapping acquire = %+v, %v", r, err)
	}
	if rc.Exists(ctx, "c").Val() != 0 {
		t.Fatal("refused acquire set c")
	}
	// Fences: raised only while held, never lowered.
	if ok, err := n.SetFences(ctx, k, "t1", []uint64{7, 3}); !ok || err != nil {
		t.Fatalf("set fences = %v, %v", ok, err)
	}
	if ok, _ := n.SetFences(ctx, k, "t1", []uint64{5, 4}); !ok {
		t.Fatal("set fences refused")
	}
	if a, b := rc.Get(ctx, "meta:fence:a").Val(), rc.Get(ctx, "meta:fence:b").Val(); a != "7" || b != "4" {
		t.Fatalf("fences %s %s, want 7 4", a, b)
	}
	if ok, _ := n.SetFences(ctx, k, "other", []uint64{100, 100}); ok {
		t.Fatal("set fences with a wrong token succeeded")
	}
	// Extend.
	if c, err := n.Extend(ctx, k, "t1", 2*time.Hour); c != 2 || err != nil {
		t.Fatalf("extend = %d, %v", c, err)
	}
	if c, _ := n.Extend(ctx, k, "other", time.Hour); c != 0 {
		t.Fatalf("extend with wrong token = %d", c)
	}
	// Release: token-checked.
	if c, _ := n.Release(ctx, k, "other"); c != 0 {
		t.Fatalf("release with wrong token = %d", c)
	}
	if c, err := n.Release(ctx, k, "t1"); c != 2 || err != nil {
		t.Fatalf("release = %d, %v", c, err)
	}
	if rc.Exists(ctx, "a", "b").Val() != 0 {
		t.Fatal("keys left after release")
	}
	r, _ = n.Acquire(ctx, k, "t3", time.Minute)
	if !r.OK || r.Fences[0] != 8 || r.Fences[1] != 5 {
		t.Fatalf("acquire after release = %+v, want fences 8 5", r)
	}
}

// TestNoScript: after SCRIPT FLUSH (or a master restart) the scripts are
// sent again with EVAL.
func TestNoScript(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	if _, err := n.Acquire(ctx, keys("x"), "t", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := n.Release(ctx, keys("x"), "t"); c != 1 || err != nil {
		t.Fatalf("release after SCRIPT FLUSH = %d, %v", c, err)
	}
}

func TestWrongTypeIsAnError(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	rc.HSet(ctx, "h", "f", "v")
	if _, err := n.Acquire(ctx, keys("h"), "t", time.Minute); err == nil {
		t.Fatal("acquire over a hash did not fail")
	}
}

func TestNotifyAndResubscribe(t *testing.T) {
	got := make(chan string, 16)
	n, rc, srv := setup(t, func(ch string) { got <- ch })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := "meta:released:a"
	n.Subscribe(ch)
	if err := n.Subscribed(ctx, ch); err != nil {
		t.Fatal(err)
	}
	n.Acquire(ctx, keys("a"), "t", time.Minute)
	n.Release(ctx, keys("a"), "t")
	if c := <-got; c != ch {
		t.Fatalf("notified on %q", c)
	}
	// The master restarts: the node reconnects and subscribes again.
	srv.Restart()
	for {
		if _, err := n.Acquire(ctx, keys("a"), "t", time.Minute); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("node did not reconnect")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := n.Subscribed(ctx, ch); err != nil {
		t.Fatal(err)
	}
	for rc.PubSubNumSub(ctx, ch).Val()[ch] != 1 {
		if ctx.Err() != nil {
			t.Fatal("not subscribed again after restart")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c, err := n.Release(ctx, keys("a"), "t"); c != 1 || err != nil {
		t.Fatalf("release after restart = %d, %v", c, err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("no notification after restart")
	}
	n.Unsubscribe(ch)
	for rc.PubSubNumSub(ctx, ch).Val()[ch] != 0 {
		if ctx.Err() != nil {
			t.Fatal("still subscribed after Unsubscribe")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUnreachableAtStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Kill()
	n, err := New(Options{Addr: srv.Addr, RedialInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Acquire(ctx, keys("a"), "t", time.Minute); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("want ErrNotConnected, got %v", err)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := n.Acquire(ctx, keys("a"), "t", time.Minute)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never connected: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFloorAndHighWater(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	k := keys("a")
	n.Acquire(ctx, k, "t", time.Minute)
	n.SetFences(ctx, k, "t", []uint64{5})
	if v, err := n.HighWater(ctx, k); v != 5 || err != nil {
		t.Fatalf("high water = %d, %v", v, err)
	}
	if err := n.RaiseFloor(ctx, k, 42); err != nil {
		t.Fatal(err)
	}
	if v, _ := n.HighWater(ctx, k); v != 42 {
		t.Fatalf("high water after raising the floor = %d", v)
	}
	// Every counter counts on from at least the floor.
	r, err := n.Acquire(ctx, k, "t", time.Minute)
	if err != nil || !r.OK || r.Fences[0] != 43 {
		t.Fatalf("acquire over a floor = %+v, %v", r, err)
	}
	if rc.Get(ctx, "meta:fence:a").Val() != "43" {
		t.Fatal("the acquire did not store the fence above the floor")
	}
}

// TestIdentity: the run_id is read on every new connection, before rueidis
// uses it; a restart gives a new run_id on a new connection.
func TestIdentity(t *testing.T) {
	redistest.RequireReal(t, "embedded masters report no run_id")
	n, rc, srv := setup(t, nil)
	ctx := context.Background()
	id := n.Identity()
	want := rc.Info(ctx, "server").Val()
	if id.RunID == "" || id.Conn == 0 || !strings.Contains(want, "run_id:"+id.RunID) {
		t.Fatalf("identity %+v does not match INFO server", id)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for n.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no reconnect")
		}
		time.Sleep(10 * time.Millisecond)
	}
	id2 := n.Identity()
	if id2.RunID == id.RunID || id2.Conn <= id.Conn {
		t.Fatalf("identity after a restart %+v, before %+v", id2, id)
	}
}

func TestIdentityWithPassword(t *testing.T) {
	redistest.RequireReal(t, "requirepass")
	srv := redistest.Start(t, "--requirepass", "s3cret")
	if _, err := New(Options{Addr: srv.Addr}); err != nil {
		t.Fatal(err)
	}
	bad, _ := New(Options{Addr: srv.Addr, Password: "wrong", RedialInterval: time.Hour})
	defer bad.Close()
	if err := bad.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password: %v", err)
	}
	n, err := New(Options{Addr: srv.Addr, Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Ping(context.Background()); err != nil || n.Identity().RunID == "" {
		t.Fatalf("with the password: %v, %+v", err, n.Identity())
	}
}
