package tests

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// collector gathers the messages one subscriber receives, until "END".
type collector struct {
	name string
	mu   sync.Mutex
	got  []string
	done chan struct{}
}

func newCollector(name string) *collector { return &collector{name: name, done: make(chan struct{})} }

func (c *collector) add(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, m)
	if m == "END" {
		close(c.done)
	}
}

func (c *collector) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.got {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// goSubscriber subscribes through go-redis and collects what it receives.
func goSubscriber(t *testing.T, addr, name string, proto int, pattern bool, channel string) *collector {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	var ps *redis.PubSub
	if pattern {
		ps = c.PSubscribe(ctx, channel)
	} else {
		ps = c.Subscribe(ctx, channel)
	}
	t.Cleanup(func() { ps.Close() })
	// The confirmation: the proxy answers once the masters subscribed.
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("%s: subscribe: %v", name, err)
	}
	col := newCollector(name)
	ch := ps.Channel()
	go func() {
		for m := range ch {
			col.add(m.Payload)
		}
	}()
	return col
}

// pySubscriber runs tests/clients/pubsub.py (redis-py) and collects what it
// prints.
func pySubscriber(t *testing.T, python, addr, channel string) *collector {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, python, "pubsub.py", port, channel)
	cmd.Dir = "clients"
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("redis-py subscriber stderr:\n%s", stderr.String())
		}
	})
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		cancel()
		cmd.Wait()
		t.Fatalf("redis-py subscriber did not start: %q\n%s", sc.Text(), stderr.String())
	}
	col := newCollector("redis-py")
	go func() {
		for sc.Scan() {
			if m, ok := strings.CutPrefix(sc.Text(), "message "); ok {
				col.add(m)
			}
		}
	}()
	return col
}

// TestPubSubAcrossProxies: messages published through proxy A reach the
// subscribers of proxy B (go-redis RESP3 and RESP2, a pattern, redis-py)
// and of A itself exactly once and in order, also while 2 of the 5
// masters are stopped and after a master cut every proxy's connection,
// and the copies the stopped masters deliver late, once resumed, are not
// handed on again.
func TestPubSubAcrossProxies(t *testing.T) {
	busy(t)
	python := requirePython(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	ctx := context.Background()
	const ch = "orders:released"

	// Direct subscribers on the masters that will be stopped, on the
	// reserved channel: they tell when those masters have delivered
	// their backlog after SIGCONT.
	var direct []*collector
	for i := range 2 {
		direct = append(direct, goSubscriber(t, cl.servers[i].Addr, fmt.Sprint("master", i), 2, false, "redlock-proxy:pub:"+ch))
	}
	subs := []*collector{
		goSubscriber(t, pb.Addr, "go-redis RESP3 on B", 3, false, ch),
		goSubscriber(t, pb.Addr, "go-redis RESP2 on B", 2, false, ch),
		goSubscriber(t, pb.Addr, "go-redis RESP2 pattern on B", 2, true, "orders:*"),
		goSubscriber(t, pa.Addr, "go-redis RESP3 on A", 3, false, ch),
		pySubscriber(t, python, pb.Addr, ch),
	}
	pub := pa.Client()
	var want []string
	publishRound := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			m := fmt.Sprintf("%s-%d", prefix, i)
			// One subscriber on A: PUBLISH counts this proxy's.
			if got, err := pub.Publish(ctx, ch, m).Result(); err != nil || got != 1 {
				t.Fatalf("PUBLISH %s = %d, %v; want 1 (the subscriber on proxy A)", m, got, err)
			}
			want = append(want, m)
		}
	}
	publishRound("all-up", 50)
	cl.servers[0].Pause()
	cl.servers[1].Pause()
	publishRound("two-stopped", 50)
	// Every subscriber has them while the masters are still stopped.
	for _, s := range subs {
		waitFor(t, 10*time.Second, s.name+" receiving the messages published with 2 masters stopped", func() bool {
			return s.count("two-stopped-") >= 50
		})
	}
	cl.servers[0].Resume()
	cl.servers[1].Resume()
	for _, d := range direct {
		waitFor(t, 10*time.Second, d.name+" delivering its backlog after SIGCONT", func() bool {
			return d.count("") >= 100 // the reserved channel's payloads carry an id first
		})
	}
	publishRound("resumed", 10)
	// Every connection of master 2 cut, the proxies' subscriptions and
	// their publications, in the middle of a round: the other masters
	// bring what it misses, in order.
	publishRound("before-cut", 25)
	for _, typ := range []string{"pubsub", "normal"} {
		if err := cl.direct[2].Do(ctx, "CLIENT", "KILL", "TYPE", typ).Err(); err != nil {
			t.Fatalf("CLIENT KILL TYPE %s: %v", typ, err)
		}
	}
	publishRound("after-cut", 25)
	if err := pub.Publish(ctx, ch, "END").Err(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "END")
	for _, s := range subs {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not receive END; got %d messages", s.name, s.count(""))
		}
		s.mu.Lock()
		got := slices.Clone(s.got)
		s.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("%s received %d messages, want the %d published, once each and in order:\ngot  %q\nwant %q", s.name, len(got), len(want), got, want)
		}
	}
}

// TestPubSubSubscribeModeThroughProxy: Redis's RESP2 subscribe-mode rule and
// PING reply, through the real binary.
func TestPubSubSubscribeModeThroughProxy(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	c := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	conn := c.Conn()
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	v, err := conn.Do(ctx, "SUBSCRIBE", "a").Result()
	if err != nil || fmt.Sprint(v) != "[subscribe a 1]" {
		t.Fatalf("SUBSCRIBE a = %v, %v", v, err)
	}
	err = conn.Do(ctx, "RLOCK", "r", "1000").Err()
	if err == nil || err.Error() != "ERR Can't execute 'rlock': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context" {
		t.Fatalf("RLOCK in subscribe mode: %v", err)
	}
	if v, err := conn.Do(ctx, "PING").Result(); err != nil || fmt.Sprint(v) != "[pong ]" {
		t.Fatalf("PING in subscribe mode = %v, %v", v, err)
	}
	if v, err := conn.Do(ctx, "UNSUBSCRIBE").Result(); err != nil || fmt.Sprint(v) != "[unsubscribe a 0]" {
		t.Fatalf("UNSUBSCRIBE = %v, %v", v, err)
	}
	if v, err := conn.Do(ctx, "RLOCK", "r", "1000").Result(); err != nil || len(v.([]any)) != 3 {
		t.Fatalf("RLOCK after UNSUBSCRIBE = %v, %v", v, err)
	}
}

// springUnlock is Spring Integration's PUB_SUB_LOCK unlock script
// (RedisLockRegistry, 6.5): release, then tell the waiters.
const springUnlock = `local lockClientId = redis.call('GET', KEYS[1])
if (lockClientId == ARGV[1] and redis.call('DEL', KEYS[1]) == 1) then
	redis.call('PUBLISH', ARGV[2], KEYS[1])
	return true
end
return false`

// TestDropinReleasePublishes: a drop-in release script that ends with
// PUBLISH, run through proxy A, reaches a waiter subscribed on proxy B
// once; a release that does not happen publishes nothing.
func TestDropinReleasePublishes(t *testing.T) {
	busy(t)
	_, pa, pb := dropinProxies(t)
	ctx := context.Background()
	const ch = "spring:unlock"
	sub := goSubscriber(t, pb.Addr, "waiter on B", 3, false, ch)
	a := pa.Client()
	if err := a.Do(ctx, "SET", "spring:lock", "client-1", "NX", "PX", "30000").Err(); err != nil {
		t.Fatal(err)
	}
	// Not the holder: nothing released, nothing published.
	if v, err := a.Eval(ctx, springUnlock, []string{"spring:lock"}, "client-2", ch).Result(); err != redis.Nil {
		t.Fatalf("unlock by another client = %v, %v; want nil (false)", v, err)
	}
	if v, err := a.Eval(ctx, springUnlock, []string{"spring:lock"}, "client-1", ch).Result(); err != nil || v != int64(1) {
		t.Fatalf("unlock by the holder = %v, %v; want 1 (true)", v, err)
	}
	if err := a.Publish(ctx, ch, "END").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the waiter on B did not get END; got %d messages", sub.count(""))
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if want := []string{"spring:lock", "END"}; !slices.Equal(sub.got, want) {
		t.Fatalf("the waiter on B received %q, want %q (the release's message once)", sub.got, want)
	}
}
