package proxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	noauth    = "-NOAUTH Authentication required.\r\n"
	wrongpass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	noperm    = "-NOPERM No permissions to access a key\r\n"
)

// converse sends each command on one connection and reads one reply line
// for each.
func converse(t *testing.T, addr string, cmds ...string) []string {
	t.Helper()
	conn := dialTest(t, addr)
	defer conn.Close()
	r := bufio.NewReader(conn)
	var out []string
	for _, c := range cmds {
		io.WriteString(conn, c+"\r\n")
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reply to %q: %v (so far %q)", c, err, out)
		}
		out = append(out, line)
		if err := skipRest(r, line); err != nil {
			t.Fatalf("reply to %q: %v", c, err)
		}
	}
	return out
}

// skipRest reads the rest of a reply whose first line is line.
func skipRest(r *bufio.Reader, line string) error {
	n := 0
	switch line[0] {
	case '$':
		if line[1] != '-' {
			_, err := r.ReadString('\n')
			return err
		}
		return nil
	case '*', '~':
		n = parseN(line[1:])
	case '%':
		n = 2 * parseN(line[1:])
	}
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if err := skipRest(r, l); err != nil {
			return err
		}
	}
	return nil
}

func parseN(s string) int {
	n, _ := ParseInt([]byte(strings.TrimSpace(s)))
	return int(n)
}

func TestAuthMatrix(t *testing.T) {
	open := newTestServer(t, Options{})
	pass := newTestServer(t, Options{Auth: Auth{Password: "s3cret"}})
	users := newTestServer(t, Options{Auth: Auth{Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
		{Name: "ops", PasswordSHA256: sha256.Sum256([]byte("opw")), Resources: []string{"*"}},
	}}})
	both := newTestServer(t, Options{Auth: Auth{Password: "s3cret", Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
	}}})
	tests := []struct {
		name string
		ts   *testServer
		cmds []string
		want []string
	}{
		{"no auth: served", open, []string{"TOUCH a", "ECHO x"}, []string{"+OK\r\n", "$1\r\n"}},
		{"no auth: AUTH pass", open, []string{"AUTH x"}, []string{"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"}},
		{"no auth: AUTH default any", open, []string{"AUTH default x", "TOUCH a"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"no auth: AUTH other user", open, []string{"AUTH bob x"}, []string{wrongpass}},
		{"password: missing", pass, []string{"TOUCH a", "ECHO x", "CLIENT ID", "RESET", "PING", "HELLO 3"},
			[]string{noauth, noauth, noauth, noauth, "+PONG\r\n", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"}},
		{"password: wrong", pass, []string{"AUTH nope", "TOUCH a", "AUTH default nope"}, []string{wrongpass, noauth, wrongpass}},
		{"password: right", pass, []string{"AUTH s3cret", "TOUCH a"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"password: right with user", pass, []string{"AUTH default s3cret", "TOUCH a"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"password: HELLO 2 AUTH", pass, []string{"HELLO 2 AUTH default s3cret", "TOUCH a"}, []string{"*14\r\n", "+OK\r\n"}},
		{"password: HELLO 3 AUTH", pass, []string{"HELLO 3 AUTH default s3cret", "TOUCH a"}, []string{"%7\r\n", "+OK\r\n"}},
		{"password: HELLO AUTH wrong", pass, []string{"HELLO 3 AUTH default x", "TOUCH a"}, []string{wrongpass, noauth}},
		{"password: failed AUTH keeps the user", pass, []string{"AUTH s3cret", "AUTH wrong", "TOUCH a"}, []string{"+OK\r\n", wrongpass, "+OK\r\n"}},
		{"password: RESET logs out", pass, []string{"AUTH s3cret", "RESET", "TOUCH a"}, []string{"+OK\r\n", "+RESET\r\n", noauth}},
		{"users: no default user", users, []string{"AUTH bpw", "AUTH default bpw"}, []string{wrongpass, wrongpass}},
		{"users: inside namespace", users, []string{"AUTH billing bpw", "TOUCH billing:1 billing:2"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"users: outside namespace", users, []string{"AUTH billing bpw", "TOUCH orders:1", "TOUCH billing:1 orders:1", "TOUCH billing"},
			[]string{"+OK\r\n", noperm, noperm, noperm}},
		{"users: wrong user's password", users, []string{"AUTH billing opw", "TOUCH billing:1"}, []string{wrongpass, noauth}},
		{"users: unknown user", users, []string{"AUTH nobody bpw"}, []string{wrongpass}},
		{"users: all resources", users, []string{"AUTH ops opw", "TOUCH orders:1"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"users: switch user", users, []string{"AUTH ops opw", "AUTH billing bpw", "TOUCH orders:1"}, []string{"+OK\r\n", "+OK\r\n", noperm}},
		{"users: HELLO 3 AUTH", users, []string{"HELLO 3 AUTH billing bpw", "TOUCH orders:1"}, []string{"%7\r\n", noperm}},
		{"both: default user", both, []string{"AUTH s3cret", "TOUCH orders:1"}, []string{"+OK\r\n", "+OK\r\n"}},
		{"both: named user", both, []string{"AUTH billing bpw", "TOUCH orders:1"}, []string{"+OK\r\n", noperm}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.ts.touched.Load()
			got := converse(t, tt.ts.addr, tt.cmds...)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Fatalf("reply %d to %q: got %q, want %q", i, tt.cmds[i], got[i], tt.want[i])
				}
			}
			ok := 0
			for i, c := range tt.cmds {
				if strings.HasPrefix(c, "TOUCH") && got[i] == "+OK\r\n" {
					ok++
				}
			}
			if n := tt.ts.touched.Load() - before; n != int64(ok) {
				t.Fatalf("handler ran %d times for %d allowed commands", n, ok)
			}
		})
	}
	if got := users.srv.authFailures.Load(); got != 4 {
		t.Errorf("auth failures counted on the users server: %d, want 4", got)
	}
}

// TestAuthGoRedis: go-redis's usual options (Username/Password, RESP2 and
// RESP3) authenticate in its handshake.
func TestAuthGoRedis(t *testing.T) {
	ts := newTestServer(t, Options{Auth: Auth{Password: "s3cret", Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
	}}})
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := ts.client(t, redis.Options{Protocol: proto, Username: "billing", Password: "bpw"})
		if err := c.Do(ctx, "TOUCH", "billing:1").Err(); err != nil {
			t.Fatalf("RESP%d: %v", proto, err)
		}
		if err := c.Do(ctx, "TOUCH", "orders:1").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Fatalf("RESP%d: outside the namespace: %v", proto, err)
		}
		d := ts.client(t, redis.Options{Protocol: proto, Password: "s3cret"})
		if err := d.Do(ctx, "TOUCH", "orders:1").Err(); err != nil {
			t.Fatalf("RESP%d default user: %v", proto, err)
		}
		w := ts.client(t, redis.Options{Protocol: proto, Username: "billing", Password: "wrong", MaxRetries: -1})
		if err := w.Do(ctx, "PING").Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("RESP%d wrong password: %v", proto, err)
		}
	}
}

// TestPreAuthLimits: before authentication a client may send no more than
// Redis allows an unauthenticated one.
func TestPreAuthLimits(t *testing.T) {
	ts := newTestServer(t, Options{Auth: Auth{Password: "s3cret"}})
	got := raw(t, ts.addr, "*11\r\n", 1)
	if got[0] != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("got %q", got)
	}
	got = raw(t, ts.addr, "*2\r\n$4\r\nAUTH\r\n$20000\r\n", 1)
	if got[0] != "-ERR Protocol error: unauthenticated bulk length\r\n" {
		t.Fatalf("got %q", got)
	}
	// After AUTH, the configured limits apply.
	big := strings.Repeat("x", 20000)
	got = raw(t, ts.addr, "AUTH s3cret\r\n*2\r\n$4\r\nECHO\r\n$20000\r\n"+big+"\r\n", 2)
	if got[0] != "+OK\r\n" || got[1] != "$20000\r\n" {
		t.Fatalf("got %q", got)
	}
}

// TestProtocolErrorCloses: a request over the limits is answered with a
// protocol error and the connection is closed; others carry on.
func TestProtocolErrorCloses(t *testing.T) {
	ts := newTestServer(t, Options{Limits: Limits{MaxArgs: 16, MaxArgBytes: 1024}})
	for _, send := range []string{
		"*17\r\n", "*2\r\n$4\r\nECHO\r\n$1025\r\n", "*1\r\n$1073741824\r\n", "*1000000\r\n",
		strings.Repeat("x", 70<<10), "*1\r\n+PING\r\n",
	} {
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(conn, send)
		b, err := io.ReadAll(conn) // ends only when the proxy closes the connection
		conn.Close()
		if err != nil || !strings.HasPrefix(string(b), "-ERR Protocol error: ") || strings.Count(string(b), "\r\n") != 1 {
			t.Fatalf("%.40q: got %q, %v; want one protocol error, then the connection closed", send, b, err)
		}
	}
	if got := raw(t, ts.addr, "PING\r\n", 1); got[0] != "+PONG\r\n" {
		t.Fatalf("server after protocol errors: %q", got)
	}
}

// TestSlowClientsCut: a command trickling in is cut after RequestTimeout
// whatever its pace; an idle connection after IdleTimeout; a connection
// that keeps sending whole commands is not.
func TestSlowClientsCut(t *testing.T) {
	ts := newTestServer(t, Options{RequestTimeout: 300 * time.Millisecond, IdleTimeout: 600 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedAfter := func(c net.Conn) time.Duration {
		t0 := time.Now()
		c.SetReadDeadline(t0.Add(5 * time.Second))
		_, err := io.ReadAll(c)
		// A reset is the server's close too: the slowloris writes a byte
		// after the server closed, and the server's kernel answers RST,
		// which may reach the reader before the FIN does.
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection not closed by the server: %v", err)
		}
		return time.Since(t0)
	}
	// Slowloris: one byte every 100ms, never a whole command.
	slow := dial()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		msg := "*3\r\n$5\r\nRLOCK\r\n$1\r\nr\r\n$5\r\n10000\r\n"
		for i := 0; i < len(msg); i++ {
			if _, err := slow.Write([]byte{msg[i]}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	if d := closedAfter(slow); d > 2*time.Second {
		t.Fatalf("slowloris cut after %v", d)
	}
	idle := dial()
	if d := closedAfter(idle); d < 500*time.Millisecond {
		t.Fatalf("idle connection cut after %v, before its idle timeout", d)
	}
	// Whole commands more often than the idle timeout keep a connection.
	busy := dial()
	r := bufio.NewReader(busy)
	for range 8 {
		io.WriteString(busy, "PING\r\n")
		if l, err := r.ReadString('\n'); err != nil || l != "+PONG\r\n" {
			t.Fatalf("busy connection: %q %v", l, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	busy.Close() // before its idle timeout: it is not counted
	// A client that pipelines commands and never reads a reply: once the
	// socket buffers are full the proxy cannot write, and cuts it.
	deaf := dial()
	werr := make(chan error, 1)
	go func() {
		chunk := []byte(strings.Repeat("PING\r\n", 10000))
		for {
			deaf.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := deaf.Write(chunk); err != nil {
				werr <- err
				return
			}
		}
	}()
	if err := <-werr; errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a client that never reads was not cut off")
	}
	if n := ts.srv.timedOut.Load(); n != 3 {
		t.Fatalf("timed-out connections: %d, want 3", n)
	}
}

// FuzzCommands: any arguments to any built-in command (the handshake,
// AUTH, HELLO, CLIENT, COMMAND, INFO ...), authenticated or not, get a
// reply or a clear error, never a panic (which dispatch would turn into
// "internal error").
func FuzzCommands(f *testing.F) {
	for _, s := range []string{
		"HELLO\x003\x00AUTH\x00billing\x00bpw", "HELLO\x002\x00SETNAME\x00x", "AUTH\x00a\x00b\x00c",
		"CLIENT\x00SETINFO\x00LIB-NAME\x00x", "CLIENT\x00LIST\x00ID\x001", "COMMAND\x00DOCS\x00rlock",
		"COMMAND\x00INFO", "INFO\x00masters\x00server", "SELECT\x00-1", "PING\x00x", "CLIENT\x00TRACKING\x00on",
		"TOUCH\x00billing:1\x00x",
	} {
		f.Add(s, false)
	}
	srv, err := New(Options{Auth: Auth{Password: "pw", Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
	}}, Commands: []*Command{{Name: "touch", Arity: -2, FirstKey: 1, LastKey: -1, Step: 1,
		Handler: func(context.Context, *Session, [][]byte) (any, error) { return OK, nil }}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cmd string, authed bool) {
		var args [][]byte
		for _, a := range strings.Split(cmd, "\x00") {
			args = append(args, []byte(a))
		}
		if len(args[0]) == 0 {
			return
		}
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		sess := &Session{id: 1, srv: srv, nc: a, cc: &clientConn{Conn: a}, proto: 2, ctx: context.Background()}
		if authed {
			sess.user = srv.users.byName["billing"]
		}
		var rec record
		reply, err := srv.handle(sess, args, &rec, false)
		if err != nil {
			if e := srv.mapError(err); e.Msg == "internal error" {
				t.Fatalf("%q: internal error (a panic or an unmapped error): %v", args, err)
			}
			return
		}
		appendReply(nil, reply, 3)
		appendReply(nil, reply, 2)
	})
}

// refMatch is a plain recursive reading of Redis's glob rules, to check
// globMatch (iterative, for hostile patterns) against.
func refMatch(p string, s []byte) bool {
	if p == "" {
		return len(s) == 0
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if refMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return len(s) > 0 && refMatch(p[1:], s[1:])
	case '[':
		if len(s) == 0 {
			return false
		}
		end, ok := matchClass(p, 0, s[0])
		return ok && refMatch(p[end:], s[1:])
	case '\\':
		if len(p) >= 2 {
			return len(s) > 0 && s[0] == p[1] && refMatch(p[2:], s[1:])
		}
	}
	return len(s) > 0 && s[0] == p[0] && refMatch(p[1:], s[1:])
}

// FuzzGlob: resource patterns decide what a user may lock; globMatch must
// agree with the plain reading of the rules.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"billing:*", "billing:1"}, {"a[^b-d]?\\*", "axy*"}, {"*a*b", "aab"}, {"[", "["}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 12 || len(s) > 24 {
			return // the reference is exponential
		}
		if got, want := globMatch(p, []byte(s)), refMatch(p, []byte(s)); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, reference %v", p, s, got, want)
		}
	})
}

// TestChannelPermissions: a user subscribes to and publishes on only the
// channels its patterns allow (its resources' by default, or its own
// channels list), a pattern subscription only within them; anything else
// answers NOPERM before the handler runs.
func TestChannelPermissions(t *testing.T) {
	const nopermChannel = "-NOPERM No permissions to access a channel\r\n"
	open := newTestServer(t, Options{})
	ts := newTestServer(t, Options{Auth: Auth{Users: []User{
		{Name: "billing", PasswordSHA256: sha256.Sum256([]byte("bpw")), Resources: []string{"billing:*"}},
		{Name: "shop", PasswordSHA256: sha256.Sum256([]byte("spw")), Resources: []string{"shop:*"}},
		{Name: "ops", PasswordSHA256: sha256.Sum256([]byte("opw")), Resources: []string{"*"}, Channels: []string{"events:*"}},
		{Name: "mute", PasswordSHA256: sha256.Sum256([]byte("mpw")), Resources: []string{"*"}, Channels: []string{}},
	}}})
	const sub = "*3\r\n"
	for _, tt := range []struct {
		name string
		ts   *testServer
		cmds []string
		want []string
	}{
		{"own channel", ts, []string{"AUTH billing bpw", "SUBSCRIBE billing:chan"}, []string{"+OK\r\n", sub}},
		{"other tenant's channel", ts, []string{"AUTH billing bpw", "SUBSCRIBE shop:chan", "SUBSCRIBE billing:a shop:b"}, []string{"+OK\r\n", nopermChannel, nopermChannel}},
		{"publish on another tenant's channel", ts, []string{"AUTH billing bpw", "PUBLISH shop:chan forged", "PUBLISH billing:nobody-listens x"}, []string{"+OK\r\n", nopermChannel, ":0\r\n"}},
		{"every channel", ts, []string{"AUTH billing bpw", "PSUBSCRIBE *"}, []string{"+OK\r\n", nopermChannel}},
		{"pattern equal to the user's", ts, []string{"AUTH billing bpw", "PSUBSCRIBE billing:*"}, []string{"+OK\r\n", sub}},
		{"pattern within the user's", ts, []string{"AUTH billing bpw", "PSUBSCRIBE billing:orders:[ab]*"}, []string{"+OK\r\n", sub}},
		{"pattern reaching outside", ts, []string{"AUTH billing bpw", "PSUBSCRIBE bil?ing:*", "PSUBSCRIBE b*", "PSUBSCRIBE billing\\:*"}, []string{"+OK\r\n", nopermChannel, nopermChannel, nopermChannel}},
		{"channels list, not resources", ts, []string{"AUTH ops opw", "PUBLISH ops:x m", "PUBLISH events:nobody-listens m", "SUBSCRIBE events:a"}, []string{"+OK\r\n", nopermChannel, ":0\r\n", sub}},
		{"empty channels list", ts, []string{"AUTH mute mpw", "PUBLISH a m", "SUBSCRIBE a"}, []string{"+OK\r\n", nopermChannel, nopermChannel}},
		{"no auth: every channel", open, []string{"PUBLISH nobody-listens m", "PSUBSCRIBE *"}, []string{":0\r\n", sub}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := converse(t, tt.ts.addr, tt.cmds...)
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Fatalf("reply %d to %q: got %q, want %q", i, tt.cmds[i], got[i], tt.want[i])
				}
			}
		})
	}
}

// TestPatternWithin: a pattern subscription is allowed where every
// channel it matches is matched by an allowed pattern.
func TestPatternWithin(t *testing.T) {
	for _, tc := range []struct {
		p, a string
		want bool
	}{
		{"billing:*", "billing:*", true},
		{"billing:orders:*", "billing:*", true},
		{"billing:[ab]?", "billing:*", true},
		{"billing:", "billing:*", true},
		{"*", "*", true},
		{"any[thing]?*", "*", true},
		{"b*", "billing:*", false},
		{"bil?ing:*", "billing:*", false},
		{"billing\\:*", "billing:*", false},
		{"*", "billing:*", false},
		{"billing:x", "billing:x", true},
		{"billing:x*", "billing:x", false},
		{"billing:a*", "billing:[ab]*", false}, // sound, not complete: only literal prefixes
		{"shop:*", "billing:*", false},
	} {
		if got := patternWithin(tc.p, tc.a); got != tc.want {
			t.Errorf("patternWithin(%q, %q) = %v, want %v", tc.p, tc.a, got, tc.want)
		}
	}
}
