package tests

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// dropinProxies starts two proxies with dropin: true on 5 real masters.
func dropinProxies(t *testing.T) (*cluster, *Proxy, *Proxy) {
	t.Helper()
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.extra = "dropin: true\n"
	return cl, startProxy(t, cfg), startProxy(t, cfg)
}

// onQuorum waits until key holds value on at least 3 of the 5 masters.
func (c *cluster) onQuorum(t *testing.T, key, value string) {
	t.Helper()
	waitFor(t, time.Second, key+" held on a quorum of masters", func() bool { return c.holders(key, value) >= 3 })
}

// shapeScripts are lock scripts in the shapes lock libraries use, written
// for this test (the libraries' own scripts run unchanged in the drop-in
// corpus, make dropin): the proxy must recognise each by what it does.
var shapeScripts = map[string]string{
	// redis-py's Lock: release, extend (ARGV[3] "0" adds to the ttl left),
	// reacquire.
	"py/release": `local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0`,
	"py/extend": `local holder = redis.call('get', KEYS[1])
if not holder or holder ~= ARGV[1] then
  return 0
end
local left = redis.call('pttl', KEYS[1])
if not left then left = 0 end
if left < 0 then return 0 end
local ttl = ARGV[2]
if ARGV[3] == "0" then ttl = ARGV[2] + left end
redis.call('pexpire', KEYS[1], ttl)
return 1`,
	"py/reacquire": `if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end
redis.call("pexpire", KEYS[1], ARGV[2])
return 1`,
	// go-redsync v4: delete (three-way), touch, touch or take.
	"redsync/delete": `local cur = redis.call("GET", KEYS[1])
if cur == ARGV[1] then
  return redis.call("DEL", KEYS[1])
elseif cur == false then
  return -1
end
return 0`,
	"redsync/touch": `if ARGV[1] == redis.call("GET", KEYS[1]) then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
  return 0
end`,
	"redsync/touch_setnx": `if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
elseif redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") then
  return 1
else
  return 0
end`,
	// bsm/redislock: obtain (re-entrant, ttl in ARGV[3]), pttl, refresh,
	// release.
	"bsm/obtain": `if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("pexpire", KEYS[1], ARGV[3])
  return redis.status_reply("OK")
end
return redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3])`,
	"bsm/pttl": `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pttl", KEYS[1]) end
return -3`,
	"bsm/refresh": `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end
return 0`,
	"bsm/release": `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end
return 0`,
	// node-redlock: every key, all or none.
	"redlock/acquire": `for _, k in ipairs(KEYS) do
  if redis.call("exists", k) == 1 then return 0 end
end
for _, k in ipairs(KEYS) do
  redis.call("set", k, ARGV[1], "PX", ARGV[2])
end
return #KEYS`,
	"redlock/extend": `for _, k in ipairs(KEYS) do
  if redis.call("get", k) ~= ARGV[1] then return 0 end
end
for _, k in ipairs(KEYS) do
  redis.call("pexpire", k, ARGV[2])
end
return #KEYS`,
	"redlock/release": `local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("get", k) == ARGV[1] then
    redis.call("del", k)
    n = n + 1
  end
end
return n`,
	// Spring's RedisLockRegistry: obtain (re-entrant, true/false), renew,
	// unlock, unlock with a release message.
	"spring/obtain": `local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return true
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return true
end
return false`,
	"spring/renew": `if (redis.call('GET', KEYS[1]) == ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return true
end
return false`,
	"spring/unlock": `if (redis.call('GET', KEYS[1]) == ARGV[1]) then
  redis.call('UNLINK', KEYS[1])
  return true
end
return false`,
	"spring/pubsub_unlock": `if (redis.call('GET', KEYS[1]) == ARGV[1]) then
  redis.call('UNLINK', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return true
end
return false`,
}

// script returns a shape script's text and SHA1.
func script(t *testing.T, name string) (text, sha string) {
	t.Helper()
	text, ok := shapeScripts[name]
	if !ok {
		t.Fatalf("no script %s", name)
	}
	sum := sha1.Sum([]byte(text))
	return text, hex.EncodeToString(sum[:])
}

// TestDropinScripts feeds a script of every shape through EVAL, then
// EVALSHA, and checks the replies each library expects, and the masters.
func TestDropinScripts(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	a, b := pa.Client(), pb.Client()
	ctx := context.Background()
	// run sends the script by text to a proxy that has not seen it, by
	// SHA1 to one that has, alternating proxies.
	i := 0
	seen := map[*redis.Client]map[string]bool{a: {}, b: {}}
	run := func(name string, keys []string, args ...any) any {
		t.Helper()
		text, sha := script(t, name)
		c := []*redis.Client{a, b}[i%2]
		i++
		var v any
		var err error
		if seen[c][sha] {
			v, err = c.EvalSha(ctx, sha, keys, args...).Result()
		} else {
			v, err = c.Eval(ctx, text, keys, args...).Result()
		}
		if err == redis.Nil {
			err = nil
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seen[c][sha] = true
		return v
	}
	set := func(key, value string) {
		t.Helper()
		if v := do(t, a, "SET", key, value, "NX", "PX", 10000); v != "OK" {
			t.Fatalf("SET %s NX PX: %v", key, v)
		}
		cl.onQuorum(t, key, value)
	}
	for _, tc := range []struct {
		name   string
		keys   []string
		args   []any
		before func()
		want   any
		after  func()
	}{
		{"py/release", []string{"py"}, []any{"tok"}, func() { set("py", "tok") }, int64(1), func() { waitFor(t, time.Second, "released", func() bool { return cl.holders("py", "tok") == 0 }) }},
		{"py/release", []string{"py"}, []any{"tok"}, nil, int64(0), nil},
		{"py/extend", []string{"py2"}, []any{"tok", 20000, "1"}, func() { set("py2", "tok") }, int64(1), func() { expectTTLAbove(t, cl, "py2", 15*time.Second) }},
		{"py/extend", []string{"py2"}, []any{"tok", 5000, "0"}, nil, int64(1), func() { expectTTLAbove(t, cl, "py2", 21*time.Second) }},
		{"py/extend", []string{"py2"}, []any{"other", 5000, "0"}, nil, int64(0), nil},
		{"py/reacquire", []string{"py2"}, []any{"tok", 30000}, nil, int64(1), func() { expectTTLAbove(t, cl, "py2", 25*time.Second) }},
		{"redsync/touch", []string{"py2"}, []any{"tok", 40000}, nil, int64(1), func() { expectTTLAbove(t, cl, "py2", 35*time.Second) }},
		{"redsync/delete", []string{"py2"}, []any{"other"}, nil, int64(0), nil},
		{"redsync/delete", []string{"py2"}, []any{"tok"}, nil, int64(1), nil},
		{"redsync/delete", []string{"py2"}, []any{"tok"}, nil, int64(-1), nil},
		{"redsync/touch_setnx", []string{"rs"}, []any{"tok", 5000}, nil, int64(1), func() { cl.onQuorum(t, "rs", "tok") }},
		{"redsync/touch_setnx", []string{"rs"}, []any{"other", 5000}, nil, int64(0), nil},
		{"bsm/obtain", []string{"rs"}, []any{"other", 5, 5000}, nil, nil, nil},
		{"bsm/obtain", []string{"bsm"}, []any{"tokmeta", 3, 5000}, nil, "OK", func() { cl.onQuorum(t, "bsm", "tokmeta") }},
		{"bsm/pttl", []string{"bsm"}, []any{"tokmeta"}, nil, "ttl>0", nil},
		{"bsm/pttl", []string{"bsm"}, []any{"x"}, nil, int64(-3), nil},
		{"bsm/refresh", []string{"bsm"}, []any{"tokmeta", 20000}, nil, int64(1), func() { expectTTLAbove(t, cl, "bsm", 15*time.Second) }},
		{"bsm/release", []string{"bsm"}, []any{"tokmeta"}, nil, int64(1), nil},
		{"bsm/release", []string{"bsm"}, []any{"tokmeta"}, nil, int64(0), nil},
		{"redlock/acquire", []string{"n1", "n2", "rs"}, []any{"nv", 5000}, nil, int64(0), nil},
		{"redlock/acquire", []string{"n1", "n2"}, []any{"nv", 5000}, nil, int64(2), func() { cl.onQuorum(t, "n1", "nv"); cl.onQuorum(t, "n2", "nv") }},
		{"redlock/extend", []string{"n1", "n2"}, []any{"nv", 20000}, nil, int64(2), func() { expectTTLAbove(t, cl, "n2", 15*time.Second) }},
		{"redlock/extend", []string{"n1", "n2"}, []any{"x", 20000}, nil, int64(0), nil},
		{"redlock/release", []string{"n1", "n2"}, []any{"nv", 20000}, nil, int64(2), nil},
		{"spring/obtain", []string{"sp"}, []any{"client-1", 5000}, nil, int64(1), func() { cl.onQuorum(t, "sp", "client-1") }},
		{"spring/obtain", []string{"sp"}, []any{"client-2", 5000}, nil, nil, nil},
		{"spring/obtain", []string{"sp"}, []any{"client-1", 20000}, nil, int64(1), func() { expectTTLAbove(t, cl, "sp", 15*time.Second) }},
		{"spring/renew", []string{"sp"}, []any{"client-1", 30000}, nil, int64(1), func() { expectTTLAbove(t, cl, "sp", 25*time.Second) }},
		{"spring/renew", []string{"sp"}, []any{"client-2", 30000}, nil, nil, nil},
		{"spring/unlock", []string{"sp"}, []any{"client-2"}, nil, nil, nil},
		{"spring/unlock", []string{"sp"}, []any{"client-1"}, nil, int64(1), nil},
		{"spring/unlock", []string{"sp"}, []any{"client-1"}, nil, nil, nil},
		{"spring/obtain", []string{"sp"}, []any{"client-1", 5000}, nil, int64(1), nil},
		{"spring/pubsub_unlock", []string{"sp"}, []any{"client-1", "channel:sp"}, nil, int64(1), nil},
		{"spring/obtain", []string{"sp"}, []any{"client-1", 5000}, nil, int64(1), nil},
		{"spring/pubsub_unlock", []string{"sp"}, []any{"client-1", "channel:sp"}, nil, int64(1), nil},
	} {
		if tc.before != nil {
			tc.before()
		}
		v := run(tc.name, tc.keys, tc.args...)
		switch tc.want {
		case "ttl>0":
			if n, ok := v.(int64); !ok || n <= 0 {
				t.Fatalf("%s %v: %v, want a ttl", tc.name, tc.args, v)
			}
		default:
			if v != tc.want {
				t.Fatalf("%s %v: %#v, want %#v", tc.name, tc.args, v, tc.want)
			}
		}
		if tc.after != nil {
			tc.after()
		}
	}
	do(t, a, "DEL", "rs")
	// SCRIPT LOAD and EXISTS, for the libraries that load first.
	text, sha := script(t, "bsm/release")
	if v := do(t, b, "SCRIPT", "LOAD", text); v != sha {
		t.Fatalf("SCRIPT LOAD = %v, want %s", v, sha)
	}
	if v := do(t, b, "SCRIPT", "EXISTS", sha, "0000000000000000000000000000000000000000"); len(v.([]any)) != 2 || v.([]any)[0] != int64(1) || v.([]any)[1] != int64(0) {
		t.Fatalf("SCRIPT EXISTS = %v", v)
	}
	cl.expectOnlyFences(t)
}

func expectTTLAbove(t *testing.T, cl *cluster, key string, d time.Duration) {
	t.Helper()
	waitFor(t, time.Second, key+"'s ttl above "+d.String()+" on a quorum", func() bool { return cl.ttlAbove(key, d) >= 3 })
}

// TestDropinPlainCommands: SET NX PX/EX, GET, PTTL, TTL, EXISTS, DEL and
// UNLINK as quorum operations on the lock keys (RLOCK excluded, both
// ways); every other form or command refused, naming drop-in mode, with
// nothing sent to the masters.
func TestDropinPlainCommands(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	a, b := pa.Client(), pb.Client()
	if v := do(t, a, "SET", "k", "v1", "NX", "PX", 10000); v != "OK" {
		t.Fatalf("SET NX PX = %v", v)
	}
	if v := do(t, b, "SET", "k", "v2", "PX", 10000, "NX"); v != nil {
		t.Fatalf("SET NX on a held key = %v", v)
	}
	if _, ok := rlock(t, b, "k", 1000); ok {
		t.Fatal("RLOCK granted over a drop-in lock")
	}
	cl.onQuorum(t, "k", "v1")
	if v := do(t, b, "GET", "k"); v != "v1" {
		t.Fatalf("GET = %v", v)
	}
	if v := do(t, b, "PTTL", "k").(int64); v <= 9000 || v > 10000 {
		t.Fatalf("PTTL = %v", v)
	}
	if v := do(t, b, "TTL", "k"); v != int64(10) {
		t.Fatalf("TTL = %v", v)
	}
	if v := do(t, b, "EXISTS", "k", "nothing"); v != int64(1) {
		t.Fatalf("EXISTS = %v", v)
	}
	if v := do(t, b, "DEL", "k", "nothing"); v != int64(1) {
		t.Fatalf("DEL = %v", v)
	}
	if v := do(t, b, "GET", "k"); v != nil {
		t.Fatalf("GET after DEL = %v", v)
	}
	if v := do(t, b, "PTTL", "k"); v != int64(-2) {
		t.Fatalf("PTTL after DEL = %v", v)
	}
	if v := do(t, a, "SET", "k2", "v", "NX", "EX", 5); v != "OK" {
		t.Fatalf("SET NX EX = %v", v)
	}
	if v := do(t, a, "UNLINK", "k2"); v != int64(1) {
		t.Fatalf("UNLINK = %v", v)
	}
	g, _ := rlock(t, a, "k3", 10000)
	if v := do(t, b, "SET", "k3", "v", "NX", "PX", 1000); v != nil {
		t.Fatalf("SET NX over an RLOCK = %v", v)
	}
	if v := do(t, b, "GET", "k3"); v != g.token {
		t.Fatalf("GET of an RLOCK = %v", v)
	}
	do(t, a, "RUNLOCK", "k3", g.token)

	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	setErr := "ERR drop-in mode: SET on a lock key must be SET key value NX [PX|EX|PXAT|EXAT ttl] (or XX with a ttl, by the value holding it): a SET without NX would overwrite the lock of another client (see docs/PROTOCOL.md, Drop-in mode)"
	for _, tc := range []struct {
		want string
		args []any
	}{
		{setErr, []any{"SET", "x", "v"}},
		{setErr, []any{"SET", "x", "v", "PX", 1000}},
		{"ERR drop-in mode: SET ... XX on a lock key needs a ttl (PX, EX, PXAT or EXAT): it sets the ttl of the lock the key holds with that value (see docs/PROTOCOL.md, Drop-in mode)", []any{"SET", "x", "v", "XX"}},
		{"ERR drop-in mode: SET ... NX GET is not served; read the holder with GET (see docs/PROTOCOL.md, Drop-in mode)", []any{"SET", "x", "v", "NX", "PX", 1000, "GET"}},
		{"ERR drop-in mode: SET ... KEEPTTL is not served on a lock key (see docs/PROTOCOL.md, Drop-in mode)", []any{"SET", "x", "v", "NX", "KEEPTTL"}},
		{"ERR syntax error", []any{"SET", "x", "v", "NX", "PX", 1000, "EX", 1}},
		{"ERR invalid expire time in 'set' command", []any{"SET", "x", "v", "NX", "PX", 0}},
		{"ERR drop-in mode: DELEX IFNE is not a lock release the proxy can run on a quorum; use IFEQ (see docs/PROTOCOL.md, Drop-in mode)", []any{"DELEX", "x", "IFNE", "v"}},
		{"ERR drop-in mode serves lock operations only: 'HSET' is not one (see docs/PROTOCOL.md, Drop-in mode)", []any{"HSET", "h", "f", "v"}},
		{"ERR drop-in: script d530a22111e074618d24a380340dd3d8bc48af4a is not a lock operation the proxy can run on a quorum (uses no KEYS) (see docs/dropin.md, Refused scripts)", []any{"EVAL", "return redis.call('flushall')", 0}},
		{"ERR drop-in: script 79adc8f91cf7f1b2ce8e5084a054dae1c1fd3456 is not a lock operation the proxy can run on a quorum (line 1: redis.call('set', KEYS[1], ARGV[1]): sets a key without an expiry) (see docs/dropin.md, Refused scripts)", []any{"EVAL", "redis.call('set', KEYS[1], ARGV[1]) return 1", 1, "k", "v"}},
		{"NOSCRIPT No matching script. Please use EVAL.", []any{"EVALSHA", "0000000000000000000000000000000000000000", 0}},
		{"ERR drop-in: script e0e1f9fabfc9d4800c877a703b823ac0578ff8db is not a lock operation the proxy can run on a quorum (uses no KEYS) (see docs/dropin.md, Refused scripts)", []any{"SCRIPT", "LOAD", "return 1"}},
		{"ERR drop-in mode: SCRIPT KILL is not served (see docs/PROTOCOL.md, Drop-in mode)", []any{"SCRIPT", "KILL"}},
	} {
		expectErr(t, a, tc.want, tc.args...)
	}
	if redistest.Real() {
		if after := cl.scriptCalls(t); after != before {
			t.Errorf("refused commands reached the masters: %d script calls, was %d", after, before)
		}
	}
	if info := do(t, a, "INFO", "dropin").(string); !strings.Contains(info, "scripts_recognised:") || !strings.Contains(info, "scripts_refused:") {
		t.Fatalf("INFO dropin: %s", info)
	}
	cl.expectOnlyFences(t)
}

// TestDropinGoLibraries: go-redsync v4 and bsm/redislock, each given one
// client connected to the proxy, lock, contend, extend and unlock
// unchanged, and the locks are on a quorum of the real masters.
func TestDropinGoLibraries(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	ctx := context.Background()
	ca := redis.NewClient(&redis.Options{Addr: pa.Addr})
	cb := redis.NewClient(&redis.Options{Addr: pb.Addr})
	defer ca.Close()
	defer cb.Close()

	t.Run("go-redsync", func(t *testing.T) {
		rsA, rsB := redsync.New(goredis.NewPool(ca)), redsync.New(goredis.NewPool(cb))
		m := rsA.NewMutex("rs-job", redsync.WithExpiry(5*time.Second))
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		cl.onQuorum(t, "rs-job", m.Value())
		other := rsB.NewMutex("rs-job", redsync.WithTries(1))
		if err := other.LockContext(ctx); err == nil {
			t.Fatal("a second go-redsync mutex took a held lock")
		}
		if ok, err := m.ExtendContext(ctx); !ok || err != nil {
			t.Fatalf("extend: %v %v", ok, err)
		}
		if time.Until(m.Until()) < 4*time.Second {
			t.Fatalf("validity after the extension ends in %v", time.Until(m.Until()))
		}
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			t.Fatalf("unlock: %v %v", ok, err)
		}
		if ok, err := m.UnlockContext(ctx); ok || err == nil {
			t.Fatalf("second unlock: %v %v", ok, err)
		}
		if err := other.LockContext(ctx); err != nil {
			t.Fatalf("the second mutex after the unlock: %v", err)
		}
		other.UnlockContext(ctx)
	})
	t.Run("bsm-redislock", func(t *testing.T) {
		la, lb := redislock.New(ca), redislock.New(cb)
		l, err := la.Obtain(ctx, "bsm-job", 5*time.Second, &redislock.Options{Metadata: "m"})
		if err != nil {
			t.Fatal(err)
		}
		cl.onQuorum(t, "bsm-job", l.Token()+"m")
		if _, err := lb.Obtain(ctx, "bsm-job", time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
			t.Fatalf("second obtain: %v", err)
		}
		if d, err := l.TTL(ctx); err != nil || d <= 0 || d > 5*time.Second {
			t.Fatalf("TTL: %v %v", d, err)
		}
		if err := l.Refresh(ctx, 20*time.Second, nil); err != nil {
			t.Fatal(err)
		}
		expectTTLAbove(t, cl, "bsm-job", 15*time.Second)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
			t.Fatalf("second release: %v", err)
		}
		l2, err := lb.Obtain(ctx, "bsm-job", time.Second, nil)
		if err != nil {
			t.Fatalf("obtain after the release: %v", err)
		}
		l2.Release(ctx)
	})
	cl.expectOnlyFences(t)
}

// TestDropinRedisPy: redis-py's Lock, unchanged, through the proxy.
func TestDropinRedisPy(t *testing.T) {
	busy(t)
	python := requirePython(t)
	cl, pa, pb := dropinProxies(t)
	_, portA, _ := strings.Cut(pa.Addr, ":")
	_, portB, _ := strings.Cut(pb.Addr, ":")
	script := `import redis, sys, threading, time
from redis.exceptions import LockError, LockNotOwnedError
a = redis.Redis(port=int(sys.argv[1]))
b = redis.Redis(port=int(sys.argv[2]))
lock = a.lock("py-job", timeout=5)
assert lock.acquire(blocking=False)
lock_token = lock.local.token
print("token", lock_token.decode(), flush=True)
sys.stdin.readline()  # the test reads the masters meanwhile
other = b.lock("py-job", timeout=5)
assert not other.acquire(blocking=False), "contention"
assert lock.owned()
assert lock.extend(10)
assert lock.reacquire()
got = []
def waiter():
    l = b.lock("py-job", timeout=5, sleep=0.05)
    got.append(l.acquire(blocking=True, blocking_timeout=5))
    got.append(time.time())
    l.release()
th = threading.Thread(target=waiter)
th.start()
time.sleep(0.3)
released = time.time()
lock.release()
th.join()
assert got[0], "the blocking acquire was not granted"
print("woken after", round(got[1] - released, 3), flush=True)
try:
    lock.release()
    raise SystemExit("releasing a released lock did not raise")
except LockError:
    pass
# The server's answer too: the release script of a token that no longer
# holds the lock says 0, which redis-py raises as LockNotOwnedError.
stale = a.lock("py-job", timeout=5)
stale.local.token = lock_token
try:
    stale.release()
    raise SystemExit("releasing a stale token did not raise")
except LockNotOwnedError:
    pass
print("ok")
`
	cmd := exec.Command(python, "-c", script, portA, portB)
	holdAndCheck(t, cl, cmd, "py-job")
	cl.expectOnlyFences(t)
}

// holdAndCheck runs a client program that prints "<word> <token>" once it
// holds keys, then waits for a line on its stdin: meanwhile the test
// checks that every key holds the token on a quorum of the real masters.
func holdAndCheck(t *testing.T, cl *cluster, cmd *exec.Cmd, keys ...string) {
	t.Helper()
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
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	if err != nil {
		cmd.Wait()
		t.Fatalf("the client did not lock: %v\n%s", err, stderr.String())
	}
	_, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	for _, k := range keys {
		cl.onQuorum(t, k, token)
	}
	io.WriteString(stdin, "\n")
	rest, _ := io.ReadAll(rd)
	err = cmd.Wait()
	t.Logf("%s%s%s", line, rest, stderr.String())
	if err != nil {
		t.Fatal(err)
	}
}

// TestDropinNodeRedlock: node-redlock v5 given one ioredis client,
// unchanged: multi-key acquire, contention, extend, release.
func TestDropinNodeRedlock(t *testing.T) {
	busy(t)
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node", "node is not installed")
	}
	if _, err := os.Stat("clients/node_modules/redlock"); err != nil {
		skipOrFail(t, "node", "node-redlock is not installed (make clients)")
	}
	cl, pa, _ := dropinProxies(t)
	_, port, _ := strings.Cut(pa.Addr, ":")
	script := `const Redis = require("ioredis");
const Redlock = require("redlock").default;
(async () => {
  const client = new Redis({ port: Number(process.argv[1]) });
  const redlock = new Redlock([client], { retryCount: 0 });
  const lock = await redlock.acquire(["nr-a", "nr-b"], 5000);
  console.log("value", lock.value);
  await new Promise((resolve) => process.stdin.once("data", resolve)); // the test reads the masters
  process.stdin.pause();
  let refused = false;
  try { await redlock.acquire(["nr-b", "nr-c"], 5000); } catch (e) { refused = true; }
  if (!refused) throw new Error("contention: a second lock on nr-b was granted");
  const extended = await lock.extend(20000);
  await extended.release();
  const again = await redlock.acquire(["nr-b", "nr-c"], 5000);
  await again.release();
  client.disconnect();
  console.log("ok");
})().catch((e) => { console.error(e); process.exit(1); });
`
	cmd := exec.Command("node", "-e", script, port)
	cmd.Dir = "clients"
	holdAndCheck(t, cl, cmd, "nr-a", "nr-b")
	cl.expectOnlyFences(t)
}

// TestDropinSetNXIsExact: drop-in's SET NX answers what one Redis would:
// nil whenever the key exists, also with the very value asked for (two
// clients locking with a constant value must not both win), through either
// proxy; workers that lock with "SET lock 1 NX PX" and release with DEL
// never overlap; DELIFEQ and DELEX IFEQ are compare-and-deletes; a SET NX
// without a ttl lives while its connection does.
func TestDropinSetNXIsExact(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	a, b := pa.Client(), pb.Client()
	ctx := context.Background()

	if v := do(t, a, "SET", "const", "1", "NX", "PX", 10000); v != "OK" {
		t.Fatalf("SET const 1 NX PX = %v", v)
	}
	for _, c := range []*redis.Client{a, b} {
		if v := do(t, c, "SET", "const", "1", "NX", "PX", 10000); v != nil {
			t.Fatalf("SET NX of a key holding the same value = %v, want nil as Redis answers", v)
		}
	}
	cl.onQuorum(t, "const", "1")
	if v := do(t, b, "DELIFEQ", "const", "2"); v != int64(0) {
		t.Fatalf("DELIFEQ with another value = %v", v)
	}
	if v := do(t, b, "DELIFEQ", "const", "1"); v != int64(1) {
		t.Fatalf("DELIFEQ = %v", v)
	}
	if v := do(t, b, "DELIFEQ", "const", "1"); v != int64(0) {
		t.Fatalf("DELIFEQ of a released lock = %v", v)
	}
	at := time.Now().Add(10 * time.Second).UnixMilli()
	if v := do(t, a, "SET", "const", "2", "NX", "PXAT", at); v != "OK" {
		t.Fatalf("SET NX PXAT = %v", v)
	}
	if v := do(t, b, "PTTL", "const").(int64); v <= 8000 || v > 10000 {
		t.Fatalf("PTTL after SET NX PXAT = %v", v)
	}
	if v := do(t, a, "DELEX", "const", "IFEQ", "1"); v != int64(0) {
		t.Fatalf("DELEX IFEQ with another value = %v", v)
	}
	if v := do(t, a, "DELEX", "const", "IFEQ", "2"); v != int64(1) {
		t.Fatalf("DELEX IFEQ = %v", v)
	}

	// The idiom: SET lock 1 NX PX 10000, work, DEL lock. Four workers on
	// two proxies; a holder count that must never exceed one.
	var holders, overlaps, cycles atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := []*redis.Client{a, b}[w%2]
			for n := 0; n < 40; {
				ok, err := c.SetNX(ctx, "idiom", "1", 10*time.Second).Result()
				if err != nil {
					t.Errorf("SET NX: %v", err)
					return
				}
				if !ok {
					time.Sleep(time.Millisecond)
					continue
				}
				if holders.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if err := c.Del(ctx, "idiom").Err(); err != nil {
					t.Errorf("DEL: %v", err)
					return
				}
				n++
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 || cycles.Load() != 160 {
		t.Fatalf("constant-value SET NX + DEL: %d overlaps in %d cycles", overlaps.Load(), cycles.Load())
	}

	// No ttl: kept alive while the connection is open, released when it
	// closes.
	kept := redis.NewClient(&redis.Options{Addr: pa.Addr, PoolSize: 1})
	if v, err := kept.Do(ctx, "SET", "kept", "tok", "NX").Result(); err != nil || v != "OK" {
		t.Fatalf("SET kept tok NX = %v, %v", v, err)
	}
	cl.onQuorum(t, "kept", "tok")
	if v := do(t, b, "SET", "kept", "x", "NX", "PX", 1000); v != nil {
		t.Fatalf("SET NX over a kept lock = %v", v)
	}
	if v := do(t, b, "PTTL", "kept").(int64); v <= 0 {
		t.Fatalf("PTTL of a kept lock = %v", v)
	}
	kept.Close()
	waitFor(t, 2*time.Second, "the kept lock released when its connection closed", func() bool { return cl.holders("kept", "tok") == 0 })
	cl.expectNoLocks(t)
}

// TestDropinRefusalNeverSilent: a library that took a lock through the
// proxy and then sends an extend or release the proxy cannot run learns it
// in the error (which operation was expected, on which lock, that it did
// not happen and when the lock expires); the refusal is logged once per
// script, counted by shape in the metrics and INFO, and SCRIPT LIST shows
// every script seen with its reading or its reason. Nothing of a refused
// script reaches a master.
func TestDropinRefusalNeverSilent(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.extra = "dropin: true\n"
	cfg.metricsListen = "127.0.0.1:0"
	p := startProxy(t, cfg)
	c := p.Client()
	acquire := `return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`
	// An extend only when ARGV[3] says so: not an extend of every held key.
	extend := `if redis.call('get', KEYS[1]) == ARGV[1] and ARGV[3] == 'yes' then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`
	hashRelease := `if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return nil end return redis.call('hdel', KEYS[1], ARGV[1])`
	if v := do(t, c, "EVAL", acquire, 1, "held", "tok-1", 5000); v != "OK" {
		t.Fatalf("acquire = %v", v)
	}
	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	for _, tc := range []struct {
		name       string
		args       []any
		want, miss []string
	}{
		{"extend of the held lock", []any{"EVAL", extend, 1, "held", "tok-1", 5000, "no"},
			[]string{"(read as an extend: line 1:", `but expected an extend of a lock this client holds ("held"): the lock is not extended and expires in `}, nil},
		{"the same script again", []any{"EVAL", extend, 1, "held", "tok-1", 5000, "yes"},
			[]string{"but expected an extend of a lock this client holds"}, nil},
		{"another value: not the holder's", []any{"EVAL", extend, 1, "held", "tok-2", 5000, "no"},
			[]string{"(read as an extend: line 1:"}, []string{"this client holds"}},
		{"a key no one holds", []any{"EVAL", extend, 1, "free", "tok-1", 5000, "no"},
			[]string{"(read as an extend: line 1:"}, []string{"this client holds"}},
		{"a hash release of the held key", []any{"EVAL", hashRelease, 1, "held", "tok-1"},
			[]string{"calls HDEL", `but expected an extend or a release of a lock this client holds ("held"): the lock is neither extended nor released`}, nil},
	} {
		err := c.Do(context.Background(), tc.args...).Err()
		if err == nil {
			t.Fatalf("%s: not refused", tc.name)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, w)
			}
		}
		for _, m := range tc.miss {
			if strings.Contains(err.Error(), m) {
				t.Errorf("%s: error %q says %q", tc.name, err, m)
			}
		}
		if !strings.HasPrefix(err.Error(), "ERR drop-in: script ") || !strings.Contains(err.Error(), " is not a lock operation the proxy can run on a quorum (") {
			t.Errorf("%s: error %q is not in the contract's form", tc.name, err)
		}
	}
	if redistest.Real() {
		if after := cl.scriptCalls(t); after != before {
			t.Errorf("refused scripts reached the masters: %d script calls, was %d", after, before)
		}
	}
	// The lock is still held by its holder, not extended (its pttl is what
	// the acquire left).
	if pttl := do(t, c, "PTTL", "held").(int64); pttl <= 0 || pttl > 5000 {
		t.Fatalf("PTTL held = %d", pttl)
	}

	info := do(t, c, "INFO", "dropin").(string)
	for _, w := range []string{"refusals:5", "refusals_of_held_locks:3", "scripts_refused:2", "scripts_recognised:1"} {
		if !strings.Contains(info, w) {
			t.Errorf("INFO dropin lacks %q:\n%s", w, info)
		}
	}
	m := metricsBody(t, p)
	for _, w := range []string{
		`redlock_proxy_dropin_scripts_refused_total{expected="extend",holds="true"} 2`,
		`redlock_proxy_dropin_scripts_refused_total{expected="extend",holds="false"} 2`,
		`redlock_proxy_dropin_scripts_refused_total{expected="unknown",holds="true"} 1`,
	} {
		if !strings.Contains(m, w) {
			t.Errorf("metrics lack %s:\n%s", w, grepLines(m, "dropin"))
		}
	}
	if n := strings.Count(p.log.String(), "drop-in: a script was refused"); n != 2 {
		t.Errorf("%d refusals logged, want one per script (2):\n%s", n, grepLines(p.log.String(), "refused"))
	}

	list, ok := do(t, c, "SCRIPT", "LIST").([]any)
	if !ok || len(list) != 3 {
		t.Fatalf("SCRIPT LIST = %v", list)
	}
	want := [][]any{
		{shaHex(acquire), "recognised", "acquire", "", int64(1)},
		{shaHex(extend), "refused", "extend", "", int64(4)},
		{shaHex(hashRelease), "refused", "", "", int64(1)},
	}
	for i, w := range want {
		row, _ := list[i].([]any)
		if len(row) != 5 || row[0] != w[0] || row[1] != w[1] || row[4] != w[4] || !strings.HasPrefix(row[2].(string), w[2].(string)) {
			t.Errorf("SCRIPT LIST row %d = %v, want %v", i, row, w)
		}
		if w[1] == "refused" && row[3] == "" {
			t.Errorf("SCRIPT LIST row %d gives no reason: %v", i, row)
		}
	}
	expectErr(t, c, "ERR wrong number of arguments for 'script|list' command", "SCRIPT", "LIST", "x")
}

func shaHex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// TestDropinSetNXExpire: the oldest lock idiom, SETNX then EXPIRE of the
// same key, through two proxies: SETNX is the no-ttl SET NX (a lease the
// connection keeps: 1 or 0), EXPIRE/PEXPIRE gives the lock held at the key
// that ttl on a quorum (the connection then no longer keeps it: it
// outlives the connection by its ttl), and a ttl of 0 deletes it.
func TestDropinSetNXExpire(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	ctx := context.Background()
	a, b := pa.Client(), pb.Client()
	if v := do(t, a, "SETNX", "old", "v1"); v != int64(1) {
		t.Fatalf("SETNX = %v", v)
	}
	cl.onQuorum(t, "old", "v1")
	if v := do(t, b, "SETNX", "old", "v2"); v != int64(0) {
		t.Fatalf("SETNX of a held key = %v", v)
	}
	if v := do(t, b, "SET", "old", "v2", "NX", "PX", 5000); v != nil {
		t.Fatalf("SET NX of a SETNX key = %v", v)
	}
	if v := do(t, a, "EXPIRE", "old", 30); v != int64(1) {
		t.Fatalf("EXPIRE = %v", v)
	}
	if pttl := do(t, b, "PTTL", "old").(int64); pttl < 20000 || pttl > 30000 {
		t.Fatalf("PTTL after EXPIRE 30 = %d", pttl)
	}
	// The ttl governs it: the connection does not keep it, and its end
	// does not release it. A second SETNX on the connection shows when
	// the close has been handled: its lease is released then.
	if v := do(t, a, "SETNX", "marker", "m"); v != int64(1) {
		t.Fatalf("SETNX marker = %v", v)
	}
	if info := do(t, a, "INFO", "leases").(string); !strings.Contains(info, "autoextend_leases:1\r\n") {
		t.Fatalf("after EXPIRE, the proxy keeps other leases than the marker's:\n%s", info)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	c := pa.Client()
	waitFor(t, 2*time.Second, "the marker's lease released when its connection closed", func() bool {
		return c.Get(ctx, "marker").Err() == redis.Nil &&
			strings.Contains(do(t, c, "INFO", "leases").(string), "autoextend_leases:0\r\n")
	})
	if v := do(t, c, "GET", "old"); v != "v1" {
		t.Fatalf("GET after the SETNX connection closed = %v, want v1 (EXPIRE gave it a ttl)", v)
	}
	if v := do(t, b, "PEXPIRE", "old", 0); v != int64(1) {
		t.Fatalf("PEXPIRE 0 = %v", v)
	}
	if v := do(t, c, "GET", "old"); v != nil {
		t.Fatalf("GET after PEXPIRE 0 = %v", v)
	}
	if v := do(t, b, "EXPIRE", "old", 10); v != int64(0) {
		t.Fatalf("EXPIRE of a free key = %v", v)
	}
	// Another connection's lock: kept longer, never cut short.
	if v := do(t, b, "SET", "theirs", "v4", "NX", "PX", 20000); v != "OK" {
		t.Fatalf("SET NX PX = %v", v)
	}
	if err := c.Do(ctx, "PEXPIRE", "theirs", 1000).Err(); err == nil || !strings.Contains(err.Error(), "PEXPIRE would shorten a lock this connection did not take with SETNX") {
		t.Fatalf("PEXPIRE shortening another's lock: %v", err)
	}
	if v := do(t, c, "EXPIRE", "theirs", 40); v != int64(1) {
		t.Fatalf("EXPIRE lengthening another's lock = %v", v)
	}
	if pttl := do(t, b, "PTTL", "theirs").(int64); pttl < 30000 {
		t.Fatalf("PTTL after EXPIRE 40 = %d", pttl)
	}
	do(t, b, "DEL", "theirs")
	// Without EXPIRE, the lease ends with its connection.
	d := pb.Client()
	if v := do(t, d, "SETNX", "kept", "v3"); v != int64(1) {
		t.Fatalf("SETNX = %v", v)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the SETNX lease released when its connection closed", func() bool {
		return c.Get(ctx, "kept").Err() == redis.Nil
	})
	expectErr(t, c, "ERR drop-in mode: EXPIRE with NX, XX, GT or LT is not served on a lock key (see docs/PROTOCOL.md, Drop-in mode)", "EXPIRE", "x", 10, "NX")
	expectErr(t, c, "ERR invalid expire time in 'pexpire' command (limits.max_ttl is 1h0m0s)", "PEXPIRE", "x", 3600001)
	expectErr(t, c, "ERR value is not an integer or out of range", "EXPIRE", "x", "soon")
	expectErr(t, c, "ERR wrong number of arguments for 'setnx' command", "SETNX", "x")
	cl.expectOnlyFences(t)
}

// Redisson 3.17.0's RLock scripts, verbatim (RedissonLock's
// tryLockInnerAsync, unlockInnerAsync, forceUnlockAsync; RedissonBaseLock's
// renewExpirationAsync; Apache-2.0), as the Java client sends them by EVAL
// and EVALSHA: the Java library cannot be installed here.
const (
	redissonTryLock = "if (redis.call('exists', KEYS[1]) == 0) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);"
	redissonRenew = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0;"
	redissonUnlock = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call('publish', KEYS[2], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return nil;"
	// Since 3.24 (here 3.45.0): an unlock latch per request, the publish
	// command named in ARGV.
	redissonLatchUnlock = "local val = redis.call('get', KEYS[3]); " +
		"if val ~= false then " +
		"return tonumber(val);" +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
		"return 1; " +
		"end; "
	// Since 3.45 the watchdog renews all of a client's locks at once.
	redissonBatchRenew = "local result = {} " +
		"for i = 1, #KEYS, 1 do " +
		"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
		"redis.call('pexpire', KEYS[i], ARGV[1]); " +
		"table.insert(result, 1); " +
		"else " +
		"table.insert(result, 0); " +
		"end; " +
		"end; " +
		"return result;"
	redissonForceUnlock = "if (redis.call('del', KEYS[1]) == 1) then " +
		"redis.call('publish', KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"
)

// redisson is one Redisson client's RLock calls on one lock: owner is its
// "<client id>:<thread id>", lease the watchdog's 30 s.
type redisson struct {
	t     *testing.T
	c     *redis.Client
	owner string
	sha   bool // EVALSHA (the client's cache), else EVAL
}

const (
	redissonLock    = "{orders}:lock"
	redissonChannel = "redisson_lock__channel:{orders}:lock"
)

func (r redisson) eval(src string, keys []string, args ...any) (any, error) {
	ctx := context.Background()
	if r.sha {
		v, err := r.c.EvalSha(ctx, shaHex(src), keys, args...).Result()
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return v, err
		}
	}
	return r.c.Eval(ctx, src, keys, args...).Result()
}

// tryLock answers nil when it took a hold, else the holder's pttl.
func (r redisson) tryLock() any {
	r.t.Helper()
	v, err := r.eval(redissonTryLock, []string{redissonLock}, 30000, r.owner)
	if err != nil && err != redis.Nil {
		r.t.Fatalf("%s tryLock: %v", r.owner, err)
	}
	return v
}

func (r redisson) renew() any {
	r.t.Helper()
	v, err := r.eval(redissonRenew, []string{redissonLock}, 30000, r.owner)
	if err != nil {
		r.t.Fatalf("%s renew: %v", r.owner, err)
	}
	return v
}

// unlock answers 0 (holds remain), 1 (released, announced) or nil (not
// the owner's).
func (r redisson) unlock() any {
	r.t.Helper()
	v, err := r.eval(redissonUnlock, []string{redissonLock, redissonChannel}, 0, 30000, r.owner)
	if err != nil && err != redis.Nil {
		r.t.Fatalf("%s unlock: %v", r.owner, err)
	}
	return v
}

// latchUnlock is Redisson 3.24+'s unlock of request id: sent again, it
// answers what the first one did.
func (r redisson) latchUnlock(id string) any {
	r.t.Helper()
	v, err := r.eval(redissonLatchUnlock, []string{redissonLock, redissonChannel, "redisson_unlock_latch:{orders}:lock:" + id}, 0, 30000, r.owner, "publish", 1000)
	if err != nil && err != redis.Nil {
		r.t.Fatalf("%s unlock %s: %v", r.owner, id, err)
	}
	return v
}

func (r redisson) forceUnlock() any {
	r.t.Helper()
	v, err := r.eval(redissonForceUnlock, []string{redissonLock, redissonChannel}, 0)
	if err != nil {
		r.t.Fatalf("%s forceUnlock: %v", r.owner, err)
	}
	return v
}

// TestDropinRedisson: Redisson's RLock scripts through two proxies, as two
// Java clients would send them: re-entry, a competitor answered the
// holder's pttl, renewal, one hold released at a time, the release
// announced on the lock's channel to a subscriber of the other proxy, a
// force unlock; the lock on a quorum of the real masters while held; and
// the same with 2 of the 5 masters paused.
func TestDropinRedisson(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	ctx := context.Background()
	a := redisson{t: t, c: pa.Client(), owner: "6a0f3c1e-0b7a-4a53-9c1e-1d2f3a4b5c6d:1"}
	b := redisson{t: t, c: pb.Client(), owner: "e2d1c0b9-8a7f-4e6d-5c4b-3a2918070605:7", sha: true}
	sub := pb.Client().Subscribe(ctx, redissonChannel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := sub.Channel()

	cycle := func(paused bool) {
		if v := a.tryLock(); v != nil {
			t.Fatalf("a's tryLock = %v, want nil (taken)", v)
		}
		if !paused {
			cl.onQuorum(t, redissonLock, a.owner)
		}
		if v := a.tryLock(); v != nil {
			t.Fatalf("a's re-entry = %v, want nil", v)
		}
		if v, ok := b.tryLock().(int64); !ok || v <= 0 || v > 30000 {
			t.Fatalf("b's tryLock while a holds it = %v, want a's pttl", v)
		}
		if v := a.renew(); v != int64(1) {
			t.Fatalf("a's renew = %v", v)
		}
		// isHeldByThread, getHoldCount, isLocked: plain reads.
		if v := do(t, b.c, "HEXISTS", redissonLock, a.owner); v != int64(1) {
			t.Fatalf("HEXISTS of a's field = %v", v)
		}
		if v := do(t, b.c, "HEXISTS", redissonLock, b.owner); v != int64(0) {
			t.Fatalf("HEXISTS of b's field = %v", v)
		}
		if v := do(t, b.c, "HGET", redissonLock, a.owner); v != "2" {
			t.Fatalf("HGET of a's holds = %v, want 2", v)
		}
		if v := do(t, b.c, "HGET", redissonLock, b.owner); v != nil {
			t.Fatalf("HGET of b's field = %v", v)
		}
		// 3.45's watchdog: this lock (a's) and another (free).
		v, err := a.eval(redissonBatchRenew, []string{redissonLock, "{invoices}:lock"}, 30000, a.owner, a.owner)
		if fmt.Sprint(v) != "[1 0]" || err != nil {
			t.Fatalf("a's batched renewal = %v %v, want [1 0]", v, err)
		}
		if v := b.renew(); v != int64(0) {
			t.Fatalf("b's renew of a's lock = %v", v)
		}
		if v := b.unlock(); v != nil {
			t.Fatalf("b's unlock of a's lock = %v, want nil", v)
		}
		if v := a.unlock(); v != int64(0) {
			t.Fatalf("a's first unlock of two holds = %v, want 0", v)
		}
		if v, ok := b.tryLock().(int64); !ok || v <= 25000 {
			t.Fatalf("b's tryLock with a's hold left = %v, want a's pttl (set again to 30 s)", v)
		}
		if v := a.unlock(); v != int64(1) {
			t.Fatalf("a's last unlock = %v, want 1", v)
		}
		select {
		case m := <-msgs:
			if m.Payload != "0" {
				t.Fatalf("announcement %q", m.Payload)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the release was not announced on the lock's channel through the other proxy")
		}
		if v := a.unlock(); v != nil {
			t.Fatalf("a's unlock of a released lock = %v, want nil", v)
		}
		if v := b.tryLock(); v != nil {
			t.Fatalf("b's tryLock after a's release = %v, want nil", v)
		}
		if v := a.forceUnlock(); v != int64(1) {
			t.Fatalf("forceUnlock of b's lock = %v, want 1", v)
		}
		if v := a.forceUnlock(); v != int64(0) {
			t.Fatalf("forceUnlock of a free lock = %v, want 0", v)
		}
		<-msgs
		if v := a.c.Exists(ctx, redissonLock).Val(); v != 0 {
			t.Fatalf("EXISTS after forceUnlock = %d", v)
		}
		// Redisson 3.24+: each unlock request is answered once; sent
		// again (a retry after a lost reply) it answers the same and
		// takes no second hold away.
		a.tryLock()
		a.tryLock()
		for range 2 {
			if v := a.latchUnlock(fmt.Sprint("r1-", paused)); v != int64(0) {
				t.Fatalf("unlock r1 = %v, want 0", v)
			}
		}
		if _, ok := b.tryLock().(int64); !ok {
			t.Fatal("a's lock released by a retried unlock request")
		}
		for range 2 {
			if v := a.latchUnlock(fmt.Sprint("r2-", paused)); v != int64(1) {
				t.Fatalf("unlock r2 = %v, want 1", v)
			}
		}
		<-msgs
		if v := b.tryLock(); v != nil {
			t.Fatalf("b's tryLock after a's last unlock = %v", v)
		}
		if v := b.latchUnlock(fmt.Sprint("r3-", paused)); v != int64(1) {
			t.Fatalf("b's unlock = %v", v)
		}
		<-msgs
	}
	cycle(false)
	cl.servers[3].Pause()
	cl.servers[4].Pause()
	cycle(true)
	cl.servers[3].Resume()
	cl.servers[4].Resume()
	cl.expectOnlyFences(t)
}

// zlockScripts are the sorted-set read-write lock's scripts, in the shape
// of Symfony Lock's RedisStore (internal/luashape/testdata/zlock).
func zlockScripts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range []string{"write", "read", "refresh", "release", "exists", "probe"} {
		b, err := os.ReadFile(filepath.Join("..", "internal", "luashape", "testdata", "zlock", n+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// TestDropinSortedSetLock drives a read-write lock kept in a sorted set
// (Symfony Lock's layout) through two proxies: writers exclude each other
// and readers, readers share, a writer downgrades to a reader, a
// promotion is refused with an error, and the TIME probe is answered;
// with all masters up, then with 2 of 5 paused.
func TestDropinSortedSetLock(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	sc := zlockScripts(t)
	ctx := context.Background()
	const key = "sym:invoices"
	type client struct {
		c     *redis.Client
		token string
	}
	a := client{pa.Client(), "YWFhYWFhYWFhYWFhYWFhYQ=="}
	b := client{pb.Client(), "YmJiYmJiYmJiYmJiYmJiYg=="}
	run := func(c client, name string, ttl int) (any, error) {
		t.Helper()
		now := fmt.Sprintf("%.4f", float64(time.Now().UnixMicro())/1e6)
		args := []any{now, c.token, ttl}
		if name == "release" {
			args = []any{c.token}
		}
		if name == "exists" {
			args = args[:2]
		}
		v, err := c.c.Eval(ctx, sc[name], []string{key}, args...).Result()
		if err == redis.Nil {
			return nil, nil
		}
		return v, err
	}
	want := func(c client, name string, ttl int, w any) {
		t.Helper()
		v, err := run(c, name, ttl)
		if err != nil || v != w {
			t.Fatalf("%s by %s = %v, %v; want %v", name, c.token[:4], v, err, w)
		}
	}
	yes, no := int64(1), any(nil)
	cycle := func(paused bool) {
		if v, err := pa.Client().Eval(ctx, sc["probe"], []string{"symfony_check_support_time"}).Result(); v != yes || err != nil {
			t.Fatalf("probe = %v, %v", v, err)
		}
		want(a, "write", 30000, yes)
		if !paused {
			cl.onQuorum(t, key, a.token) // a write lock is an RLOCK
		}
		want(b, "write", 30000, no)
		want(b, "read", 30000, no)
		want(a, "write", 30000, yes) // the holder again: refreshed
		want(a, "refresh", 20000, yes)
		want(b, "refresh", 20000, no)
		want(a, "exists", 0, yes)
		want(b, "exists", 0, no)
		want(a, "read", 30000, yes) // a downgrade: now a reader
		want(b, "read", 30000, yes) // so b may read beside it
		want(b, "write", 30000, no) // readers share, none may write
		want(a, "refresh", 20000, yes)
		want(b, "release", 0, yes)
		// a is the only reader: one Redis would promote it; the proxy
		// refuses, and a's read lock is untouched.
		if _, err := run(a, "write", 30000); err == nil || !strings.Contains(err.Error(), "read lock into a write lock") {
			t.Fatalf("promotion: %v, want refused", err)
		}
		want(a, "exists", 0, yes)
		want(b, "write", 30000, no)
		want(a, "release", 0, yes)
		want(a, "release", 0, no)
		want(b, "write", 30000, yes)
		want(b, "release", 0, yes)
		want(a, "exists", 0, no)
	}
	cycle(false)
	cl.servers[3].Pause()
	cl.servers[4].Pause()
	defer cl.servers[3].Resume()
	defer cl.servers[4].Resume()
	cycle(true)
}

// TestDropinSetXX: ShedLock's idiom, SET key value XX with a ttl by the
// value that holds the lock (its unlock before lockAtLeastFor keeps the
// lock for what is left; its extend sets a new ttl), sets that ttl on a
// quorum, shorter or longer; nil when nothing is held; another value's
// lock is refused, not overwritten. With all masters up, then 2 of 5
// paused.
func TestDropinSetXX(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	a, b := pa.Client(), pb.Client()
	cycle := func() {
		if v := do(t, a, "SET", "sched", "host-a", "NX", "PX", 30000); v != "OK" {
			t.Fatalf("SET NX = %v", v)
		}
		expectErr(t, b, `ERR drop-in mode: SET ... XX would overwrite the lock held at "sched" by another value: only the value that holds a lock may set its ttl (see docs/PROTOCOL.md, Drop-in mode)`, "SET", "sched", "host-b", "XX", "PX", 1000)
		if v := do(t, b, "GET", "sched"); v != "host-a" {
			t.Fatalf("GET after another value's SET XX = %v", v)
		}
		if v := do(t, b, "SET", "sched", "host-a", "XX", "PX", 1500); v != "OK" { // shorter
			t.Fatalf("SET XX by the holder's value = %v", v)
		}
		if v, _ := do(t, a, "PTTL", "sched").(int64); v <= 0 || v > 1500 {
			t.Fatalf("PTTL after SET XX PX 1500 = %v", v)
		}
		if v := do(t, a, "SET", "sched", "host-a", "XX", "EX", 60); v != "OK" { // longer
			t.Fatalf("SET XX EX 60 = %v", v)
		}
		if v, _ := do(t, b, "PTTL", "sched").(int64); v <= 50000 {
			t.Fatalf("PTTL after SET XX EX 60 = %v", v)
		}
		if v := do(t, b, "SET", "sched", "host-b", "NX", "PX", 1000); v != nil {
			t.Fatalf("SET NX of a held lock = %v", v)
		}
		if v := do(t, a, "SET", "nothing-here", "host-a", "XX", "PX", 1000); v != nil {
			t.Fatalf("SET XX of a free key = %v, want nil", v)
		}
		if v := do(t, a, "DEL", "sched"); v != int64(1) {
			t.Fatalf("DEL = %v", v)
		}
	}
	cycle()
	cl.servers[3].Pause()
	cl.servers[4].Pause()
	defer cl.servers[3].Resume()
	defer cl.servers[4].Resume()
	cycle()
}

// TestDropinIncrFencingCounter: INCR of a counter key (the fencing tokens
// simple-redis-mutex numbers its grants with) answers, through either of
// two proxies, more than every INCR of the key answered before it
// started; concurrent INCRs through both are each answered once, with
// distinct numbers; an INCR of a key held as a lock waits for it; the key
// holds no number on the masters, and nothing is left there.
func TestDropinIncrFencingCounter(t *testing.T) {
	busy(t)
	cl, pa, pb := dropinProxies(t)
	clients := []*redis.Client{pa.Client(), pb.Client()}
	last := int64(0)
	for i := range 20 {
		v := do(t, clients[i%2], "INCR", "ctr").(int64)
		if v <= last {
			t.Fatalf("INCR %d answered %d after %d", i, v, last)
		}
		last = v
	}
	var (
		mu   sync.Mutex
		seen = map[int64]bool{}
		wg   sync.WaitGroup
	)
	for w := range 8 {
		c := clients[w%2]
		wg.Go(func() {
			prev := last
			for range 10 {
				v, err := c.Do(context.Background(), "INCR", "ctr").Int64()
				if err != nil {
					t.Errorf("worker %d: INCR: %v", w, err)
					return
				}
				mu.Lock()
				dup := seen[v]
				seen[v] = true
				mu.Unlock()
				if v <= prev || dup {
					t.Errorf("worker %d: INCR answered %d after %d (answered before: %v)", w, v, prev, dup)
				}
				prev = v
			}
		})
	}
	wg.Wait()
	if len(seen) != 80 {
		t.Errorf("%d distinct answers to 80 concurrent INCRs", len(seen))
	}
	for v := range seen {
		last = max(last, v)
	}
	// The fence is the key's own resource's: an INCR of a key held as a
	// lock through the other proxy waits until the lock is gone.
	if v := do(t, clients[1], "SET", "held", "v", "NX", "PX", 400); v != "OK" {
		t.Fatalf("SET NX PX = %v", v)
	}
	start := time.Now()
	if v := do(t, clients[0], "INCR", "held").(int64); v <= last {
		t.Errorf("INCR of another key answered %d after %d", v, last)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("INCR of a key held for 400 ms answered after %v", waited)
	}
	if v := do(t, clients[0], "GET", "ctr"); v != nil {
		t.Errorf("GET of the counter key = %v, want nil (no lock is held there)", v)
	}
	cl.expectOnlyFences(t)
}

// TestDropinReadCommands: MGET, PEXPIRETIME and EXPIRETIME of lock keys
// answer, through another proxy than the one that took the lock, what
// one Redis holding the quorum's state would: the holder or nil, and
// when the lock expires (-2 when not held).
func TestDropinReadCommands(t *testing.T) {
	busy(t)
	_, pa, pb := dropinProxies(t)
	a, b := pa.Client(), pb.Client()
	if v := do(t, a, "SET", "held", "v1", "NX", "PX", 10000); v != "OK" {
		t.Fatalf("SET NX PX = %v", v)
	}
	start := time.Now()
	if v := do(t, b, "MGET", "held", "free"); fmt.Sprint(v) != "[v1 <nil>]" {
		t.Fatalf("MGET = %v, want [v1 <nil>]", v)
	}
	at := do(t, b, "PEXPIRETIME", "held").(int64)
	if lo, hi := start.Add(9*time.Second).UnixMilli(), time.Now().Add(10*time.Second).UnixMilli(); at < lo || at > hi {
		t.Fatalf("PEXPIRETIME = %d, want within [%d, %d]", at, lo, hi)
	}
	if s := do(t, b, "EXPIRETIME", "held").(int64); s < at/1000-1 || s > at/1000+1 {
		t.Fatalf("EXPIRETIME = %d, PEXPIRETIME %d", s, at)
	}
	for _, cmd := range []string{"PEXPIRETIME", "EXPIRETIME"} {
		if v := do(t, b, cmd, "free"); v != int64(-2) {
			t.Fatalf("%s of a free key = %v, want -2", cmd, v)
		}
	}
	do(t, a, "DEL", "held")
}
