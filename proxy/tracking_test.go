package proxy

import (
	"context"
	"sync"
	"testing"
	"time"
)

// trackServer serves READ key (a read: the value, or nil), READEXP key ms
// (a read that holds for ms) and WRITE key value (FlagWrite).
func trackServer(t *testing.T, b Broker) *testServer {
	var mu sync.Mutex
	vals := map[string]string{}
	read := func(_ context.Context, _ *Session, args [][]byte) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := vals[string(args[0])]
		if !ok {
			return nil, nil
		}
		return v, nil
	}
	return newTestServer(t, Options{Broker: b, Commands: []*Command{
		{Name: "read", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1, Handler: read},
		{Name: "readexp", Arity: 3, FirstKey: 1, LastKey: 1, Step: 1, Handler: func(ctx context.Context, s *Session, args [][]byte) (any, error) {
			v, _ := read(ctx, s, args[:1])
			ms, _ := ParseInt(args[1])
			return Expires{Value: v, After: time.Duration(ms) * time.Millisecond}, nil
		}},
		{Name: "write", Arity: 3, Flags: FlagWrite, FirstKey: 1, LastKey: 1, Step: 1, Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			vals[string(args[0])] = string(args[1])
			return OK, nil
		}},
	}})
}

// resp3 opens a connection and switches it to RESP3.
func resp3(t *testing.T, addr string) *conv {
	c := newConv(t, addr)
	c.do("HELLO 3\r\n")
	for range 26 { // HELLO's map (see TestNullAndMaps)
		c.r.ReadString('\n')
	}
	return c
}

func invalidateLines(key string) []string {
	return []string{">2", "$10", "invalidate", "*1", "$" + string(rune('0'+len(key))), key}
}

// TestTrackingDefaultMode: a key read is invalidated once when it is
// written through the server; an absent key's invalidation follows the
// reply at once; one read after a pipelined write is invalidated after
// the replies; NOLOOP spares the writer.
func TestTrackingDefaultMode(t *testing.T) {
	ts := trackServer(t, nil)
	w := newConv(t, ts.addr)
	w.do("WRITE k v1\r\n", "+OK")
	c := resp3(t, ts.addr)
	c.do("CLIENT TRACKING ON\r\n", "+OK")
	c.do("READ k\r\n", "$2", "v1")
	w.do("WRITE k v2\r\n", "+OK")
	c.expect(invalidateLines("k")...)
	w.do("WRITE k v3\r\n", "+OK") // no longer tracked: nothing sent
	c.do("PING\r\n", "+PONG")

	// Absent: nil, then its invalidation.
	c.do("READ nothing\r\n", lines([]string{"_"}, invalidateLines("nothing"))...)

	// Read and write pipelined on the tracking connection itself: the
	// invalidation comes after the value read, before the write's reply
	// (as from Redis).
	c.do("READ k\r\nWRITE k v4\r\n", lines(bulk("v3"), invalidateLines("k"), []string{"+OK"})...)

	// NOLOOP: the tracking connection's own write is not reported.
	c.do("CLIENT TRACKING ON NOLOOP\r\n", "+OK")
	c.do("READ k\r\nWRITE k v5\r\nPING\r\n", lines(bulk("v4"), []string{"+OK", "+PONG"})...)
	w.do("WRITE k v6\r\n", "+OK")
	c.expect(invalidateLines("k")...)

	// OFF: nothing more.
	c.do("READ k\r\n", bulk("v6")...)
	c.do("CLIENT TRACKING OFF\r\n", "+OK")
	w.do("WRITE k v7\r\n", "+OK")
	c.do("PING\r\n", "+PONG")
}

// TestTrackingOptIn: with OPTIN only the command after CLIENT CACHING YES
// is tracked; errors are Redis's.
func TestTrackingOptIn(t *testing.T) {
	ts := trackServer(t, nil)
	w := newConv(t, ts.addr)
	w.do("WRITE k v1\r\n", "+OK")
	c := resp3(t, ts.addr)
	c.do("CLIENT CACHING YES\r\n", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	c.do("CLIENT TRACKING ON BCAST\r\n", "-ERR CLIENT TRACKING BCAST is not served by redlock-proxy: use the default mode, OPTIN or OPTOUT over RESP3 (see docs/PROTOCOL.md, Client-side caching)")
	c.do("CLIENT TRACKING ON OPTIN OPTOUT\r\n", "-ERR You can't use both OPTIN and OPTOUT")
	c.do("CLIENT TRACKING ON OPTIN\r\n", "+OK")
	c.do("CLIENT CACHING NO\r\n", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	c.do("CLIENT GETREDIR\r\n", ":0")
	c.do("READ k\r\n", bulk("v1")...) // not opted in
	w.do("WRITE k v2\r\n", "+OK")
	c.do("PING\r\n", "+PONG")
	c.do("CLIENT CACHING YES\r\nREAD k\r\nREAD k\r\n", lines([]string{"+OK"}, bulk("v2"), bulk("v2"))...)
	w.do("WRITE k v3\r\n", "+OK")
	c.expect(invalidateLines("k")...)
	c.do("RESET\r\n", "+RESET")
	c.do("CLIENT GETREDIR\r\n", ":-1")
}

// TestTrackingExpires: a read that holds for a while is invalidated when
// it ends, with no write.
func TestTrackingExpires(t *testing.T) {
	ts := trackServer(t, nil)
	newConv(t, ts.addr).do("WRITE k v\r\n", "+OK")
	c := resp3(t, ts.addr)
	c.do("CLIENT TRACKING ON\r\n", "+OK")
	start := time.Now()
	c.do("READEXP k 100\r\n", bulk("v")...)
	c.expect(invalidateLines("k")...)
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("invalidated after %v, before the read's 100 ms ran out", d)
	}
}

// keyBroker is fakeBroker with KeyWatcher.
type keyBroker struct {
	fakeBroker
	watching bool
	changed  func(string)
}

func (b *keyBroker) WatchKeys(on bool) {
	b.mu.Lock()
	b.watching = on
	b.mu.Unlock()
}

func (b *keyBroker) KeysWatched(context.Context) {}

func (b *keyBroker) OnKeyChange(f func(string)) {
	b.mu.Lock()
	b.changed = f
	b.mu.Unlock()
}

func (b *keyBroker) isWatching() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.watching
}

// TestTrackingOtherServers: while keys are tracked the broker reports
// changes made elsewhere, which invalidate them; the last key forgotten
// stops the reports.
func TestTrackingOtherServers(t *testing.T) {
	b := &keyBroker{fakeBroker: fakeBroker{listens: map[string]int{}}}
	ts := trackServer(t, b)
	newConv(t, ts.addr).do("WRITE k v\r\n", "+OK")
	c := resp3(t, ts.addr)
	c.do("CLIENT TRACKING ON\r\n", "+OK")
	if b.isWatching() {
		t.Fatal("watching with no key tracked")
	}
	c.do("READ k\r\n", bulk("v")...)
	if !b.isWatching() {
		t.Fatal("not watching while a key is tracked")
	}
	b.changed("other")
	b.changed("k")
	c.expect(invalidateLines("k")...)
	if b.isWatching() {
		t.Fatal("still watching once no key is tracked")
	}
	c.do("READ k\r\n", bulk("v")...)
	c.conn.Close()
	waitUntil(t, "the closed connection's keys to be forgotten", func() bool { return !b.isWatching() })
}
