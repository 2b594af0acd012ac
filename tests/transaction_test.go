package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTransactionGoRedis: go-redis's TxPipelined (MULTI ... EXEC) with
// lock commands, in RESP2 and RESP3, with and without drop-in mode: the
// grants and releases come back as EXEC's elements, a held resource is a
// nil element, a refused command aborts the whole transaction and
// nothing of it reaches the masters.
func TestTransactionGoRedis(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	plain := startProxy(t, defaults(cl.addrs()))
	cfg := defaults(cl.addrs())
	cfg.extra = "dropin: true\n"
	dropin := startProxy(t, cfg)
	ctx := context.Background()
	for _, v := range []struct {
		name  string
		p     *Proxy
		proto int
	}{{"resp2", plain, 2}, {"resp3", plain, 3}, {"dropin resp3", dropin, 3}} {
		t.Run(v.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: v.p.Addr, Protocol: v.proto, MaxRetries: -1})
			defer c.Close()
			a, b := "tx:"+v.name+":a", "tx:"+v.name+":b"
			var la, lb, again *redis.Cmd
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				la = p.Do(ctx, "RLOCK", a, 10000)
				lb = p.Do(ctx, "RLOCK", b, 10000)
				again = p.Do(ctx, "RLOCK", a, 10000)
				return nil
			})
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("TxPipelined: %v", err)
			}
			ta, tb := grantOf(t, la), grantOf(t, lb)
			if err := again.Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("RLOCK of a resource the transaction took: %v %v, want nil", again.Val(), err)
			}
			if n := cl.holders(a, ta); n < 2 {
				t.Fatalf("%s held on %d masters", a, n)
			}
			var ua, ub *redis.Cmd
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				ua = p.Do(ctx, "RUNLOCK", a, ta)
				ub = p.Do(ctx, "RUNLOCK", b, tb)
				return nil
			}); err != nil {
				t.Fatalf("TxPipelined RUNLOCK: %v", err)
			}
			if ua.Val() != int64(1) || ub.Val() != int64(1) {
				t.Fatalf("RUNLOCK in EXEC: %v %v", ua.Val(), ub.Val())
			}
			cl.expectNoLocks(t)

			// A command refused when queued: EXECABORT, nothing runs.
			_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "RLOCK", a, 10000)
				p.Do(ctx, "RLOCK", b) // arity
				return nil
			})
			if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
				t.Fatalf("TxPipelined with a bad command: %v, want EXECABORT", err)
			}
			_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "RLOCK", a, 10000)
				p.Do(ctx, "HSET", "h", "f", "v") // unknown (drop-in: not a lock operation)
				return nil
			})
			if err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
				t.Fatalf("TxPipelined with an unknown command: %v, want EXECABORT", err)
			}
			cl.expectNoLocks(t)

			if err := c.Watch(ctx, func(*redis.Tx) error { return nil }, a); err == nil || !strings.Contains(err.Error(), "WATCH is not supported") {
				t.Fatalf("WATCH: %v", err)
			}
		})
	}
}

// grantOf decodes an RLOCK reply read inside a transaction: its token.
func grantOf(t *testing.T, c *redis.Cmd) string {
	t.Helper()
	arr, err := c.Slice()
	if err != nil || len(arr) != 3 {
		t.Fatalf("RLOCK in EXEC: %v, %v", arr, err)
	}
	tok, _ := arr[0].(string)
	if v, _ := arr[1].(int64); tok == "" || v <= 0 || v > 10000 {
		t.Fatalf("RLOCK in EXEC: %v", arr)
	}
	return tok
}

// redisPyPipeline is redis-py's default pipeline() (transactional: MULTI
// ... EXEC), with lock commands sent through execute_command.
const redisPyPipeline = `
import sys, redis
r = redis.Redis(port=int(sys.argv[1]), decode_responses=True)
p = r.pipeline()
p.execute_command('RLOCK', 'py:a', '10000')
p.execute_command('RLOCK', 'py:b', '10000')
p.execute_command('RLOCK', 'py:a', '10000')
ga, gb, again = p.execute()
assert again is None, again
print(ga[0], gb[0])
sys.stdout.flush()
sys.stdin.readline()  # the test looks at the masters meanwhile
p = r.pipeline()
p.execute_command('RUNLOCK', 'py:a', ga[0])
p.execute_command('RUNLOCK', 'py:b', gb[0])
print(p.execute())
p = r.pipeline()
p.execute_command('RLOCK', 'py:a', '10000')
p.execute_command('RLOCK', 'py:b')
try:
    p.execute()
    print('no error')
except redis.exceptions.ResponseError as e:
    # redis-py raises the queued command's error in place of EXECABORT.
    print(type(e).__name__, "wrong number of arguments for 'rlock' command" in str(e))
`

// TestTransactionRedisPy: redis-py's default pipeline() with RLOCK and
// RUNLOCK: the grants and releases come back, and a bad command aborts
// the transaction with nothing taken.
func TestTransactionRedisPy(t *testing.T) {
	busy(t)
	python := requirePython(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	_, port, _ := strings.Cut(p.Addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", redisPyPipeline, port)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("redis-py: %v\n%s", err, stderr.String())
	}
	var ta, tb string
	if _, err := fmt.Sscan(line, &ta, &tb); err != nil {
		t.Fatalf("redis-py printed %q", line)
	}
	if cl.holders("py:a", ta) < 2 || cl.holders("py:b", tb) < 2 {
		t.Fatalf("the pipeline's locks are not on a quorum: %d, %d", cl.holders("py:a", ta), cl.holders("py:b", tb))
	}
	io.WriteString(stdin, "\n")
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("redis-py: %v\n%s%s", err, rest, stderr.String())
	}
	if want := "[1, 1]\nResponseError True\n"; string(rest) != want {
		t.Fatalf("redis-py printed %q, want %q\n%s", rest, want, stderr.String())
	}
	cl.expectNoLocks(t)
}

// TestTransactionHangUp: a client that hangs up while its EXEC runs (here
// waiting in a queued RLOCK ... WAIT on a resource another client holds)
// gets nothing: the lock the transaction took before it is given back,
// the waiting one ends, and no key of it is left on any master.
func TestTransactionHangUp(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	p := startProxy(t, defaults(cl.addrs()))
	holder := p.Client()
	held, ok := rlock(t, holder, "hang:held", 60000)
	if !ok {
		t.Fatal("hang:held not granted")
	}
	conn, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, "MULTI\r\nRLOCK hang:taken 60000\r\nRLOCK hang:held 60000 WAIT 60000\r\nRLOCK hang:after 60000\r\nEXEC\r\n")
	r := bufio.NewReader(conn)
	for i, want := range []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "+QUEUED\r\n"} {
		if l, err := r.ReadString('\n'); l != want || err != nil {
			t.Fatalf("reply %d: %q, %v; want %q", i, l, err, want)
		}
	}
	waitFor(t, 10*time.Second, "the EXEC to wait in RLOCK hang:held", func() bool {
		return strings.Contains(do(t, holder, "INFO", "clients").(string), "blocked_clients:1")
	})
	if keys := cl.lockKeys(t); !containsPrefix(keys, "hang:taken") {
		t.Fatalf("hang:taken was not taken before the EXEC waited: %v", keys)
	}
	conn.Close()
	waitFor(t, 10*time.Second, "the EXEC to end", func() bool {
		return strings.Contains(do(t, holder, "INFO", "clients").(string), "blocked_clients:0")
	})
	waitFor(t, 5*time.Second, "the transaction's locks to be given back", func() bool {
		keys := cl.lockKeys(t)
		return !containsPrefix(keys, "hang:taken") && !containsPrefix(keys, "hang:after")
	})
	if v := do(t, holder, "RUNLOCK", "hang:held", held.token); v != int64(1) {
		t.Fatalf("RUNLOCK hang:held: %v", v)
	}
	cl.expectNoLocks(t)
}

// containsPrefix reports whether some lock key (as lockKeys names them,
// "master<i>:<key>") is for a resource starting with prefix.
func containsPrefix(keys []string, prefix string) bool {
	for _, k := range keys {
		if _, key, _ := strings.Cut(k, ":"); strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}
