package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// conv is one raw connection: send commands, read reply lines.
type conv struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func newConv(t *testing.T, addr string) *conv {
	c := dialTest(t, addr)
	return &conv{t: t, conn: c, r: bufio.NewReader(c)}
}

// do sends s (inline commands, each ended by \r\n) and checks the next
// reply lines against want (each without its \r\n).
func (c *conv) do(s string, want ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, s); err != nil {
		c.t.Fatal(err)
	}
	c.expect(want...)
}

func (c *conv) expect(want ...string) {
	c.t.Helper()
	var got []string
	for range want {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("read after %q: %v (want %q)", got, err, want)
		}
		got = append(got, strings.TrimSuffix(line, "\r\n"))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		c.t.Fatalf("got %q\nwant %q", got, want)
	}
}

// bulk is the lines of a bulk string.
func bulk(s string) []string { return []string{fmt.Sprintf("$%d", len(s)), s} }

// frame is the lines of a pub/sub array (head "*" or ">") of bulk strings
// and, last, an integer if n >= 0.
func frame(head string, n int, elems ...string) []string {
	size := len(elems)
	if n >= 0 {
		size++
	}
	out := []string{fmt.Sprintf("%s%d", head, size)}
	for _, e := range elems {
		out = append(out, bulk(e)...)
	}
	if n >= 0 {
		out = append(out, fmt.Sprintf(":%d", n))
	}
	return out
}

func lines(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func publish(t *testing.T, c *redis.Client, ch, msg string) int64 {
	t.Helper()
	n, err := c.Publish(context.Background(), ch, msg).Result()
	if err != nil {
		t.Fatalf("PUBLISH %s: %v", ch, err)
	}
	return n
}

// TestPubSubReplyShapes checks Redis's replies, byte for byte, in RESP2
// (arrays) and RESP3 (pushes), for channels and patterns.
func TestPubSubReplyShapes(t *testing.T) {
	ts := newTestServer(t, Options{})
	pub := ts.client(t, redis.Options{})
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			head := "*"
			c := newConv(t, ts.addr)
			if proto == 3 {
				head = ">"
				c.do("HELLO 3\r\n")
				// Skip the 26 lines of HELLO's map (see TestNullAndMaps).
				for range 26 {
					c.r.ReadString('\n')
				}
			}
			ch := fmt.Sprint("news", proto)
			c.do("SUBSCRIBE "+ch+" other\r\n", lines(frame(head, 1, "subscribe", ch), frame(head, 2, "subscribe", "other"))...)
			c.do("PSUBSCRIBE n*s?\r\n", frame(head, 3, "psubscribe", "n*s?")...)
			if n := publish(t, pub, ch, "hi there"); n != 2 {
				t.Fatalf("PUBLISH counted %d receivers, want 2 (the channel and the pattern)", n)
			}
			c.expect(lines(frame(head, -1, "message", ch, "hi there"), frame(head, -1, "pmessage", "n*s?", ch, "hi there"))...)
			c.do("UNSUBSCRIBE\r\n", lines(frame(head, 2, "unsubscribe", ch), frame(head, 1, "unsubscribe", "other"))...)
			c.do("PUNSUBSCRIBE\r\n", frame(head, 0, "punsubscribe", "n*s?")...)
			nullLine := "$-1"
			if proto == 3 {
				nullLine = "_"
			}
			c.do("UNSUBSCRIBE\r\n", head+"3", "$11", "unsubscribe", nullLine, ":0")
			c.do("PUNSUBSCRIBE nope\r\n", frame(head, 0, "punsubscribe", "nope")...)
			if n := publish(t, pub, ch, "gone"); n != 0 {
				t.Fatalf("PUBLISH after UNSUBSCRIBE counted %d receivers", n)
			}
			c.do("PING\r\n", "+PONG")
		})
	}
}

// TestSubscribeModeRESP2 checks that a RESP2 subscriber may only send the
// pub/sub commands, PING (answered as Redis does there), QUIT and RESET,
// and that RESP3 lifts the rule.
func TestSubscribeModeRESP2(t *testing.T) {
	ts := newTestServer(t, Options{})
	c := newConv(t, ts.addr)
	c.do("SUBSCRIBE a\r\n", frame("*", 1, "subscribe", "a")...)
	c.do("ECHO x\r\n", "-ERR Can't execute 'echo': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
	c.do("PING\r\n", "*2", "$4", "pong", "$0", "")
	c.do("PING hey\r\n", "*2", "$4", "pong", "$3", "hey")
	c.do("NOPE\r\n", "-ERR unknown command 'NOPE', with args beginning with: ")
	c.do("RESET\r\n", "+RESET")
	c.do("ECHO x\r\n", "$1", "x")
	c.do("SUBSCRIBE a\r\n", frame("*", 1, "subscribe", "a")...)
	c.do("QUIT\r\n", "+OK")

	c = newConv(t, ts.addr)
	c.do("HELLO 3\r\n")
	for range 26 {
		c.r.ReadString('\n')
	}
	c.do("SUBSCRIBE a\r\n", frame(">", 1, "subscribe", "a")...)
	c.do("ECHO x\r\n", "$1", "x")
	c.do("PING\r\n", "+PONG")
}

// TestPubSubPatterns checks Redis's glob on channels, and that a
// subscriber with several matching subscriptions gets one message each.
func TestPubSubPatterns(t *testing.T) {
	ts := newTestServer(t, Options{})
	pub := ts.client(t, redis.Options{})
	c := newConv(t, ts.addr)
	c.do("PSUBSCRIBE h?llo news.[ab]* x\\*\r\n", lines(frame("*", 1, "psubscribe", "h?llo"), frame("*", 2, "psubscribe", "news.[ab]*"), frame("*", 3, "psubscribe", `x\*`))...)
	for _, tc := range []struct {
		ch  string
		n   int64
		pat string
	}{
		{"hello", 1, "h?llo"}, {"hallo", 1, "h?llo"}, {"hllo", 0, ""}, {"news.a1", 1, "news.[ab]*"},
		{"news.c", 0, ""}, {"x*", 1, `x\*`}, {"xy", 0, ""},
	} {
		if n := publish(t, pub, tc.ch, "m"); n != tc.n {
			t.Fatalf("PUBLISH %s counted %d, want %d", tc.ch, n, tc.n)
		}
		if tc.n > 0 {
			c.expect(frame("*", -1, "pmessage", tc.pat, tc.ch, "m")...)
		}
	}
	// Same subscription twice: one message, the count unchanged.
	c.do("PSUBSCRIBE h?llo\r\n", frame("*", 3, "psubscribe", "h?llo")...)
	c.do("SUBSCRIBE hello\r\n", frame("*", 4, "subscribe", "hello")...)
	if n := publish(t, pub, "hello", "m2"); n != 2 {
		t.Fatalf("PUBLISH hello counted %d, want 2", n)
	}
	c.expect(lines(frame("*", -1, "message", "hello", "m2"), frame("*", -1, "pmessage", "h?llo", "hello", "m2"))...)
}

// TestPubSubCloseCleansUp: a subscriber that leaves is no longer counted,
// and the server keeps nothing of it.
func TestPubSubCloseCleansUp(t *testing.T) {
	ts := newTestServer(t, Options{})
	pub := ts.client(t, redis.Options{})
	c := newConv(t, ts.addr)
	c.do("SUBSCRIBE a b\r\nPSUBSCRIBE c*\r\n", lines(frame("*", 1, "subscribe", "a"), frame("*", 2, "subscribe", "b"), frame("*", 3, "psubscribe", "c*"))...)
	c.conn.Close()
	waitUntil(t, "the closed subscriber's subscriptions to go", func() bool {
		ts.srv.hub.mu.Lock()
		defer ts.srv.hub.mu.Unlock()
		return len(ts.srv.hub.channels) == 0 && len(ts.srv.hub.patterns) == 0
	})
	if n := publish(t, pub, "a", "m"); n != 0 {
		t.Fatalf("PUBLISH counted %d receivers after the subscriber left", n)
	}
}

// waitUntil polls cond: for a state the server reaches by itself (a
// closed connection's clean-up), never to hide a failure.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestSlowSubscriberBounded: a subscriber that never reads does not hold
// up PUBLISH, and is disconnected once its unwritten messages exceed the
// bound, which frees them.
func TestSlowSubscriberBounded(t *testing.T) {
	ts := newTestServer(t, Options{pushLimit: 1 << 20, RequestTimeout: time.Minute})
	pub := ts.client(t, redis.Options{})
	c := newConv(t, ts.addr)
	c.do("SUBSCRIBE a\r\n", frame("*", 1, "subscribe", "a")...)
	// The subscriber reads nothing more. Each message is 60 KB: the socket
	// buffers take a few MB, then the 1 MB queue fills.
	msg := strings.Repeat("x", 60<<10)
	start := time.Now()
	for i := 0; ; i++ {
		n := publish(t, pub, "a", msg)
		if n == 0 {
			break // the subscriber was disconnected and forgotten
		}
		if i > 2000 || time.Since(start) > 20*time.Second {
			t.Fatalf("%d messages (%d MB) published and the subscriber is still there", i, i*60>>10)
		}
	}
	// Its connection is closed: reading what was written ends in EOF.
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c.r); err != nil {
		t.Fatalf("the slow subscriber's connection was not closed: %v", err)
	}
}

// TestSubscriptionsBounded: limits.max_args bounds a connection's channels
// and patterns together.
func TestSubscriptionsBounded(t *testing.T) {
	ts := newTestServer(t, Options{Limits: Limits{MaxArgs: 4}})
	c := newConv(t, ts.addr)
	c.do("SUBSCRIBE a b c\r\n", lines(frame("*", 1, "subscribe", "a"), frame("*", 2, "subscribe", "b"), frame("*", 3, "subscribe", "c"))...)
	c.do("PSUBSCRIBE d e\r\n", "-ERR max number of subscriptions per connection reached (limits.max_args: 4)")
	c.do("SUBSCRIBE a b d\r\n", lines(frame("*", 3, "subscribe", "a"), frame("*", 3, "subscribe", "b"), frame("*", 4, "subscribe", "d"))...)
}

// fakeBroker records what the server asks of it and delivers its
// publications locally, as the real one does.
type fakeBroker struct {
	mu      sync.Mutex
	listens map[string]int
	sent    []string
	recv    func(channel, message string) int
}

func (b *fakeBroker) Publish(_ context.Context, ch, msg string) (int, error) {
	b.mu.Lock()
	b.sent = append(b.sent, ch+"="+msg)
	recv := b.recv
	b.mu.Unlock()
	return recv(ch, msg), nil
}

func (b *fakeBroker) Listen(_ context.Context, name string, pattern bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.listens[fmt.Sprint(name, pattern)]++
}

func (b *fakeBroker) Unlisten(name string, pattern bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := fmt.Sprint(name, pattern)
	if b.listens[k]--; b.listens[k] == 0 {
		delete(b.listens, k)
	}
}

func (b *fakeBroker) Receive(f func(channel, message string) int) {
	b.mu.Lock()
	b.recv = f
	b.mu.Unlock()
}

func (b *fakeBroker) state() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprint(b.listens, b.sent)
}

// TestPubSubBroker: the server asks its broker for each channel and
// pattern once per subscribing connection, withdraws on UNSUBSCRIBE and
// on close, publishes through it, and delivers what it receives.
func TestPubSubBroker(t *testing.T) {
	b := &fakeBroker{listens: map[string]int{}}
	ts := newTestServer(t, Options{Broker: b})
	pub := ts.client(t, redis.Options{})
	c1, c2 := newConv(t, ts.addr), newConv(t, ts.addr)
	c1.do("SUBSCRIBE a a b\r\n", lines(frame("*", 1, "subscribe", "a"), frame("*", 1, "subscribe", "a"), frame("*", 2, "subscribe", "b"))...)
	c2.do("SUBSCRIBE a\r\nPSUBSCRIBE a*\r\n", lines(frame("*", 1, "subscribe", "a"), frame("*", 2, "psubscribe", "a*"))...)
	if got, want := b.state(), "map[a*true:1 afalse:2 bfalse:1] []"; got != want {
		t.Fatalf("broker %s, want %s", got, want)
	}
	if n := publish(t, pub, "a", "m"); n != 3 {
		t.Fatalf("PUBLISH through the broker counted %d, want 3", n)
	}
	c1.expect(frame("*", -1, "message", "a", "m")...)
	c2.expect(lines(frame("*", -1, "message", "a", "m"), frame("*", -1, "pmessage", "a*", "a", "m"))...)
	// Another proxy's message, as the broker hands it over.
	if n := b.recv("b", "from afar"); n != 1 {
		t.Fatalf("delivered to %d, want 1", n)
	}
	c1.expect(frame("*", -1, "message", "b", "from afar")...)
	c1.do("UNSUBSCRIBE a\r\n", frame("*", 1, "unsubscribe", "a")...)
	c2.conn.Close()
	waitUntil(t, "the closed subscriber's listens to be withdrawn", func() bool {
		return b.state() == "map[bfalse:1] [a=m]"
	})
}
