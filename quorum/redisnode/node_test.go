package redisnode

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// lockKeys lays out the keys of the lock scripts for resources rs, as the
// engine does with MetaPrefix "meta:".
func lockKeys(extra int, rs ...string) []string {
	var k []string
	k = append(k, rs...)
	for _, r := range rs {
		k = append(k, "meta:fence:"+r)
	}
	if extra >= 1 {
		k = append(k, "meta:fence-lag")
	}
	if extra >= 2 {
		k = append(k, "meta:fence-hwm")
	}
	if extra >= 3 {
		k = append(k, "meta:lease-hwm")
	}
	return k
}

// readerKeys are lockKeys(0, rs...) then each resource's readers, then its holds, then
// tail: lock_release's (tail the lagging bound) and lock_extend's (tail
// the lease mark) keys.
func readerKeys(tail string, rs ...string) []string {
	k := lockKeys(0, rs...)
	for _, r := range rs {
		k = append(k, "meta:rw:"+r)
	}
	for _, r := range rs {
		k = append(k, "meta:holds:"+r)
	}
	return append(k, tail)
}

// acquireArgs are lock_acquire's arguments for a writer that does not wait
// (no writer-waiting mark).
func acquireArgs(token, ttl, proposal string) []string {
	return []string{token, ttl, proposal, lagMS}
}

const lagMS = "1000"

func acquire(t *testing.T, n *Node, token string, ttl time.Duration, proposal uint64, rs ...string) []any {
	t.Helper()
	v, err := n.Eval(context.Background(), "lock_acquire", lockKeys(3, rs...),
		acquireArgs(token, strconv.FormatInt(ttl.Milliseconds(), 10), strconv.FormatUint(proposal, 10)))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return v.([]any)
}

// releaseKeys are lock_release's keys: the lock keys, then each
// resource's waiting set, readers and holds.
func releaseKeys(rs ...string) []string {
	k := append([]string(nil), rs...)
	for _, pre := range []string{"meta:waiting:", "meta:rw:", "meta:holds:"} {
		for _, r := range rs {
			k = append(k, pre+r)
		}
	}
	return k
}

func release(t *testing.T, n *Node, token string, rs ...string) int64 {
	t.Helper()
	v, err := n.Eval(context.Background(), "lock_release", releaseKeys(rs...), []string{token})
	if err != nil {
		t.Fatalf("release: %v", err)
	}
	return v.([]any)[0].(int64) // {released, ms left}
}

func setup(t *testing.T, notify func(string, string)) (*Node, *redis.Client, *redistest.Server) {
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

	// Acquire: every key, one fence for all, the sequence raised to it;
	// nothing kept per resource.
	if r := acquire(t, n, "t1", time.Minute, 1, "a", "b"); !reflect.DeepEqual(r, []any{int64(1), int64(1), int64(1), int64(1)}) {
		t.Fatalf("acquire = %v", r)
	}
	if rc.Get(ctx, "meta:fence-hwm").Val() != "1" || rc.Exists(ctx, "meta:fence:a", "meta:fence-lag").Val() != 0 {
		t.Fatal("acquire did not raise the sequence, or wrote a fence key or a lagging bound")
	}
	if v := rc.Get(ctx, "a").Val(); v != "t1" {
		t.Fatalf("lock key holds %q, want the token", v)
	}
	if ttl := rc.PTTL(ctx, "b").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("pttl %v", ttl)
	}
	// Same token again while every key holds it (a TOKEN retry): granted
	// again with the new ttl and a new fence, the proposal when it is above
	// the sequence (docs/design/fencing.md).
	if r := acquire(t, n, "t1", time.Hour, 7, "a", "b"); !reflect.DeepEqual(r, []any{int64(1), int64(7), int64(7), int64(7)}) {
		t.Fatalf("re-acquire with same token = %v, want fence 7", r)
	}
	if ttl := rc.PTTL(ctx, "b").Val(); ttl <= time.Minute {
		t.Fatalf("re-acquire kept pttl %v, want the new ttl", ttl)
	}
	// Same token on a set that is only partly its own: the sequence's next.
	if r := acquire(t, n, "t1", time.Hour, 7, "a", "b", "c"); !reflect.DeepEqual(r, []any{int64(1), int64(8), int64(8), int64(8), int64(8)}) {
		t.Fatalf("acquire of a partly held set = %v, want fence 8", r)
	}
	release(t, n, "t1", "c")
	// Another token, overlapping set: refused with the sequence, nothing
	// changed.
	if r := acquire(t, n, "t2", time.Minute, 1, "c", "b"); !reflect.DeepEqual(r, []any{int64(0), int64(8)}) {
		t.Fatalf("overlapping acquire = %v", r)
	}
	if rc.Exists(ctx, "c").Val() != 0 || rc.Get(ctx, "meta:fence-hwm").Val() != "8" {
		t.Fatal("refused acquire wrote c or moved the sequence")
	}
	// Fence write-back: only while every key holds the token, the
	// sequence raised to the highest fence, never lowered.
	fence := func(token string, fs ...string) int64 {
		v, err := n.Eval(ctx, "lock_fence", []string{"a", "b", "meta:fence-hwm"}, append([]string{token}, fs...))
		if err != nil {
			t.Fatal(err)
		}
		return v.(int64)
	}
	if fence("t1", "9", "3") != 1 || rc.Get(ctx, "meta:fence-hwm").Val() != "9" {
		t.Fatal("fence write-back refused, or the sequence not raised to 9")
	}
	if fence("t1", "5", "5") != 1 || rc.Get(ctx, "meta:fence-hwm").Val() != "9" {
		t.Fatal("fence write-back lowered the sequence")
	}
	if fence("other", "100", "100") != 0 || rc.Get(ctx, "meta:fence-hwm").Val() != "9" {
		t.Fatal("fence write-back with a wrong token")
	}
	// Extend: the lock keys.
	extend := func(token string, ttl string) int64 {
		v, err := n.Eval(ctx, "lock_extend", readerKeys("meta:lease-hwm", "a", "b"), []string{token, ttl, lagMS})
		if err != nil {
			t.Fatal(err)
		}
		return v.(int64)
	}
	if c := extend("t1", "7200000"); c != 2 {
		t.Fatalf("extend = %d", c)
	}
	if ttl := rc.PTTL(ctx, "b").Val(); ttl <= 2*time.Hour-time.Second {
		t.Fatalf("lock key pttl %v after extend", ttl)
	}
	if c := extend("other", "3600000"); c != 0 {
		t.Fatalf("extend with wrong token = %d", c)
	}
	// Release: token-checked; leaves no key of the resource behind.
	if c := release(t, n, "other", "a", "b"); c != 0 {
		t.Fatalf("release with wrong token = %d", c)
	}
	if c := release(t, n, "t1", "a", "b"); c != 2 {
		t.Fatalf("release = %d", c)
	}
	if rc.Exists(ctx, "a", "b", "meta:fence:a", "meta:fence:b", "meta:fence-lag").Val() != 0 {
		t.Fatal("keys left after release")
	}
	// The next grant still gets a greater fence, from the sequence.
	if r := acquire(t, n, "t3", time.Minute, 1, "a"); !reflect.DeepEqual(r, []any{int64(1), int64(10), int64(10)}) {
		t.Fatalf("acquire after release = %v, want fence 10", r)
	}
	release(t, n, "t3", "a")
}

// TestNoScript: after SCRIPT FLUSH (or a master restart) a script already
// used on the connection (sent with EVALSHA) gets NOSCRIPT and is sent
// again in full; one never used is sent in full at once.
func TestNoScript(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	acquire(t, n, "t", time.Minute, 1, "x")
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r := acquire(t, n, "t", time.Minute, 1, "y"); r[0] != int64(1) {
		t.Fatalf("acquire after SCRIPT FLUSH = %v", r)
	}
	if c := release(t, n, "t", "x"); c != 1 {
		t.Fatalf("release after SCRIPT FLUSH = %d", c)
	}
	if n := rc.Exists(ctx, "y").Val(); n != 1 {
		t.Fatal("the acquire sent again after NOSCRIPT did not take the key")
	}
}

func TestWrongTypeIsAnError(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	rc.HSet(ctx, "h", "f", "v")
	if _, err := n.Eval(ctx, "lock_acquire", lockKeys(3, "h"), acquireArgs("t", "1000", "1")); err == nil {
		t.Fatal("acquire over a hash did not fail")
	}
	if _, err := n.Eval(ctx, "no_such_script", nil, nil); err == nil {
		t.Fatal("an unknown script did not fail")
	}
}

func TestNotifyAndResubscribe(t *testing.T) {
	got := make(chan string, 16)
	n, rc, srv := setup(t, func(ch, _ string) { got <- ch })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := "meta:released:a"
	n.Subscribe(ch)
	if err := n.Subscribed(ctx, ch); err != nil {
		t.Fatal(err)
	}
	acquire(t, n, "t", time.Minute, 1, "a")
	releaseAnnounced := func() (any, error) {
		// A waiter registered (wait_mark): a release announces itself
		// only where one may wait.
		if _, err := n.Eval(ctx, "wait_mark", []string{"meta:waiting:a"}, []string{"w", "60000"}); err != nil {
			return nil, err
		}
		return n.Eval(ctx, "lock_release", releaseKeys("a"), []string{"t", ch})
	}
	releaseAnnounced()
	select {
	case c := <-got:
		if c != ch {
			t.Fatalf("notified on %q", c)
		}
	case <-ctx.Done():
		t.Fatal("the release was not announced")
	}
	// The master restarts: the node reconnects and subscribes again.
	srv.Restart()
	for {
		if _, err := n.Eval(ctx, "lock_acquire", lockKeys(3, "a"), acquireArgs("t", "60000", "1")); err == nil {
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
	if c, err := releaseAnnounced(); err != nil || c.([]any)[0] != int64(1) {
		t.Fatalf("release after restart = %v, %v", c, err)
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
	eval := func() error {
		_, err := n.Eval(ctx, "lock_acquire", lockKeys(3, "a"), acquireArgs("t", "60000", "1"))
		return err
	}
	if err := eval(); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("want ErrNotConnected, got %v", err)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := eval()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never connected: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPlainAcquire runs lock_acquire's plain form (one resource) on a
// real master: a free key is granted with the next sequence and no script
// call, the lease mark is created and pushed out, never pulled in; a
// taken key is refused (the sequence still grows); a key the token holds
// is granted by the script, with the longer ttl kept.
func TestPlainAcquire(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	if err := rc.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pttl := func(k string) time.Duration {
		t.Helper()
		d, err := rc.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if v := acquire(t, n, "t1", 8*time.Second, 100, "a"); !reflect.DeepEqual(v, []any{int64(1), int64(1), int64(1)}) {
		t.Fatalf("free key: %v", v)
	}
	if d := pttl("meta:lease-hwm"); d < 8*time.Second || d > 9*time.Second {
		t.Fatalf("lease mark lives %v after an 8s grant", d)
	}
	stats, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stats, "cmdstat_eval") {
		t.Fatalf("the plain acquire ran a script:\n%s", stats)
	}
	// A shorter grant leaves the mark as it is; a longer one pushes it out.
	acquire(t, n, "t2", time.Second, 0, "b")
	if d := pttl("meta:lease-hwm"); d < 8*time.Second {
		t.Fatalf("a 1s grant pulled the lease mark in to %v", d)
	}
	acquire(t, n, "t3", 20*time.Second, 0, "c")
	if d := pttl("meta:lease-hwm"); d < 20*time.Second {
		t.Fatalf("lease mark lives %v after a 20s grant", d)
	}
	if v := acquire(t, n, "other", time.Second, 0, "a"); !reflect.DeepEqual(v, []any{int64(0), int64(4)}) {
		t.Fatalf("taken key: %v", v)
	}
	if v := acquire(t, n, "t1", time.Second, 0, "a"); len(v) != 3 || v[0] != int64(1) || v[1].(int64) <= 4 {
		t.Fatalf("key the token holds: %v", v)
	}
	if d := pttl("a"); d < 7*time.Second {
		t.Fatalf("a TOKEN retry with a shorter ttl cut the key's life to %v", d)
	}
}

func TestFloorAndHighWater(t *testing.T) {
	n, rc, _ := setup(t, nil)
	ctx := context.Background()
	hw := []string{"meta:fence-hwm", "meta:fence-floor"}
	high := func() int64 {
		v, err := n.Eval(ctx, "fence_highwater", hw, nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.(int64)
	}
	acquire(t, n, "t", time.Minute, 5, "a")
	acquire(t, n, "t2", time.Minute, 5, "x", "y") // two resources: Lua, the proposal applied
	if v := high(); v != 5 {
		t.Fatalf("high water = %d", v)
	}
	// The floor key of the layout before 1.1 counts.
	rc.Set(ctx, "meta:fence-floor", "6", 0)
	if v := high(); v != 6 {
		t.Fatalf("high water with an old floor = %d", v)
	}
	if _, err := n.Eval(ctx, "fence_floor", []string{"meta:fence-hwm", "meta:fence-lag"}, []string{"42"}); err != nil {
		t.Fatal(err)
	}
	if v := high(); v != 42 {
		t.Fatalf("high water after raising the floor = %d", v)
	}
	if rc.Exists(ctx, "meta:fence-lag").Val() != 0 {
		t.Fatal("raising the floor wrote a lagging bound")
	}
	// An older proxy's lagging bound is raised with the floor.
	rc.Set(ctx, "meta:fence-lag", "5", time.Minute)
	if _, err := n.Eval(ctx, "fence_floor", []string{"meta:fence-hwm", "meta:fence-lag"}, []string{"42"}); err != nil {
		t.Fatal(err)
	}
	if v := rc.Get(ctx, "meta:fence-lag").Val(); v != "42" {
		t.Fatalf("an older proxy's lagging bound %q after raising the floor, want 42", v)
	}
	rc.Del(ctx, "meta:fence-lag")
	// Every new grant's fence counts on from at least the floor.
	release(t, n, "t", "a")
	if r := acquire(t, n, "t", time.Minute, 1, "a"); !reflect.DeepEqual(r, []any{int64(1), int64(43), int64(43)}) {
		t.Fatalf("acquire over a floor = %v", r)
	}
	release(t, n, "t", "a")
	if r := acquire(t, n, "u", time.Minute, 1, "b"); !reflect.DeepEqual(r, []any{int64(1), int64(44), int64(44)}) {
		t.Fatalf("another resource after the floor = %v", r)
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
