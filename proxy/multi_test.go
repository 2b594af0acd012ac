package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// readReply reads one whole reply and returns it as it came.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	out := line
	n := 0
	switch line[0] {
	case '$':
		if line[1] != '-' {
			l, err := r.ReadString('\n')
			return out + l, err
		}
	case '*', '~', '>':
		n = parseN(line[1:])
	case '%':
		n = 2 * parseN(line[1:])
	}
	for range n {
		l, err := readReply(r)
		out += l
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// session sends each command on one connection and returns each whole
// reply.
func session(t *testing.T, addr string, cmds ...string) []string {
	t.Helper()
	conn := dialTest(t, addr)
	r := bufio.NewReader(conn)
	var out []string
	for _, c := range cmds {
		io.WriteString(conn, c+"\r\n")
		rep, err := readReply(r)
		if err != nil {
			t.Fatalf("reply to %q: %v (so far %q)", c, err, out)
		}
		out = append(out, rep)
	}
	return out
}

// txCommands are test commands for transactions: GRANT (a Late reply
// that, like a lock grant, gives itself back if its context ended before
// it is written), WAITHERE (signals that it started, then waits for its
// context to end), NOMULTI (refused inside MULTI).
type txCommands struct {
	granted  atomic.Int64 // GRANT replies computed with the client there
	gaveBack atomic.Int64 // GRANT replies given back
	ran      atomic.Int64 // GRANT handler runs
	waiting  chan struct{}
}

func (x *txCommands) commands() []*Command {
	x.waiting = make(chan struct{}, 4)
	return []*Command{
		{Name: "grant", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1, Flags: FlagWrite, Result: ResultNull, Concurrent: func([][]byte) bool { return true },
			Handler: func(ctx context.Context, _ *Session, args [][]byte) (any, error) {
				x.ran.Add(1)
				return Late(func() any {
					if ctx.Err() != nil {
						x.gaveBack.Add(1)
						return nil
					}
					x.granted.Add(1)
					return []any{string(args[0]), int64(1000)}
				}), nil
			}},
		{Name: "waithere", Arity: 1, Flags: FlagMayBlock, Handler: func(ctx context.Context, _ *Session, _ [][]byte) (any, error) {
			x.waiting <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		{Name: "nomulti", Arity: 1, Flags: FlagNoMulti, Handler: func(context.Context, *Session, [][]byte) (any, error) {
			return OK, nil
		}},
	}
}

func newTxServer(t *testing.T, opts Options) (*testServer, *txCommands) {
	x := &txCommands{}
	opts.Commands = append(opts.Commands, x.commands()...)
	return newTestServer(t, opts), x
}

const execAbort = "-EXECABORT Transaction discarded because of previous errors.\r\n"

func TestMulti(t *testing.T) {
	ts, x := newTxServer(t, Options{Limits: Limits{MaxArgs: 16, MaxArgBytes: 64, MaxCommandBytes: 150}})
	tests := []struct {
		name    string
		cmds    []string
		want    []string
		touched int64 // TOUCH runs
	}{
		{"queue and exec in order", []string{"MULTI", "ECHO a", "TOUCH k", "NOTHING", "PING", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*4\r\n$1\r\na\r\n+OK\r\n$-1\r\n+PONG\r\n"}, 1},
		{"errors are elements", []string{"MULTI", "FAIL", "SELECT 1", "TOUCH k", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*3\r\n-ERR internal error\r\n-ERR DB index is out of range\r\n+OK\r\n"}, 1},
		{"a panic is its element only", []string{"MULTI", "BOOM", "TOUCH k", "EXEC", "PING"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n-ERR internal error\r\n+OK\r\n", "+PONG\r\n"}, 1},
		{"empty", []string{"MULTI", "EXEC"}, []string{"+OK\r\n", "*0\r\n"}, 0},
		{"unknown command aborts", []string{"MULTI", "TOUCH k", "NOPE x", "TOUCH k", "EXEC", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n", "+QUEUED\r\n", execAbort, "-ERR EXEC without MULTI\r\n"}, 0},
		{"arity aborts", []string{"MULTI", "TOUCH k", "ECHO", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "-ERR wrong number of arguments for 'echo' command\r\n", execAbort}, 0},
		{"no_multi aborts", []string{"MULTI", "TOUCH k", "NOMULTI", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "-ERR Command not allowed inside a transaction\r\n", execAbort}, 0},
		{"subscribe aborts", []string{"MULTI", "TOUCH k", "SUBSCRIBE c", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "-ERR Command not allowed inside a transaction\r\n", execAbort}, 0},
		{"exec arity aborts", []string{"MULTI", "TOUCH k", "EXEC x", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "-ERR wrong number of arguments for 'exec' command\r\n", execAbort}, 0},
		{"discard", []string{"MULTI", "TOUCH k", "DISCARD", "EXEC", "TOUCH k"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+OK\r\n", "-ERR EXEC without MULTI\r\n", "+OK\r\n"}, 1},
		{"discard an aborted one", []string{"MULTI", "NOPE", "DISCARD", "MULTI", "TOUCH k", "EXEC"},
			[]string{"+OK\r\n", "-ERR unknown command 'NOPE', with args beginning with: \r\n", "+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n"}, 1},
		{"nested multi does not abort", []string{"MULTI", "MULTI", "TOUCH k", "EXEC"},
			[]string{"+OK\r\n", "-ERR MULTI calls can not be nested\r\n", "+QUEUED\r\n", "*1\r\n+OK\r\n"}, 1},
		{"exec and discard without multi", []string{"EXEC", "DISCARD"},
			[]string{"-ERR EXEC without MULTI\r\n", "-ERR DISCARD without MULTI\r\n"}, 0},
		{"watch", []string{"WATCH k", "UNWATCH", "MULTI", "WATCH k", "UNWATCH", "TOUCH k", "EXEC"},
			[]string{"-" + ErrWatch.Error() + "\r\n", "+OK\r\n", "+OK\r\n", "-ERR WATCH inside MULTI is not allowed\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n+OK\r\n+OK\r\n"}, 1},
		{"reset drops it", []string{"MULTI", "TOUCH k", "RESET", "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+RESET\r\n", "-ERR EXEC without MULTI\r\n"}, 0},
		{"resp3", []string{"HELLO 3", "MULTI", "NOTHING", "ECHO a", "EXEC"},
			[]string{"", "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n_\r\n$1\r\na\r\n"}, 0},
		// The bounds: 16 commands (limits.max_args), 150 bytes of arguments
		// (limits.max_command_bytes).
		{"queue bound: commands", append(append([]string{"MULTI"}, slices.Repeat([]string{"TOUCH k"}, 17)...), "EXEC"),
			append(append(append([]string{"+OK\r\n"}, slices.Repeat([]string{"+QUEUED\r\n"}, 16)...),
				"-ERR transaction too long: MULTI queues at most 16 commands (limits.max_args) and 150 bytes of arguments (limits.max_command_bytes)\r\n"), execAbort), 0},
		{"queue bound: bytes", []string{"MULTI", "ECHO " + strings.Repeat("a", 60), "ECHO " + strings.Repeat("b", 60), "ECHO " + strings.Repeat("c", 60), "EXEC"},
			[]string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
				"-ERR transaction too long: MULTI queues at most 16 commands (limits.max_args) and 150 bytes of arguments (limits.max_command_bytes)\r\n", execAbort}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := ts.touched.Load()
			got := session(t, ts.addr, tt.cmds...)
			for i, w := range tt.want {
				if w != "" && got[i] != w {
					t.Fatalf("reply %d to %q: got %q, want %q", i, tt.cmds[i], got[i], w)
				}
			}
			if n := ts.touched.Load() - before; n != tt.touched {
				t.Fatalf("TOUCH ran %d times, want %d", n, tt.touched)
			}
		})
	}
	if x.ran.Load() != 0 {
		t.Fatal("GRANT ran")
	}
}

// TestMultiAuth: NOAUTH and NOPERM are queue-time errors that abort the
// transaction; an AUTH inside it is run at EXEC and the commands after it
// are checked again as the new user.
func TestMultiAuth(t *testing.T) {
	ts := newTestServer(t, Options{Auth: Auth{Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
		{Name: "ops", PasswordSHA256: sha256.Sum256([]byte("opw")), Resources: []string{"*"}},
	}}})
	tests := []struct {
		name string
		cmds []string
		want []string
	}{
		{"noauth", []string{"MULTI"}, []string{noauth}},
		{"noperm aborts", []string{"AUTH billing bpw", "MULTI", "TOUCH billing:1", "TOUCH orders:1", "EXEC"},
			[]string{"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", noperm, execAbort}},
		{"checked again at exec", []string{"AUTH ops opw", "MULTI", "AUTH billing bpw", "TOUCH orders:1", "TOUCH billing:1", "EXEC"},
			[]string{"+OK\r\n", "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*3\r\n+OK\r\n" + noperm + "+OK\r\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := session(t, ts.addr, tt.cmds...)
			for i, w := range tt.want {
				if got[i] != w {
					t.Fatalf("reply %d to %q: got %q, want %q", i, tt.cmds[i], got[i], w)
				}
			}
		})
	}
}

// TestMultiGoRedis: go-redis's TxPipelined (MULTI ... EXEC in one write),
// in RESP2 and RESP3.
func TestMultiGoRedis(t *testing.T) {
	ts, x := newTxServer(t, Options{})
	for _, proto := range []int{2, 3} {
		t.Run("resp"+string(rune('0'+proto)), func(t *testing.T) {
			c := ts.client(t, redis.Options{Protocol: proto})
			ctx := context.Background()
			var echo *redis.StringCmd
			var grant *redis.Cmd
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				echo = p.Echo(ctx, "hi")
				grant = p.Do(ctx, "GRANT", "r")
				p.Do(ctx, "NOTHING")
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("TxPipelined: %v", err)
			}
			if len(cmds) != 3 || echo.Val() != "hi" {
				t.Fatalf("cmds %v, echo %q", cmds, echo.Val())
			}
			if g, err := grant.Slice(); err != nil || len(g) != 2 || g[0] != "r" || g[1] != int64(1000) {
				t.Fatalf("GRANT in EXEC: %v, %v", g, err)
			}
			if err := cmds[2].Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("NOTHING in EXEC: %v, want nil", err)
			}
			// A refused command: EXECABORT, nothing run.
			ran := x.ran.Load()
			_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "GRANT", "r")
				p.Do(ctx, "NOPE")
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
				t.Fatalf("TxPipelined with an unknown command: %v, want EXECABORT", err)
			}
			if x.ran.Load() != ran {
				t.Fatal("GRANT ran in an aborted transaction")
			}
		})
	}
	if x.gaveBack.Load() != 0 {
		t.Fatalf("%d grants given back with the client there", x.gaveBack.Load())
	}
}

// TestExecHangUpGivesBack: a client that hangs up while EXEC runs gets
// nothing granted: the grant made before it left is given back when the
// reply is computed, and the command queued after the one running does
// not run.
func TestExecHangUpGivesBack(t *testing.T) {
	ts, x := newTxServer(t, Options{})
	conn := dialTest(t, ts.addr)
	r := bufio.NewReader(conn)
	io.WriteString(conn, "MULTI\r\nGRANT r\r\nWAITHERE\r\nTOUCH k\r\nEXEC\r\n")
	for i := range 4 {
		if l, err := r.ReadString('\n'); err != nil || (i == 0 && l != "+OK\r\n") || (i > 0 && l != "+QUEUED\r\n") {
			t.Fatalf("reply %d: %q, %v", i, l, err)
		}
	}
	select {
	case <-x.waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("WAITHERE did not start")
	}
	if x.ran.Load() != 1 {
		t.Fatalf("GRANT ran %d times before WAITHERE, want 1", x.ran.Load())
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for x.gaveBack.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if x.gaveBack.Load() != 1 || x.granted.Load() != 0 {
		t.Fatalf("given back %d, granted %d: want 1 and 0", x.gaveBack.Load(), x.granted.Load())
	}
	if ts.touched.Load() != 0 {
		t.Fatal("TOUCH ran after the client left")
	}
}

// TestExecShutdown: a server shutting down cuts a running EXEC short: its
// waiting command ends, its grant is given back and the client is told.
func TestExecShutdown(t *testing.T) {
	x := &txCommands{}
	srv, err := New(Options{Commands: x.commands(), MapError: func(err error) *Error {
		if errors.Is(err, context.Canceled) {
			return Errorf("canceled")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn := dialTest(t, ln.Addr().String())
	r := bufio.NewReader(conn)
	io.WriteString(conn, "MULTI\r\nGRANT r\r\nWAITHERE\r\nGRANT s\r\nEXEC\r\n")
	for range 4 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	<-x.waiting
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.Shutdown(ctx)
	}()
	rep, err := readReply(r)
	if want := "*3\r\n$-1\r\n-ERR canceled\r\n-" + errTxCut.Error() + "\r\n"; rep != want {
		t.Fatalf("EXEC reply %q, %v; want %q", rep, err, want)
	}
	wg.Wait()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if x.gaveBack.Load() != 1 || x.ran.Load() != 1 {
		t.Fatalf("given back %d, GRANT ran %d: want 1 and 1", x.gaveBack.Load(), x.ran.Load())
	}
}

// TestMultiNotConcurrent: pipelined commands that may run beside others
// (Command.Concurrent) do not start while queued in MULTI; EXEC runs them
// in order.
func TestMultiNotConcurrent(t *testing.T) {
	ts, x := newTxServer(t, Options{})
	conn := dialTest(t, ts.addr)
	r := bufio.NewReader(conn)
	// One write: STAMP x starts at once beside what follows; the STAMPs and
	// GRANT queued after MULTI must not.
	io.WriteString(conn, "STAMP x 0\r\nMULTI\r\nSTAMP a 1\r\nGRANT g\r\nSTAMP b 2\r\nPING\r\n")
	var got []string
	for range 6 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	if want := []string{":1\r\n", "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n"}; !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	ts.meetMu.Lock()
	order := slices.Clone(ts.order)
	ts.meetMu.Unlock()
	if !slices.Equal(order, []string{"x/0"}) || x.ran.Load() != 0 {
		t.Fatalf("before EXEC, ran %q and GRANT %d times: queued commands started", order, x.ran.Load())
	}
	io.WriteString(conn, "EXEC\r\n")
	rep, err := readReply(r)
	if want := "*4\r\n:2\r\n*2\r\n$1\r\ng\r\n:1000\r\n:3\r\n+PONG\r\n"; rep != want || err != nil {
		t.Fatalf("EXEC: %q, %v; want %q", rep, err, want)
	}
	ts.meetMu.Lock()
	defer ts.meetMu.Unlock()
	if !slices.Equal(ts.order, []string{"x/0", "a/1", "b/2"}) {
		t.Fatalf("ran %q", ts.order)
	}
}

// TestMultiClientList: CLIENT LIST shows multi=<queued> and flags=x in a
// transaction, multi=-1 outside.
func TestMultiClientList(t *testing.T) {
	ts := newTestServer(t, Options{})
	a := dialTest(t, ts.addr)
	ra := bufio.NewReader(a)
	io.WriteString(a, "CLIENT SETNAME tx\r\nMULTI\r\nECHO x\r\nPING\r\n")
	for range 4 {
		if _, err := ra.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	line := func() string {
		for _, l := range strings.Split(ts.client(t, redis.Options{}).ClientList(context.Background()).Val(), "\n") {
			if strings.Contains(l, " name=tx ") {
				return l
			}
		}
		t.Fatal("no client named tx")
		return ""
	}
	if l := line(); !strings.Contains(l, " flags=x ") || !strings.Contains(l, " multi=2 ") {
		t.Fatalf("in MULTI: %s", l)
	}
	io.WriteString(a, "EXEC\r\n")
	if _, err := readReply(ra); err != nil {
		t.Fatal(err)
	}
	if l := line(); !strings.Contains(l, " flags=N ") || !strings.Contains(l, " multi=-1 ") || !strings.Contains(l, " cmd=exec ") {
		t.Fatalf("after EXEC: %s", l)
	}
}

// TestMultiObserved: a queued command is reported when EXEC runs it,
// under its own name and with the result of its final reply (a Late grant
// computed); one refused at queue time is reported with its error.
func TestMultiObserved(t *testing.T) {
	o := &recorder{}
	ts, _ := newTxServer(t, Options{Observer: o})
	session(t, ts.addr, "MULTI", "ECHO a", "SELECT 1", "GRANT r", "EXEC", "MULTI", "ECHO", "EXEC")
	want := []string{"multi ok ", "echo ok ", "select error ERR", "grant granted ", "exec ok ",
		"multi ok ", "echo error ERR", "exec error EXECABORT"}
	if got := o.take(); !slices.Equal(got, want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
	if n := ts.srv.totalCmd.Load(); n != int64(len(want)) {
		t.Fatalf("total_commands_processed %d, want %d", n, len(want))
	}
}
