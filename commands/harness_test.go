package commands

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// harness serves the real command table over a fake engine on a
// 127.0.0.1:0 listener, with the dispatch of package proxy: arity, the
// reply or the mapped error (MapError), Late replies.
type harness struct {
	eng  *fakeEngine
	srv  *proxy.Server
	addr string
}

// harnessLimits are the limits every harness serves with.
var harnessLimits = Limits{MaxTTL: time.Hour, MaxWait: 5 * time.Minute, MaxLatchCount: 1024, MaxAutoExtend: 2}

func newHarness(t *testing.T, eng *fakeEngine, lim Limits) *harness {
	t.Helper()
	cmds, info := AllWithInfo(eng.engine(), lim)
	unknown := PlainUnknown()
	if lim.DropIn {
		unknown = DropinUnknown
	}
	srv, err := proxy.New(proxy.Options{
		Commands: cmds, MapError: MapError, Unknown: unknown,
		Info: append([]proxy.InfoSection{MastersInfo(eng.engine())}, info...),
		Auth: proxy.Auth{DefaultAdmin: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	return &harness{eng: eng, srv: srv, addr: ln.Addr().String()}
}

// client is one connection to the harness speaking protocol proto (2 or
// 3), read and written by the test goroutine only.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (h *harness) dial(t *testing.T, proto int) *client {
	t.Helper()
	conn, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	c := &client{t: t, conn: conn, r: bufio.NewReader(conn)}
	if proto == 3 {
		if hello := c.do("HELLO", "3"); !strings.HasPrefix(hello, "%") {
			t.Fatalf("HELLO 3 answered %q", hello)
		}
	}
	return c
}

// send writes one command, not waiting for its reply.
func (c *client) send(args ...string) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.conn, b.String()); err != nil {
		c.t.Fatalf("sending %q: %v", args, err)
	}
}

// do sends one command and returns its reply (see read).
func (c *client) do(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return c.read()
}

// read reads one reply: its RESP lines, without their CRLF, joined by
// spaces ("*3 $3 tok :9998 :7"), so that a test compares the exact bytes
// of the wire in one readable string.
func (c *client) read() string {
	c.t.Helper()
	var out []string
	if err := readValue(c.r, &out); err != nil {
		c.t.Fatalf("reading a reply: %v (so far %q)", err, out)
	}
	return strings.Join(out, " ")
}

func readValue(r *bufio.Reader, out *[]string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSuffix(line, "\r\n")
	*out = append(*out, line)
	if line == "" {
		return fmt.Errorf("empty line")
	}
	switch line[0] {
	case '$', '=', '!':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, string(buf[:n]))
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := readValue(r, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// matches reports whether a reply read by read is want, where the word
// "V" in want stands for an integer reply that is a validity of the fake
// engine's 10 s leases (5000 to 10000 ms).
func matches(got, want string) bool {
	if !strings.Contains(want, ":V") {
		return got == want
	}
	g, w := strings.Split(got, " "), strings.Split(want, " ")
	if len(g) != len(w) {
		return false
	}
	for i := range w {
		if w[i] != ":V" {
			if g[i] != w[i] {
				return false
			}
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(g[i], ":"))
		if !strings.HasPrefix(g[i], ":") || err != nil || n < 5000 || n > 10000 {
			return false
		}
	}
	return true
}
