package redisnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/internal/testcert"
	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// stepConn lets the test run each write: Write announces itself on
// entered, then waits for a token on next.
type stepConn struct {
	net.Conn
	entered chan struct{}
	next    chan struct{}
}

func (s *stepConn) Write(b []byte) (int, error) {
	s.entered <- struct{}{}
	<-s.next
	return s.Conn.Write(b)
}

// step lets the write in progress through and waits for the next one to
// start.
func (s *stepConn) step() {
	s.next <- struct{}{}
	<-s.entered
}

// releaseAll lets every write through from now on, until stop is called.
func (s *stepConn) releaseAll() (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-s.entered:
			case <-done:
				return
			}
			s.next <- struct{}{}
		}
	}()
	return func() { close(done) }
}

// finish lets the write in progress and every later one through; stop
// ends that.
func (s *stepConn) finish() (stop func()) {
	stop = s.releaseAll()
	s.next <- struct{}{}
	return stop
}

// steppedPipe is a pipe of its own to addr whose writes the test runs
// (stepConn), closed when the test ends.
func steppedPipe(t *testing.T, addr string) (*pipe, *stepConn) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	sc := &stepConn{Conn: nc, entered: make(chan struct{}), next: make(chan struct{})}
	p := newPipe(sc, 0, nil)
	t.Cleanup(func() {
		stop := sc.releaseAll()
		p.close()
		stop()
	})
	return p, sc
}

// holdWrite issues a PING on its own goroutine and returns once its write
// is in progress (held by the stepConn); the reply arrives on the channel.
func holdWrite(p *pipe, sc *stepConn) <-chan any {
	pong := make(chan any, 1)
	go p.command([]string{"PING"}, func(v any, _ error) { pong <- v })
	<-sc.entered
	return pong
}

// evalCalls is how many EVAL and EVALSHA commands the master ran.
func evalCalls(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, l := range strings.Split(info, "\r\n") {
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
	n, rc, srv := setup(t, nil)
	ctx := context.Background()
	// A hash where one member wants a lock key: WRONGTYPE for it alone.
	if err := rc.HSet(ctx, "h", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	p, sc := steppedPipe(t, srv.Addr)
	pong := holdWrite(p, sc)
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
		p.evalScript(acq, lockKeys(3, r), acquireArgs("t"+strconv.Itoa(i), "60000", "1"), func(v any, err error) { results[i] <- res{v, err} }, -1)
	}
	before := evalCalls(t, rc)
	defer sc.finish()()
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
	if got := evalCalls(t, rc) - before; got != 1 {
		t.Fatalf("%d script calls for %d requests issued during a write, want 1 batch", got, members)
	}
}

// TestWriteBufferNotReused: the buffer being written is never the one
// callers append to. The sequence that once broke it (found by make bench
// as connections dropped with "unknown command"): a small write, a large
// one (over the 64 KB kept for reuse) while requests wait, then a write of
// one small request, during which a caller encodes another (a request for
// another script closes the open batch): it must not land in the buffer on
// its way to the master. Each request takes its own resource with its own
// token; every resource must end up held by its own token.
func TestWriteBufferNotReused(t *testing.T) {
	n, rc, srv := setup(t, nil)
	p, sc := steppedPipe(t, srv.Addr)
	acq, rel := n.scripts["lock_acquire"], n.scripts["lock_release"]
	var answered sync.WaitGroup
	pad := strings.Repeat("p", 400)
	token := func(r string) string { return "token-" + r + pad }
	send := func(r string) {
		answered.Add(1)
		// Same length for every request, so that a request overwriting
		// another in a shared buffer stays well-formed RESP.
		p.evalScript(acq, lockKeys(3, r), acquireArgs(token(r), "60000", "1"), func(any, error) { answered.Done() }, -1)
	}
	var resources []string
	// 1: a small write, in progress on its own goroutine.
	resources = append(resources, "r00000")
	go send("r00000")
	<-sc.entered
	// 2: over 64 KB of requests wait meanwhile; one write takes them.
	for i := range 200 {
		r := fmt.Sprintf("q%05d", i)
		resources = append(resources, r)
		send(r)
	}
	sc.step()
	// 3: one small request waits while the large buffer is written.
	resources = append(resources, "r00001")
	send("r00001")
	sc.step()
	// 4: another while that small buffer is written, encoded at once: a
	// release (another script) closes the batch it waits in.
	resources = append(resources, "r00002")
	send("r00002")
	answered.Add(1)
	p.evalScript(rel, readerKeys("meta:fence-lag", "none"), []string{"nobody"}, func(any, error) { answered.Done() }, -1)
	defer sc.finish()()
	answered.Wait()
	for _, r := range resources {
		if v, err := rc.Get(context.Background(), r).Result(); err != nil || v != token(r) {
			t.Fatalf("%s holds %q (%v), want its own token", r, v, err)
		}
	}
}

// TestStalledConnectionIsReplaced: a master that stops answering (SIGSTOP)
// while a request waits has its connection closed after StallTimeout: the
// request fails rather than waiting without end, and once the master is
// back a new connection (a new connection number) answers.
func TestStalledConnectionIsReplaced(t *testing.T) {
	srv := redistest.Start(t)
	n, err := New(Options{Addr: srv.Addr, StallTimeout: 400 * time.Millisecond, RedialInterval: 20 * time.Millisecond,
		DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	conn := n.Identity().Conn
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	failed := make(chan error, 1)
	start := time.Now()
	n.Send("lock_acquire", lockKeys(3, "s"), acquireArgs("t", "60000", "1"), func(_ any, err error) { failed <- err })
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a stopped master answered")
		}
		if waited := time.Since(start); waited < 400*time.Millisecond {
			t.Fatalf("failed after %v, before the stall timeout: %v", waited, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request still waits 5 s after the master stopped")
	}
	srv.Resume()
	resumed = true
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := n.Eval(context.Background(), "lock_acquire", lockKeys(3, "s2"), acquireArgs("t", "60000", "1"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer 5 s after the master resumed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n.Identity().Conn == conn {
		t.Fatal("answered on the stalled connection: it was not replaced")
	}
}

// TestBatchAfterScriptFlush: a batch sent with EVALSHA after SCRIPT FLUSH
// gets NOSCRIPT and is sent again in full; each member gets its own reply.
func TestBatchAfterScriptFlush(t *testing.T) {
	n, rc, srv := setup(t, nil)
	p, sc := steppedPipe(t, srv.Addr)
	acq := n.scripts["lock_acquire"]
	// batch holds a write, issues three acquires meanwhile (one batch),
	// then lets every write through and checks each reply.
	batch := func(prefix string) {
		pong := holdWrite(p, sc)
		var answered sync.WaitGroup
		results := make([]any, 3)
		for i := range results {
			answered.Add(1)
			r := prefix + strconv.Itoa(i)
			p.evalScript(acq, lockKeys(3, r), acquireArgs("t-"+r, "60000", "1"), func(v any, err error) {
				defer answered.Done()
				if err != nil {
					results[i] = err
					return
				}
				results[i] = v
			}, -1)
		}
		stop := sc.finish()
		answered.Wait()
		stop()
		if v := <-pong; v != "PONG" {
			t.Fatalf("PING: %v", v)
		}
		for i, v := range results {
			if a, ok := v.([]any); !ok || a[0] != int64(1) {
				t.Fatalf("%s%d: %v, want granted", prefix, i, v)
			}
		}
	}
	batch("a") // sent with EVAL: the wrapper is now cached
	if err := rc.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	batch("b") // EVALSHA: NOSCRIPT, then in full
}

// TestPausedMasterDoesNotBlockCallers: a master that stops reading
// (SIGSTOP) fills the socket's buffers; a caller must still return from
// Send at once, since the engine sends each request to the masters one
// after another and a blocked caller would hold up the live masters too
// (node-redlock's drop-in row saw acquisitions take the whole stall). Past
// maxPendingOut, requests fail at once with errNotReading. Once the master
// resumes, every request that was not refused is answered. Over plain TCP
// (a caller's bounded write, then the pipe's goroutine) and over TLS
// (every write on the pipe's goroutine).
func TestPausedMasterDoesNotBlockCallers(t *testing.T) {
	certs := testcert.Generate(t, t.TempDir())
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"tcp", false}, {"tls", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *redistest.Server
			opts := Options{StallTimeout: time.Minute}
			if tc.tls {
				opts.TLS = certs.ClientConfig(false)
				srv = redistest.StartTLS(t, opts.TLS, certs.ServerCert, certs.ServerKey, certs.CA, false)
			} else {
				srv = redistest.Start(t)
			}
			opts.Addr = srv.Addr
			n, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			srv.Pause()
			resumed := false
			defer func() {
				if !resumed {
					srv.Resume()
				}
			}()
			// 64 KiB per request: 48 MiB in all, well past the
			// socket buffers and maxPendingOut.
			pad := strings.Repeat("p", 64<<10)
			const requests = 768
			var mu sync.Mutex
			var refused, answered, other int
			var wg sync.WaitGroup
			for i := range requests {
				wg.Add(1)
				n.Send("lock_acquire", lockKeys(3, "r"+strconv.Itoa(i)), acquireArgs("t"+pad, "60000", "1"), func(_ any, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						answered++
					case errors.Is(err, errNotReading):
						refused++
					default:
						other++
						t.Errorf("request failed: %v", err)
					}
				})
			}
			// Every Send returned while the master is still stopped
			// (a blocked one would return only when the stall timeout,
			// a minute, closed the connection, failing the requests).
			mu.Lock()
			if refused == 0 || other != 0 || answered != 0 {
				t.Errorf("while stopped: %d refused, %d failed otherwise, %d answered; want some refused, none other", refused, other, answered)
			}
			mu.Unlock()
			srv.Resume()
			resumed = true
			wg.Wait()
			if answered+refused != requests || answered == 0 {
				t.Fatalf("after resuming: %d answered, %d refused of %d", answered, refused, requests)
			}
			if _, err := n.Eval(context.Background(), "lock_acquire", lockKeys(3, "after"), acquireArgs("t", "60000", "1")); err != nil {
				t.Fatalf("a request after resuming: %v", err)
			}
		})
	}
}

// reply is one request's answer, as a test collects it.
type reply struct {
	v   any
	err error
}

// scriptedMaster listens on loopback, has serve answer the first
// connection (then closes it), and returns a pipe connected to it, closed
// when the test ends, and where serve's error arrives.
func scriptedMaster(t *testing.T, serve func(c net.Conn, br *bufio.Reader) error) (*pipe, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		served <- serve(c, bufio.NewReader(c))
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p := newPipe(nc, 0, nil)
	t.Cleanup(p.close)
	return p, served
}

// readCommands reads n commands from a scripted master's client.
func readCommands(br *bufio.Reader, n int) error {
	for range n {
		if _, err := readReply(br, 0); err != nil {
			return err
		}
	}
	return nil
}

// TestPlainStepConnectionLost: a plain form's step whose connection fails
// after the first of its replies answers its caller once, with the
// connection's error, and sends no follow-up.
func TestPlainStepConnectionLost(t *testing.T) {
	p, served := scriptedMaster(t, func(c net.Conn, br *bufio.Reader) error {
		if err := readCommands(br, 3); err != nil {
			return err
		}
		// The first command's reply (the key was free), then hang up.
		_, err := c.Write([]byte("$-1\r\n"))
		return err
	})
	keys := []string{"r", "meta:fence:r", "meta:fence-lag", "meta:fence-hwm", "meta:lease-hwm"}
	args := []string{"tok", "1000", "1", "1000"}
	st := scripts.LockAcquire.Plain(keys, args)
	if st == nil {
		t.Fatal("no plain form")
	}
	got := make(chan reply, 4)
	p.plain(st, newScript("lock_acquire", scripts.LockAcquire.Source()), keys, args, func(v any, err error) { got <- reply{v, err} })
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		var e Error
		if r.err == nil || errors.As(r.err, &e) {
			t.Fatalf("answered %v, %v; want the connection's failure", r.v, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after the connection failed")
	}
	<-p.readerDone
	select {
	case r := <-got:
		t.Fatalf("answered twice: %v, %v", r.v, r.err)
	default:
	}
}

// TestParseReply checks the raw reader's parser against the buffered one:
// the same value and length for each whole reply, errIncomplete for each
// proper prefix of a valid one, and an error for a malformed one.
func TestParseReply(t *testing.T) {
	tests := []struct {
		name, wire string
		bad        bool
	}{
		{name: "status", wire: "+OK\r\n"},
		{name: "error", wire: "-NOSCRIPT No matching script\r\n"},
		{name: "integer", wire: ":-42\r\n"},
		{name: "bulk", wire: "$5\r\nhe\nlo\r\n"},
		{name: "empty bulk", wire: "$0\r\n\r\n"},
		{name: "nil bulk", wire: "$-1\r\n"},
		{name: "nil array", wire: "*-1\r\n"},
		{name: "nested array", wire: "*3\r\n:1\r\n*2\r\n$3\r\nabc\r\n$-1\r\n-ERR x\r\n"},
		{name: "bad integer", wire: ":x\r\n", bad: true},
		{name: "bad type", wire: "?1\r\n", bad: true},
		{name: "no carriage return", wire: ":1\n", bad: true},
		{name: "bulk too long", wire: "$999999999\r\n", bad: true},
		{name: "line too long", wire: "+" + strings.Repeat("x", maxLine) + "\r\n", bad: true},
		{name: "too deep", wire: strings.Repeat("*1\r\n", maxReplyDepth+1) + ":1\r\n", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := []byte(tt.wire + ":7\r\n") // a next reply follows
			v, n, err := parseReply(wire, 0)
			if tt.bad {
				if err == nil || errors.Is(err, errIncomplete) {
					t.Fatalf("parsed %v, %v; want a malformed-reply error", v, err)
				}
				return
			}
			want, werr := readReply(bufio.NewReader(strings.NewReader(tt.wire)), 0)
			if err != nil || werr != nil || n != len(tt.wire) || !reflect.DeepEqual(v, want) {
				t.Fatalf("parsed %#v in %d bytes, %v; want %#v in %d bytes (%v)", v, n, err, want, len(tt.wire), werr)
			}
			for cut := range len(tt.wire) {
				if v, _, err := parseReply([]byte(tt.wire[:cut]), 0); !errors.Is(err, errIncomplete) {
					t.Fatalf("first %d bytes: parsed %v, %v; want errIncomplete", cut, v, err)
				}
			}
		})
	}
}

// TestRawReaderPieces has a server answer in pieces: a reply larger than
// the raw reader's buffer, cut every 1000 bytes, then two replies cut in
// their headers, each piece flushed on its own. Every request gets its own
// reply whole and in order.
func TestRawReaderPieces(t *testing.T) {
	big := strings.Repeat("x", 3*rawReadSize+7)
	// The first command is answered alone (the pipe writes the next two
	// once it is), in pieces of 1000 bytes; the next two in pieces of 3.
	answers := []struct {
		asked, piece int
		wire         string
	}{
		{1, 1000, "$" + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n"},
		{2, 3, ":12345\r\n*2\r\n$2\r\nok\r\n:1\r\n"},
	}
	p, served := scriptedMaster(t, func(c net.Conn, br *bufio.Reader) error {
		for _, a := range answers {
			if err := readCommands(br, a.asked); err != nil {
				return err
			}
			for at := 0; at < len(a.wire); at += a.piece {
				if _, err := c.Write([]byte(a.wire[at:min(at+a.piece, len(a.wire))])); err != nil {
					return err
				}
				time.Sleep(100 * time.Microsecond) // each piece its own segment
			}
		}
		return nil
	})
	got := make(chan reply, 3)
	for range 3 {
		p.command([]string{"GET", "k"}, func(v any, err error) { got <- reply{v, err} })
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	want := []any{big, int64(12345), []any{"ok", int64(1)}}
	for i, w := range want {
		select {
		case r := <-got:
			if r.err != nil || !reflect.DeepEqual(r.v, w) {
				t.Fatalf("reply %d: %.40v, %v; want %.40v", i, r.v, r.err, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reply %d did not come", i)
		}
	}
}

// FuzzParseReply checks that the raw reader's parser and the buffered
// reader agree on any bytes: the same value and length when the buffered
// reader reads a reply, and an error (errIncomplete when the bytes end
// early) when it does not.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"+" + strings.Repeat("y", maxLine-3) + "\r\n", "+OK\r\n", ":1\r\n", "$3\r\nabc\r\n", "*2\r\n$-1\r\n-ERR x\r\n", "*1\r\n*1\r\n:", "$5\r\nab"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := parseReply(b, 0)
		rd := bytes.NewReader(b)
		br := bufio.NewReaderSize(rd, maxLine)
		want, werr := readReply(br, 0)
		if werr != nil {
			if err == nil {
				t.Fatalf("parsed %#v from %q; the buffered reader says %v", v, b, werr)
			}
			return
		}
		used := len(b) - br.Buffered() - rd.Len()
		if err != nil || n != used || !reflect.DeepEqual(v, want) {
			t.Fatalf("%q: parsed %#v in %d bytes (%v); the buffered reader %#v in %d", b, v, n, err, want, used)
		}
	})
}

// TestRawReaderHangUpWithReply has a master answer and hang up at once,
// so that the end of the stream may arrive with the reply and raise no
// readiness of its own: the reply is delivered, and the next request
// fails (at the latest when its write meets the reset) instead of waiting
// for an answer that cannot come.
func TestRawReaderHangUpWithReply(t *testing.T) {
	for i := range 20 {
		p, _ := scriptedMaster(t, func(c net.Conn, br *bufio.Reader) error {
			if err := readCommands(br, 1); err != nil {
				return err
			}
			_, err := c.Write([]byte("+PONG\r\n"))
			return err // and hang up
		})
		got := make(chan reply, 2)
		p.command([]string{"PING"}, func(v any, err error) { got <- reply{v, err} })
		if r := <-got; r.err != nil || r.v != "PONG" {
			t.Fatalf("run %d: first reply %v, %v", i, r.v, r.err)
		}
		p.command([]string{"PING"}, func(v any, err error) { got <- reply{v, err} })
		select {
		case r := <-got:
			if r.err == nil {
				t.Fatalf("run %d: a closed connection answered %v", i, r.v)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: the request after the hang-up got no answer", i)
		}
	}
}
