package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testServer serves a few test commands beside the built-ins on a
// 127.0.0.1:0 listener.
type testServer struct {
	touched  atomic.Int64 // TOUCH handler runs
	running  atomic.Int64 // SLEEP and BLOCK handlers started
	meetMu   sync.Mutex
	meeting  int
	met      chan struct{} // closed once enough MEETs run at once
	order    []string      // keys of the STAMP runs, in the order they ran
	stamps   map[string]chan struct{}
	lates    atomic.Int64 // Late replies of STAMP computed so far
	srv      *Server
	addr     string
	canceled chan struct{} // BLOCK saw its context end
	hold     chan struct{} // releases HOLD
	served   chan error
}

func newTestServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	ts := &testServer{canceled: make(chan struct{}, 16), served: make(chan error, 1), hold: make(chan struct{}), met: make(chan struct{})}
	opts.Commands = append(opts.Commands,
		&Command{Name: "boom", Arity: 1, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			panic("boom")
		}},
		&Command{Name: "nothing", Arity: 1, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			return nil, nil
		}},
		&Command{Name: "fail", Arity: 1, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			return nil, errors.New("engine exploded")
		}},
		&Command{Name: "sleep", Arity: 2, Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
			ts.running.Add(1)
			d, _ := time.ParseDuration(string(args[0]))
			time.Sleep(d)
			return OK, nil
		}},
		// TOUCH key [key ...]: every argument is a resource.
		&Command{Name: "touch", Arity: -2, FirstKey: 1, LastKey: -1, Step: 1, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			ts.touched.Add(1)
			return OK, nil
		}},
		// HOLD: waits until the test sends on hold, or its context ends.
		&Command{Name: "hold", Arity: 1, Handler: func(ctx context.Context, _ *Session, _ [][]byte) (any, error) {
			select {
			case <-ts.hold:
				return OK, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}},
		// MEET key n: concurrent, keyed; returns once n MEETs are running
		// at once (or errors after 5 s): it can only succeed when the
		// pipelined MEETs run beside each other.
		&Command{Name: "meet", Arity: 3, FirstKey: 1, LastKey: 1, Step: 1, Concurrent: func([][]byte) bool { return true },
			Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
				ts.meetMu.Lock()
				ts.meeting++
				n, _ := strconv.Atoi(string(args[1]))
				if ts.meeting >= n {
					close(ts.met)
				}
				met := ts.met
				ts.meetMu.Unlock()
				select {
				case <-met:
					return string(args[0]), nil
				case <-time.After(5 * time.Second):
					return nil, errors.New("ran alone")
				}
			}},
		// STAMP key label [after]: concurrent, keyed; with after, waits
		// (up to 5 s) until the run labelled after has recorded itself;
		// then appends key/label to the order of runs and returns a Late
		// reply: how many STAMP replies were computed before it, plus one.
		&Command{Name: "stamp", Arity: -3, FirstKey: 1, LastKey: 1, Step: 1, Concurrent: func([][]byte) bool { return true },
			Handler: func(_ context.Context, _ *Session, args [][]byte) (any, error) {
				if len(args) == 3 {
					select {
					case <-ts.stamped(string(args[2])):
					case <-time.After(5 * time.Second):
					}
				}
				ts.meetMu.Lock()
				ts.order = append(ts.order, string(args[0])+"/"+string(args[1]))
				ts.meetMu.Unlock()
				close(ts.stamped(string(args[1])))
				return Late(func() any { return ts.lates.Add(1) }), nil
			}},
		// BLOCK d: waits d or until its context ends.
		&Command{Name: "block", Arity: 2, Flags: FlagMayBlock, Handler: func(ctx context.Context, _ *Session, args [][]byte) (any, error) {
			ts.running.Add(1)
			d, _ := time.ParseDuration(string(args[0]))
			select {
			case <-time.After(d):
				return SimpleString("WOKE"), nil
			case <-ctx.Done():
				ts.canceled <- struct{}{}
				return nil, ctx.Err()
			}
		}},
	)
	opts.MapError = func(err error) *Error {
		if errors.Is(err, context.Canceled) {
			return Errorf("canceled")
		}
		return nil
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.srv, ts.addr = srv, ln.Addr().String()
	go func() { ts.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-ts.served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ts
}

// stamped is closed once the STAMP run labelled label has recorded itself.
func (ts *testServer) stamped(label string) chan struct{} {
	ts.meetMu.Lock()
	defer ts.meetMu.Unlock()
	if ts.stamps == nil {
		ts.stamps = map[string]chan struct{}{}
	}
	ch, ok := ts.stamps[label]
	if !ok {
		ch = make(chan struct{})
		ts.stamps[label] = ch
	}
	return ch
}

func (ts *testServer) client(t *testing.T, opts redis.Options) *redis.Client {
	opts.Addr = ts.addr
	c := redis.NewClient(&opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// dialTest opens a connection that gives up after 5 seconds and is closed
// when the test ends.
func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	return conn
}

// raw sends bytes on a new connection and reads n reply lines.
func raw(t *testing.T, addr, send string, n int) []string {
	t.Helper()
	conn := dialTest(t, addr)
	defer conn.Close()
	io.WriteString(conn, send)
	r := bufio.NewReader(conn)
	var out []string
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading reply %d to %q: %v (so far %q)", len(out)+1, send, err, out)
		}
		out = append(out, line)
	}
	return out
}

func TestReplies(t *testing.T) {
	ts := newTestServer(t, Options{})
	tests := []struct {
		name, send string
		want       []string
	}{
		{"ping", "PING\r\n", []string{"+PONG\r\n"}},
		{"ping msg", "*2\r\n$4\r\nping\r\n$2\r\nhi\r\n", []string{"$2\r\n", "hi\r\n"}},
		{"echo", "ECHO x\r\n", []string{"$1\r\n", "x\r\n"}},
		{"null resp2", "NOTHING\r\n", []string{"$-1\r\n"}},
		{"null resp3", "HELLO 3\r\nNOTHING\r\n", []string{"%7\r\n"}}, // then the map; see below
		{"panic", "BOOM\r\nPING\r\n", []string{"-ERR internal error\r\n", "+PONG\r\n"}},
		{"unmapped error", "FAIL\r\n", []string{"-ERR internal error\r\n"}},
		{"arity", "ECHO\r\n", []string{"-ERR wrong number of arguments for 'echo' command\r\n"}},
		{"ping arity", "PING a b\r\n", []string{"-ERR wrong number of arguments for 'ping' command\r\n"}},
		{"unknown", "NOPE a b\r\n", []string{"-ERR unknown command 'NOPE', with args beginning with: 'a' 'b' \r\n"}},
		{"unknown no args", "NOPE\r\n", []string{"-ERR unknown command 'NOPE', with args beginning with: \r\n"}},
		{"select 0", "SELECT 0\r\n", []string{"+OK\r\n"}},
		{"select 1", "SELECT 1\r\n", []string{"-ERR DB index is out of range\r\n"}},
		{"select x", "SELECT x\r\n", []string{"-ERR value is not an integer or out of range\r\n"}},
		{"hello 4", "HELLO 4\r\n", []string{"-NOPROTO unsupported protocol version\r\n"}},
		{"hello x", "HELLO x\r\n", []string{"-ERR Protocol version is not an integer or out of range\r\n"}},
		{"hello bad opt", "HELLO 3 FOO\r\n", []string{"-ERR Syntax error in HELLO option 'foo'\r\n"}},
		{"hello wrong user", "HELLO 3 AUTH bob pw\r\n", []string{"-WRONGPASS invalid username-password pair or user is disabled.\r\n"}},
		{"auth no password configured", "AUTH pw\r\n", []string{"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"}},
		{"auth default", "AUTH default pw\r\n", []string{"+OK\r\n"}},
		{"reset", "HELLO 3\r\nRESET\r\nNOTHING\r\n", []string{"%7\r\n"}},
		{"client bad name", "CLIENT SETNAME \"a b\"\r\n", []string{"-ERR Client names cannot contain spaces, newlines or special characters.\r\n"}},
		{"client unknown", "CLIENT FOO\r\n", []string{"-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n"}},
		{"client tracking", "CLIENT TRACKING on OPTIN\r\n", []string{"+OK\r\n"}},
		{"client setname arity", "CLIENT SETNAME\r\n", []string{"-ERR wrong number of arguments for 'client|setname' command\r\n"}},
		{"command count", "COMMAND COUNT\r\n", []string{":29\r\n"}},
		{"quit", "QUIT\r\nPING\r\n", []string{"+OK\r\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := raw(t, ts.addr, tc.send, len(tc.want))
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("sent %q: reply line %d = %q, want %q", tc.send, i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestNullAndMaps checks the RESP3 encodings after HELLO 3, and RESP2's
// after RESET.
func TestNullAndMaps(t *testing.T) {
	ts := newTestServer(t, Options{})
	// HELLO 3 answers a 7-entry map: its header, 7 keys as bulks (2 lines
	// each), 4 bulk values (2 lines), 2 integers and the empty modules
	// array (1 line each): 26 lines. Then NOTHING answers "_".
	lines := raw(t, ts.addr, "HELLO 3\r\nNOTHING\r\nRESET\r\nNOTHING\r\n", 26+3)
	tail := lines[len(lines)-4:]
	want := []string{"*0\r\n", "_\r\n", "+RESET\r\n", "$-1\r\n"}
	for i := range want {
		if tail[i] != want[i] {
			t.Fatalf("got %q, want %q at the end", lines, want)
		}
	}
	if lines[0] != "%7\r\n" {
		t.Fatalf("HELLO 3 did not answer a RESP3 map: %q", lines)
	}
}

func TestHelloAndClient(t *testing.T) {
	ts := newTestServer(t, Options{})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := ts.client(t, redis.Options{Protocol: proto, ClientName: "worker-1"})
		if n := c.ClientGetName(ctx).Val(); n != "worker-1" {
			t.Fatalf("RESP%d: CLIENT GETNAME = %q", proto, n)
		}
		id, err := c.ClientID(ctx).Result()
		if err != nil || id <= 0 {
			t.Fatalf("CLIENT ID = %d, %v", id, err)
		}
		list := c.ClientList(ctx).Val()
		if !strings.Contains(list, "name=worker-1") || !strings.Contains(list, "lib-name=go-redis") {
			t.Fatalf("CLIENT LIST:\n%s", list)
		}
		hello, err := c.Do(ctx, "HELLO", proto).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch h := hello.(type) {
		case map[any]any:
			if proto != 3 || h["proto"] != int64(3) || h["server"] != "redis" {
				t.Fatalf("HELLO %d = %#v", proto, h)
			}
		case []any:
			if proto != 2 || len(h) != 14 || h[0] != "server" {
				t.Fatalf("HELLO %d = %#v", proto, h)
			}
		default:
			t.Fatalf("HELLO %d = %#v", proto, hello)
		}
	}
}

func TestCommandAndInfo(t *testing.T) {
	ts := newTestServer(t, Options{
		Version: "9.9.9",
		Info:    []InfoSection{{Name: "masters", Lines: func() []string { return []string{"masters:3"} }}},
		Commands: []*Command{{Name: "rlockx", Arity: -3, Flags: FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(context.Context, *Session, [][]byte) (any, error) { return nil, nil },
			Doc: Doc{Summary: "test", Since: "1.0.0", Group: "redlock", Args: []ArgDoc{
				{Name: "resource", Type: "key"}, {Name: "wait", Type: "integer", Token: "WAIT", Optional: true}}}}},
	})
	c := ts.client(t, redis.Options{Protocol: 2})
	ctx := context.Background()
	docs, err := c.Do(ctx, "COMMAND", "DOCS", "rlockx").Result()
	if err != nil {
		t.Fatal(err)
	}
	arr := docs.([]any)
	if len(arr) != 2 || arr[0] != "rlockx" {
		t.Fatalf("COMMAND DOCS = %#v", docs)
	}
	d := arr[1].([]any)
	if d[0] != "summary" || d[1] != "test" || d[6] != "arguments" {
		t.Fatalf("COMMAND DOCS entry = %#v", d)
	}
	info, err := c.Do(ctx, "COMMAND", "INFO", "rlockx", "nope").Result()
	if err != nil {
		t.Fatal(err)
	}
	entries := info.([]any)
	if len(entries) != 2 || entries[1] != nil {
		t.Fatalf("COMMAND INFO = %#v", info)
	}
	if e := entries[0].([]any); e[0] != "rlockx" || e[1] != int64(-3) || len(e) != 10 {
		t.Fatalf("COMMAND INFO entry = %#v", e)
	}
	all := c.Do(ctx, "INFO").Val().(string)
	for _, want := range []string{"# Server\r\n", "redis_version:7.2.0\r\n", "redlock_proxy_version:9.9.9\r\n", "# Clients\r\n", "connected_clients:", "# Stats\r\n", "# Masters\r\nmasters:3\r\n"} {
		if !strings.Contains(all, want) {
			t.Errorf("INFO lacks %q:\n%s", want, all)
		}
	}
	if only := c.Do(ctx, "INFO", "masters").Val().(string); only != "# Masters\r\nmasters:3\r\n" {
		t.Errorf("INFO masters = %q", only)
	}
}

func TestMaxClients(t *testing.T) {
	ts := newTestServer(t, Options{MaxClients: 2})
	conns := make([]net.Conn, 2)
	for i := range conns {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "PING\r\n")
		bufio.NewReader(c).ReadString('\n') // accepted and served
		conns[i] = c
	}
	got := raw(t, ts.addr, "PING\r\n", 1)
	if got[0] != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client got %q", got)
	}
	conns[0].Close()
	// Once one leaves, a new client gets in.
	deadline := time.Now().Add(5 * time.Second)
	for raw(t, ts.addr, "PING\r\n", 1)[0] != "+PONG\r\n" {
		if time.Now().After(deadline) {
			t.Fatal("no room after a client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHangUpCancelsBlocking: a client that hangs up while its blocking
// command runs cancels the command's context.
func TestHangUpCancelsBlocking(t *testing.T) {
	ts := newTestServer(t, Options{})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "BLOCK 1m\r\n")
	// Hang up once the command runs (the server counts it as blocked).
	for deadline := time.Now().Add(5 * time.Second); ts.srv.Blocked() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the blocking command never started")
		}
	}
	conn.Close()
	select {
	case <-ts.canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("blocking command not canceled after the client hung up")
	}
}

// TestPipelinedAfterBlocking: commands the client pipelines behind a
// blocking one are read by the watcher and served afterwards, in order.
func TestPipelinedAfterBlocking(t *testing.T) {
	ts := newTestServer(t, Options{})
	got := raw(t, ts.addr, "BLOCK 30ms\r\nECHO one\r\nPING\r\n", 4)
	want := []string{"+WOKE\r\n", "$3\r\n", "one\r\n", "+PONG\r\n"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestPipelinedRunTogether: pipelined commands that allow it run beside
// each other (8 MEETs each wait for the 8 to run at once), and their
// replies come in order.
func TestPipelinedRunTogether(t *testing.T) {
	ts := newTestServer(t, Options{})
	var send string
	var want []string
	for i := range 8 {
		k := "k" + strconv.Itoa(i)
		send += "MEET " + k + " 8\r\n"
		want = append(want, "$2\r\n", k+"\r\n")
	}
	send += "PING\r\n"
	want = append(want, "+PONG\r\n")
	got := raw(t, ts.addr, send, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestPipelinedSameResourceInOrder: a pipelined command naming the
// resource of one still running waits for it, while one naming another
// resource passes it: k1/a waits until k2/x (sent after it) has run, which
// only happens if k2/x runs beside it; k1/b and k1/c, on k1's resource,
// must still run after k1/a, in order. Late replies are computed as they
// are written, in order.
func TestPipelinedSameResourceInOrder(t *testing.T) {
	ts := newTestServer(t, Options{})
	send := "STAMP k1 a x\r\nSTAMP k2 x\r\nSTAMP k1 b\r\nSTAMP k1 c\r\n"
	got := raw(t, ts.addr, send, 4)
	want := []string{":1\r\n", ":2\r\n", ":3\r\n", ":4\r\n"}
	if !slices.Equal(got, want) {
		t.Fatalf("Late replies %q, want %q", got, want)
	}
	ts.meetMu.Lock()
	defer ts.meetMu.Unlock()
	if wantOrder := []string{"k2/x", "k1/a", "k1/b", "k1/c"}; !slices.Equal(ts.order, wantOrder) {
		t.Fatalf("runs %q, want %q", ts.order, wantOrder)
	}
}

// TestShutdown: in-flight commands finish and get their reply, waiting
// commands are cut short with an error, new connections are refused.
func TestShutdown(t *testing.T) {
	ts := newTestServer(t, Options{})
	sleeper := ts.client(t, redis.Options{Protocol: 2, ReadTimeout: 10 * time.Second})
	blocker := ts.client(t, redis.Options{Protocol: 2, ReadTimeout: 10 * time.Second})
	ctx := context.Background()
	sleepErr, blockErr := make(chan error, 1), make(chan error, 1)
	var started atomic.Int32
	go func() { started.Add(1); sleepErr <- sleeper.Do(ctx, "SLEEP", "300ms").Err() }()
	go func() { started.Add(1); blockErr <- blocker.Do(ctx, "BLOCK", "1m").Err() }()
	// Both handlers running (the in-flight count would also count
	// go-redis's handshake commands, before the sleeper has connected).
	for ts.running.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-sleepErr; err != nil {
		t.Errorf("in-flight command got %v, want its reply", err)
	}
	if err := <-blockErr; err == nil || err.Error() != "ERR canceled" {
		t.Errorf("waiting command got %v, want the canceled error", err)
	}
	if c, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		c.Close()
		t.Error("new connection accepted after Shutdown")
	}
}

// TestRepliesNotHeldBehindWaiting: the reply to a pipelined command is
// written before the next command starts waiting (a lock grant's validity
// would otherwise run out in the proxy's buffer).
func TestRepliesNotHeldBehindWaiting(t *testing.T) {
	ts := newTestServer(t, Options{})
	conn := dialTest(t, ts.addr)
	io.WriteString(conn, "ECHO first\r\nHOLD\r\n")
	r := bufio.NewReader(conn)
	for _, want := range []string{"$5\r\n", "first\r\n"} {
		// HOLD is still waiting: this read fails at the 5 s deadline if
		// the reply to ECHO is held back until HOLD ends.
		if line, err := r.ReadString('\n'); err != nil || line != want {
			t.Fatalf("reply to ECHO while HOLD waits: %q, %v", line, err)
		}
	}
	ts.hold <- struct{}{}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("reply to HOLD: %q, %v", line, err)
	}
}

// TestHelpAndBlockedClients: COMMAND HELP and CLIENT HELP answer help
// text, and CLIENT LIST shows a blocked client's command with flags=b.
func TestHelpAndBlockedClients(t *testing.T) {
	ts := newTestServer(t, Options{})
	c := ts.client(t, redis.Options{})
	ctx := context.Background()
	for _, cmd := range []string{"COMMAND", "CLIENT"} {
		lines, err := c.Do(ctx, cmd, "HELP").StringSlice()
		if err != nil || len(lines) < 4 || !strings.HasPrefix(lines[0], cmd+" <subcommand>") {
			t.Fatalf("%s HELP: %q %v", cmd, lines, err)
		}
	}
	blocked := ts.client(t, redis.Options{})
	go blocked.Do(ctx, "BLOCK", "2s")
	var line string
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		list := c.Do(ctx, "CLIENT", "LIST").String()
		for _, l := range strings.Split(list, "\n") {
			if strings.Contains(l, "cmd=block") {
				line = l
			}
		}
		if line != "" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(line, "flags=b") {
		t.Fatalf("CLIENT LIST of a blocked client: %q", line)
	}
}
