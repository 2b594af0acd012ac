package redisnode

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// gatedConn holds its first Write until gate closes, so that requests
// issued meanwhile wait in the pipe (a write is in progress).
type gatedConn struct {
	net.Conn
	gate <-chan struct{}
	once sync.Once
}

func (g *gatedConn) Write(b []byte) (int, error) {
	g.once.Do(func() { <-g.gate })
	return g.Conn.Write(b)
}

// evalCalls is how many EVAL and EVALSHA commands the master ran.
func evalCalls(t *testing.T, n *Node, addr string) int {
	t.Helper()
	rc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rc.Write(appendCommand(nil, "INFO", "commandstats"))
	rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	v, err := readReply(bufio.NewReader(rc), 0)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, l := range strings.Split(v.(string), "\r\n") {
		for _, cmd := range []string{"cmdstat_eval:", "cmdstat_evalsha:"} {
			if rest, ok := strings.CutPrefix(l, cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				c, _ := strconv.Atoi(calls)
				total += c
			}
		}
	}
	return total
}

// TestBatch: requests issued while a write is in progress go out as one
// batch; each gets the reply it would have had alone, in order, and a
// member's error is its own.
func TestBatch(t *testing.T) {
	srv := redistest.Start(t)
	n, err := New(Options{Addr: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// A hash where one member wants a lock key: WRONGTYPE for it alone.
	raw, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write(appendCommand(nil, "HSET", "h", "f", "v"))
	if v, err := readReply(bufio.NewReader(raw), 0); err != nil || v != int64(1) {
		t.Fatalf("HSET: %v %v", v, err)
	}
	nc, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	p := newPipe(&gatedConn{Conn: nc, gate: gate}, 0, nil)
	defer p.close()
	// The first request's write waits for the gate, on its own goroutine.
	pong := make(chan any, 1)
	go p.command([]string{"PING"}, func(v any, _ error) { pong <- v })
	for !func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.writing }() {
		time.Sleep(time.Millisecond)
	}
	type res struct {
		v   any
		err error
	}
	const members = 12
	results := make([]chan res, members)
	acq := n.scripts["lock_acquire"]
	for i := range members {
		results[i] = make(chan res, 1)
		r := "r" + strconv.Itoa(i%6) // i and i+6 want the same resource
		if i == 3 {
			r = "h"
		}
		p.evalScript(acq, lockKeys(3, r), acquireArgs("t"+strconv.Itoa(i), "60000", "1"), func(v any, err error) { results[i] <- res{v, err} })
	}
	before := evalCalls(t, n, srv.Addr)
	close(gate)
	if v := <-pong; v != "PONG" {
		t.Fatalf("PING: %v", v)
	}
	for i := range members {
		r := <-results[i]
		switch {
		case i == 3:
			if r.err == nil || !strings.Contains(r.err.Error(), "WRONGTYPE") {
				t.Fatalf("member %d over a hash: %v %v, want WRONGTYPE", i, r.v, r.err)
			}
		case r.err != nil:
			t.Fatalf("member %d: %v", i, r.err)
		case i < 6 || i == 9: // 9 is the first on r3 (3 wanted h)
			if a := r.v.([]any); a[0] != int64(1) {
				t.Fatalf("member %d (first on its resource): %v, want granted", i, r.v)
			}
		default:
			if a := r.v.([]any); a[0] != int64(0) {
				t.Fatalf("member %d (second on its resource): %v, want refused", i, r.v)
			}
		}
	}
	if got := evalCalls(t, n, srv.Addr) - before; got != 1 {
		t.Fatalf("%d script calls for %d requests issued during a write, want 1 batch", got, members)
	}
}
