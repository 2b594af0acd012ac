package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostile is one hostile connection's outcome.
type hostile struct {
	name  string
	reply string // first line the proxy answered ("" if none)
	err   error  // set if the connection was not closed by the proxy in time
}

// attack opens a connection, sends head, then keeps sending more (if not
// nil) until the proxy closes the connection, and reports what it saw.
func attack(addr, name, head string, more func(w io.Writer) error) hostile {
	h := hostile{name: name}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		h.err = err
		return h
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		h.err = err
		return h
	}
	if more != nil {
		go func() {
			for more(conn) == nil {
			}
		}()
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err == nil {
		h.reply = line
		_, err = io.Copy(io.Discard, r) // until the proxy closes it
	}
	if err != nil && err != io.EOF && !strings.Contains(err.Error(), "connection reset") {
		h.err = fmt.Errorf("not closed by the proxy: %w", err)
	}
	return h
}

// TestHostileInput: a 1 GB claimed bulk, a 10^6-element array, 1000
// connections each claiming 512 MB and slowloris clients, while a normal
// client keeps locking: the proxy keeps serving, stays under 200 MB RSS,
// and closes every hostile connection (with a protocol error where Redis
// would send one).
func TestHostileInput(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.limitsExtra = "  request_timeout: 2s\n"
	// The attack (1000 connections accepted and refused in about a second by
	// a race-instrumented binary on this 2-core machine) can starve the
	// engine's goroutines for longer than the default 50ms: this test is
	// about input handling, so master latency gets room.
	cfg.masterTimeout = 300 * time.Millisecond
	// Memory is measured on the binary as shipped: the race detector's
	// shadow memory would double it. The same paths run under -race in
	// package proxy's tests (TestProtocolErrorCloses, TestSlowClientsCut).
	cfg.plain = true
	p := startProxy(t, cfg)

	var maxRSS atomic.Int64
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for {
			if rss, err := p.RSS(); err == nil && rss > maxRSS.Load() {
				maxRSS.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var grants, failures atomic.Int64
	var firstErr atomic.Value
	go func() {
		defer bg.Done()
		c := p.Client()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			res := fmt.Sprintf("hostile:normal:%d", i%10)
			g, ok, err := tryRlock(c, res, 5000)
			if err == nil && ok {
				_, err = c.Do(context.Background(), "RUNLOCK", res, g.token).Result()
			}
			if err != nil {
				failures.Add(1)
				firstErr.CompareAndSwap(nil, err)
				continue
			}
			if ok {
				grants.Add(1)
			}
		}
	}()

	garbage := func(chunk string) func(io.Writer) error {
		b := []byte(strings.Repeat(chunk, 64<<10/len(chunk)))
		return func(w io.Writer) error { _, err := w.Write(b); return err }
	}
	const invalidBulk = "-ERR Protocol error: invalid bulk length\r\n"
	const invalidMultibulk = "-ERR Protocol error: invalid multibulk length\r\n"
	var results []hostile
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(name, head, want string, more func(io.Writer) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := attack(p.Addr, name, head, more)
			if h.err == nil && h.reply != want {
				h.err = fmt.Errorf("answered %q, want %q", h.reply, want)
			}
			mu.Lock()
			results = append(results, h)
			mu.Unlock()
		}()
	}
	t0 := time.Now()
	run("1 GB bulk", "*2\r\n$4\r\nECHO\r\n$1073741824\r\n", invalidBulk, garbage("x"))
	run("10^6-element array", "*1000000\r\n", invalidMultibulk, garbage("$1\r\nx\r\n"))
	for i := range 5 {
		// One byte every 300 ms of a valid command: never complete in time.
		msg := "*3\r\n$5\r\nRLOCK\r\n$8\r\nslowlori\r\n$4\r\n1000\r\n"
		run(fmt.Sprintf("slowloris %d", i), msg[:1], "", func(w io.Writer) error {
			for j := 1; j < len(msg); j++ {
				time.Sleep(300 * time.Millisecond)
				if _, err := io.WriteString(w, msg[j:j+1]); err != nil {
					return err
				}
			}
			return io.EOF
		})
	}
	for i := range 1000 {
		run(fmt.Sprintf("512 MB claim %d", i), "*3\r\n$5\r\nRLOCK\r\n$536870912\r\n", invalidBulk, nil)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	time.Sleep(200 * time.Millisecond) // the normal client keeps going after the attack, too
	close(stop)
	bg.Wait()

	bad := 0
	for _, h := range results {
		if h.err != nil {
			bad++
			if bad <= 5 {
				t.Errorf("%s: %v", h.name, h.err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d hostile connections misbehaved", bad, len(results))
	}
	if f := failures.Load(); f > 0 {
		t.Fatalf("the normal client saw %d errors during the attack, first: %v", f, firstErr.Load())
	}
	if grants.Load() < 10 {
		t.Fatalf("the normal client got only %d grants in %v", grants.Load(), elapsed)
	}
	rss := maxRSS.Load()
	t.Logf("%d hostile connections closed in %v; normal client %d grants; proxy peak RSS %.1f MB",
		len(results), elapsed.Round(time.Millisecond), grants.Load(), float64(rss)/(1<<20))
	if rss == 0 || rss > 200<<20 {
		t.Fatalf("proxy peak RSS %d bytes, want under 200 MB", rss)
	}
	if got := do(t, p.Client(), "PING"); got != "PONG" {
		t.Fatalf("PING after the attack: %v", got)
	}
	cl.expectNoLocks(t)
}
