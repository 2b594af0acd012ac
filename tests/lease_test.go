package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// rawConn is a client connection driven by hand, to see RESP3 pushes.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, rd: bufio.NewReader(c)}
}

// send writes one command.
func (r *rawConn) send(args ...string) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(r.c, b.String()); err != nil {
		r.t.Fatal(err)
	}
}

// read reads one reply as a flat list of its lines' values: "+OK" ->
// ["+OK"], an array or push -> its header then its elements.
func (r *rawConn) read(d time.Duration) ([]string, error) {
	r.c.SetReadDeadline(time.Now().Add(d))
	line, err := r.rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '$':
		var n int
		fmt.Sscanf(line[1:], "%d", &n)
		if n < 0 {
			return []string{"nil"}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.rd, buf); err != nil {
			return nil, err
		}
		return []string{string(buf[:n])}, nil
	case '*', '>', '%':
		var n int
		fmt.Sscanf(line[1:], "%d", &n)
		if line[0] == '%' {
			n *= 2
		}
		out := []string{line}
		for range n {
			e, err := r.read(d)
			if err != nil {
				return nil, err
			}
			out = append(out, e...)
		}
		return out, nil
	}
	return []string{line}, nil
}

// TestAutoExtendKeepsAlive: an AUTOEXTEND lock with a 1 s ttl stays held
// for 5 s (5 ttls) with no client traffic, RLOCKINFO says so, and RUNLOCK ends it.
// Every acquire takes AUTOEXTEND; a connection keeps at most
// limits.max_autoextend_per_conn.
func TestAutoExtendKeepsAlive(t *testing.T) {
	waits(t) // mostly waits (expiries, retries, restarts): overlaps the other waiting tests
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.limitsExtra = "  max_autoextend_per_conn: 5\n"
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	b := pb.Client()
	owner := redis.NewClient(&redis.Options{Addr: pa.Addr, PoolSize: 1, MaxRetries: -1})
	defer owner.Close()
	g, ok := rlock(t, owner, "kept", 1000, "AUTOEXTEND")
	if !ok {
		t.Fatal("RLOCK AUTOEXTEND")
	}
	for range 5 {
		time.Sleep(time.Second)
		if _, ok := rlock(t, b, "kept", 1000); ok {
			t.Fatal("another client took an auto-extended lock")
		}
	}
	m := do(t, owner, "RLOCKINFO", "kept", g.token).(map[any]any)
	if m["held"] != int64(1) || m["mine"] != int64(1) || m["autoextend"] != int64(1) || m["ttl_ms"].(int64) > 1000 {
		t.Fatalf("RLOCKINFO of the kept lock: %v", m)
	}
	if m := do(t, b, "RLOCKINFO", "kept", g.token).(map[any]any); m["mine"] != int64(1) || m["autoextend"] != int64(0) {
		t.Fatalf("RLOCKINFO from another connection: %v", m)
	}
	if v := do(t, owner, "RUNLOCK", "kept", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	time.Sleep(1500 * time.Millisecond) // the extender would have renewed by now
	if m := do(t, b, "RLOCKINFO", "kept").(map[any]any); m["held"] != int64(0) {
		t.Fatalf("released lock still held: %v", m)
	}
	// Every acquire takes AUTOEXTEND, and the cap holds per connection.
	for _, args := range [][]any{
		{"RLOCK", "x1", 1000, "AUTOEXTEND"},
		{"RFAIRLOCK", "x2", 1000, "AUTOEXTEND"},
		{"RMULTILOCK", 1000, 2, "x3", "x4", "AUTOEXTEND"},
		{"RSEMACQUIRE", "x5", 2, 1000, "AUTOEXTEND"},
		{"RRLOCK", "x6", 1000, "AUTOEXTEND"},
	} {
		if v := do(t, owner, args...); v == nil {
			t.Fatalf("%v: nil", args)
		}
	}
	expectErr(t, owner, "ERR too many auto-extended leases", "RLOCK", "x7", 1000, "AUTOEXTEND")
	if _, ok := rlock(t, owner, "x7", 1000); !ok {
		t.Fatal("a lock without AUTOEXTEND is not capped")
	}
	time.Sleep(2 * time.Second)
	for _, r := range []string{"x1", "x2", "x3", "x4", "x6"} {
		if m := do(t, b, "RLOCKINFO", r).(map[any]any); m["held"] != int64(1) {
			t.Fatalf("%s lapsed: %v", r, m)
		}
	}
	if n := do(t, b, "RSEMCOUNT", "x5"); n != int64(1) {
		t.Fatalf("the auto-extended permit lapsed: %v", n)
	}
	// Closing the connection releases them all at once.
	owner.Close()
	waitFor(t, time.Second, "the leases released on disconnect", func() bool {
		for _, r := range []string{"x1", "x2", "x3", "x4", "x6"} {
			if do(t, b, "RLOCKINFO", r).(map[any]any)["held"] != int64(0) {
				return false
			}
		}
		return do(t, b, "RSEMCOUNT", "x5") == int64(0)
	})
}

// TestAutoExtendClientKilled: a client process (redis-py) killed with
// SIGKILL while it holds an AUTOEXTEND lock frees it at once: a waiter on
// the other proxy is granted in about a round trip, not after the ttl.
func TestAutoExtendClientKilled(t *testing.T) {
	busy(t)
	python := requirePython(t)
	cl := newCluster(t, 5)
	pa, pb := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	_, port, _ := strings.Cut(pa.Addr, ":")
	script := `import redis, sys, time
r = redis.Redis(port=int(sys.argv[1]))
print(r.execute_command("RLOCK", "job", 30000, "AUTOEXTEND")[0].decode(), flush=True)
time.sleep(600)
`
	cmd := exec.Command(python, "-c", script, port)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	token, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the client did not lock: %v", err)
	}
	token = strings.TrimSpace(token)
	b := pb.Client()
	got := make(chan time.Time, 1)
	go func() {
		g, ok, err := tryRlock(b, "job", 10000, "WAIT", 20000)
		if !ok || err != nil {
			t.Errorf("waiter: %v %v", ok, err)
		}
		if g.token == token {
			t.Errorf("the waiter got the dead client's token")
		}
		got <- time.Now()
	}()
	// The waiter subscribes on every master before it sleeps.
	cl.waitSubscribed(t, "redlock-proxy:released:job")
	if m := do(t, b, "RLOCKINFO", "job", token).(map[any]any); m["held"] != int64(1) || m["mine"] != int64(1) {
		t.Fatalf("the client's lock: %v", m)
	}
	killed := time.Now()
	cmd.Process.Kill()
	granted := <-got
	d := granted.Sub(killed)
	t.Logf("waiter on the other proxy granted %v after the client was killed (ttl 30 s)", d)
	if d > time.Second {
		t.Fatalf("the waiter waited %v after the kill", d)
	}
}

// TestAutoExtendLost: with 3 of 5 masters paused past the ttl, an
// AUTOEXTEND lease cannot be extended: the RESP3 connection gets
// ">3 lost <resource> <token>", the next command naming the resource
// answers -LOST once, RLOCKINFO then says not held, and another client
// is granted it, after the first grant's validity ended.
func TestAutoExtendLost(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	pa, pb := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	rc := dialRaw(t, pa.Addr)
	rc.send("HELLO", "3")
	if _, err := rc.read(time.Second); err != nil {
		t.Fatal(err)
	}
	rc.send("RLOCK", "fragile", "1000", "AUTOEXTEND")
	reply, err := rc.read(time.Second)
	if err != nil || len(reply) != 4 {
		t.Fatalf("RLOCK: %v %v", reply, err)
	}
	token := reply[1]
	var validity int64
	fmt.Sscanf(reply[2], ":%d", &validity)
	validUntil := time.Now().Add(time.Duration(validity) * time.Millisecond)
	for _, s := range cl.servers[:3] {
		s.Pause()
	}
	push, err := rc.read(3 * time.Second)
	if err != nil || len(push) != 4 || push[0] != ">3" || push[1] != "lost" || push[2] != "fragile" || push[3] != token {
		t.Fatalf("push: %q %v", push, err)
	}
	// validUntil is as the client sees it, a reply's delivery later than
	// the proxy's own reckoning.
	if time.Now().Before(validUntil.Add(-20 * time.Millisecond)) {
		t.Fatalf("lost reported %v before the validity ended", time.Until(validUntil))
	}
	// Meanwhile another proxy cannot tell anything about it (a read: an
	// acquire sent now would run late on the paused masters and hold
	// them, as any straggler, for its ttl).
	b := pb.Client()
	if err := b.Do(context.Background(), "RLOCKINFO", "fragile").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("RLOCKINFO with 3 of 5 masters paused: %v", err)
	}
	for _, s := range cl.servers[:3] {
		s.Resume()
	}
	rc.send("RLOCKINFO", "fragile", token)
	if r, err := rc.read(time.Second); err != nil || len(r) != 1 || r[0] != "-LOST fragile lease was not extended in time" {
		t.Fatalf("first command naming the lost resource: %q %v", r, err)
	}
	// The resumed masters first work through what queued up meanwhile,
	// extensions included, possibly against a clock that has not caught
	// up yet: the lost lease may look held for up to one more ttl, never
	// less held than it is.
	var r []string
	waitFor(t, 3*time.Second, "RLOCKINFO to say not held", func() bool {
		rc.send("RLOCKINFO", "fragile", token)
		r, err = rc.read(time.Second)
		switch {
		case err != nil:
			return true
		case len(r) == 1: // an error: -NOQUORUM while they catch up
			return !strings.HasPrefix(r[0], "-NOQUORUM")
		}
		return len(r) >= 3 && r[2] == ":0"
	})
	if err != nil || len(r) != 13 || r[1] != "held" || r[2] != ":0" || r[4] != ":-1" || r[6] != ":0" || r[8] != ":0" || r[9] != "waiters" || r[12] != ":0" {
		t.Fatalf("RLOCKINFO after -LOST: %q %v, want held 0, ttl_ms -1, mine 0, autoextend 0, waiters, place 0", r, err)
	}
	if _, ok, err := tryRlock(b, "fragile", 1000); !ok || err != nil {
		t.Fatalf("second client after the resume: %v %v", ok, err)
	}
	if at := time.Now(); at.Before(validUntil) {
		t.Fatalf("second client granted %v before the first grant's validity ended", validUntil.Sub(at))
	}
}

// TestAutoExtendPooledClients runs docs/clients.md's dedicated-connection
// snippets as written (go-redis Conn, redis-py client(), ioredis
// duplicate()): the lease is kept alive on that connection, RLOCKINFO
// there says autoextend 1, and RUNLOCK there releases it.
func TestAutoExtendPooledClients(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	_, port, _ := strings.Cut(p.Addr, ":")
	other := p.Client()
	ctx := context.Background()

	t.Run("go-redis", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
		defer rdb.Close()
		// docs/clients.md's snippet, with a check in the middle.
		conn := rdb.Conn()
		defer conn.Close()
		v, err := conn.Do(ctx, "RLOCK", "report", 30000, "AUTOEXTEND").Slice()
		if err != nil {
			t.Fatal(err)
		}
		if m := conn.Do(ctx, "RLOCKINFO", "report", v[0]).Val().(map[any]any); m["autoextend"] != int64(1) {
			t.Fatalf("RLOCKINFO on the dedicated connection: %v", m)
		}
		conn.Do(ctx, "RUNLOCK", "report", v[0])
		if m := do(t, other, "RLOCKINFO", "report").(map[any]any); m["held"] != int64(0) {
			t.Fatalf("after RUNLOCK: %v", m)
		}
	})
	t.Run("redis-py", func(t *testing.T) {
		python := requirePython(t)
		script := `import redis, sys
r = redis.Redis(port=int(sys.argv[1]))
c = r.client()
token = c.execute_command("RLOCK", "report", 30000, "AUTOEXTEND")[0]
info = c.execute_command("RLOCKINFO", "report", token)
assert info[info.index(b"autoextend") + 1] == 1, info
c.execute_command("RUNLOCK", "report", token)
c.close()
assert r.execute_command("RLOCKINFO", "report")[1] == 0
print("ok")
`
		runScript(t, python, "-c", script, port)
	})
	t.Run("ioredis", func(t *testing.T) {
		if _, err := exec.LookPath("node"); err != nil {
			skipOrFail(t, "node", "node is not installed")
		}
		if _, err := os.Stat("clients/node_modules/ioredis"); err != nil {
			skipOrFail(t, "node", "the Node.js clients are not installed (make clients)")
		}
		script := `const Redis = require("ioredis");
(async () => {
  const redis = new Redis({ port: Number(process.argv[1]) });
  const c = redis.duplicate();
  const [token] = await c.call("RLOCK", "report", 30000, "AUTOEXTEND");
  const info = await c.call("RLOCKINFO", "report", token);
  if (info[info.indexOf("autoextend") + 1] !== 1) throw new Error("RLOCKINFO " + info);
  await c.call("RUNLOCK", "report", token);
  c.disconnect();
  const after = await redis.call("RLOCKINFO", "report");
  if (after[1] !== 0) throw new Error("held after RUNLOCK: " + after);
  redis.disconnect();
  console.log("ok");
})().catch((e) => { console.error(e); process.exit(1); });
`
		runScript(t, "node", "-e", script, port)
	})
}

// TestAutoExtendHonoursClientExtension: a client's own REXTEND of an
// AUTOEXTEND lease on its connection is kept: the proxy extends with the
// longer ttl from then on instead of cutting it back.
func TestAutoExtendHonoursClientExtension(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	owner := redis.NewClient(&redis.Options{Addr: p.Addr, PoolSize: 1, MaxRetries: -1})
	defer owner.Close()
	g, ok := rlock(t, owner, "long", 600, "AUTOEXTEND")
	if !ok {
		t.Fatal("RLOCK AUTOEXTEND")
	}
	if v := do(t, owner, "REXTEND", "long", g.token, 60000).(int64); v < 59000 {
		t.Fatalf("REXTEND = %d", v)
	}
	// The keeper's next round asks for 60 s and comes about 20 s later
	// (a third of the ttl). One that kept the 600 ms ttl would come every
	// 200 ms and cut the key back within this second: a window in which
	// that must not be seen, not a wait for something to happen.
	time.Sleep(time.Second)
	if n := cl.ttlAbove("long", 50*time.Second); n < 2 {
		t.Fatalf("the lock's ttl was cut back after the client extended it to 60 s (%d masters above 50 s)", n)
	}
	do(t, owner, "RUNLOCK", "long", g.token)
}
