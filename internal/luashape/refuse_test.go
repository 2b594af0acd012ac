package luashape

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestRefused: scripts that are not a lock operation a quorum can run, and
// the reason each is refused.
func TestRefused(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"SET without NX", `return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])`,
			"line 1: return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]): overwrites a key that holds another value"},
		// (An unconditional DEL is a force release, served as DEL is.)
		{"DEL without comparing, some of the time", `if ARGV[1] == 'now' then return redis.call('del', KEYS[1]) end return 0`, "changes a key held by another value without comparing it with ARGV"},
		{"a hash lock for two owners", `redis.call('hincrby', KEYS[1], ARGV[1], 1) redis.call('hincrby', KEYS[1], ARGV[2], 1) redis.call('pexpire', KEYS[1], 1000) return 1`,
			"adds an owner to a hash lock that another owner holds"},
		{"a hash lock without expiry", `if redis.call('exists', KEYS[1]) == 0 then redis.call('hincrby', KEYS[1], ARGV[1], 1) return 1 end return 0`,
			"creates a hash lock without exactly one hold and an expiry"},
		{"a hash acquire over another's lock", `redis.call('hincrby', KEYS[1], ARGV[1], 1) redis.call('pexpire', KEYS[1], 1000) return 1`,
			"adds an owner to a hash lock that another owner holds"},
		{"a second key not in KEYS", `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) redis.call('del', KEYS[1] .. ':fence') return 1 end return 0`,
			"touches a key that is not one of KEYS"},
		{"a hard-coded key", `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', 'locks:all') end return 0`,
			"touches key 'locks:all', which is not in KEYS"},
		{"INCR", `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('incr', KEYS[1]) end return 0`,
			"calls INCR, which is not a lock operation"},
		{"an arbitrary write", "redis.call('hset', KEYS[1], 'owner', ARGV[1])\nreturn 1", "line 1: redis.call('hset', KEYS[1], 'owner', ARGV[1]): calls HSET"},
		{"compare on the wrong ARGV", `if redis.call('get', KEYS[1]) == ARGV[2] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`,
			"compares keys with ARGV[2], which is also the expiry"},
		{"re-entry on another ARGV than the value set", `
if redis.call('get', KEYS[1]) == ARGV[3] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`, "refreshes a key holding ARGV[3], which is not the value it sets"},
		{"a loop writing arbitrary keys", `for i = 1, 10 do redis.call('set', KEYS[1] .. i, ARGV[1], 'NX', 'PX', 100) end return 1`, "touches a key that is not one of KEYS"},
		{"a loop over ARGV as keys", `if redis.call('get', KEYS[1]) == ARGV[1] then for _, k in ipairs(ARGV) do redis.call('del', k) end end return 1`,
			"touches a key that is not one of KEYS"},
		{"a computed command name", `return redis.call(ARGV[2], KEYS[1], ARGV[1], 'PX', 100)`, "calls redis with a command name computed from the arguments"},
		{"a computed option", `return redis.call('set', KEYS[1], ARGV[1], ARGV[2], 'PX', ARGV[3])`, "passes a command option computed from the arguments"},
		{"SET NX without expiry", `return redis.call('set', KEYS[1], ARGV[1], 'NX')`, "sets a key without an expiry"},
		{"removing the expiry", `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('persist', KEYS[1]) end return 0`, "calls PERSIST"},
		{"release and acquire at once", `
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 1000)`, "both deletes and sets keys"},
		{"delete only some of the time", `if redis.call('get', KEYS[1]) == ARGV[1] and ARGV[2] == 'yes' then return redis.call('del', KEYS[1]) end return 0`,
			"does not release every key where it should"},
		{"extend only some of the time (not on the ttl left)", `if redis.call('get', KEYS[1]) == ARGV[1] and ARGV[3] == 'yes' then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`,
			"does not extend every key where it should"},
		{"compared with a constant", `if redis.call('get', KEYS[1]) == 'mine' then return redis.call('del', KEYS[1]) end return 0`,
			"changes a key held by another value without comparing it with ARGV"},
		{"publish only", `return redis.call('publish', ARGV[1], ARGV[2])`, "uses no KEYS"},
		{"function definitions", `local function f() return KEYS[1] end return f()`, "function definitions are not supported"},
		{"no keys", `return 1`, "uses no KEYS"},
		{"an endless loop", `while true do redis.call('get', KEYS[1]) end`, "runs too long"},
		{"syntax", `if redis.call('get', KEYS[1]) == ARGV[1] then`, "'end' expected near <eof>"},
		{"a sorted set without limit", `redis.call('zadd', KEYS[1], ARGV[2], ARGV[1]) redis.call('pexpire', KEYS[1], 1000) return 1`,
			"adds sorted-set members without checking the limit or its own membership"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Recognise([]byte(tt.src))
			if err == nil {
				t.Fatalf("recognised as %v", s)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("refused with %q, want %q", err, tt.want)
			}
		})
	}
}

// TestRunBadArguments: a script's own errors come back as one real Redis
// gives them, and arguments that make the write fail never reach the
// quorum.
func TestRunBadArguments(t *testing.T) {
	rc := dialRESP(t, redistest.Start(t).Addr)
	acquire := `return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`
	extend := `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0`
	tests := []struct {
		name, src  string
		held       string // the value k holds, if any
		keys, argv []string
		want       string
	}{
		{"a ttl that is not an integer", acquire, "", []string{"k"}, []string{"v", "ten"}, "error:ERR value is not an integer or out of range"},
		{"a zero ttl", acquire, "", []string{"k"}, []string{"v", "0"}, "error:ERR invalid expire time in 'set' command"},
		{"a missing ARGV", acquire, "", []string{"k"}, []string{"v"}, "error:ERR Lua redis lib command arguments must be strings or integers"},
		{"a missing KEYS", acquire, "", nil, []string{"v", "100"}, "error:ERR Lua redis lib command arguments must be strings or integers"},
		{"extend with a bad ttl", extend, "v", []string{"k"}, []string{"v", "1.5"}, "error:ERR value is not an integer or out of range"},
		{"extend with a bad ttl, not held", extend, "", []string{"k"}, []string{"v", "1.5"}, "int:0"},
		{"extend with a bad ttl, held by another", extend, "w", []string{"k"}, []string{"v", "1.5"}, "int:0"},
		{"arithmetic on a missing ARGV", `local t = ARGV[3] + 1 return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', t)`, "", []string{"k"}, []string{"v", "1"},
			"error:ERR user_script:1: attempt to perform arithmetic on field '?' (a nil value)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Recognise([]byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			f := newFake()
			rc.do(t, "FLUSHALL")
			if tt.held != "" {
				f.kv["k"] = fakeKey{tt.held, time.Now().Add(10 * time.Second)}
				rc.do(t, "SET", "k", tt.held, "PX", "10000")
			}
			got, err := s.Run(context.Background(), f, tt.keys, tt.argv)
			var se ScriptError
			if errors.As(err, &se) {
				got = se
			} else if err != nil {
				t.Fatal(err)
			}
			if fmtReply(got) != tt.want {
				t.Fatalf("Run: %s, want %s", fmtReply(got), tt.want)
			}
			args := append([]string{"EVAL", tt.src, strconv.Itoa(len(tt.keys))}, tt.keys...)
			if real := rc.do(t, append(args, tt.argv...)...); fmtReply(real) != tt.want {
				t.Errorf("one Redis answers %s, Run %s", fmtReply(real), tt.want)
			}
			for _, c := range f.calls {
				if !strings.HasPrefix(c, "get ") {
					t.Fatalf("the quorum was asked to %s", c)
				}
			}
		})
	}
}

// TestDeclare runs declared shapes over the fake quorum.
func TestDeclare(t *testing.T) {
	ctx := context.Background()
	acq, err := Declare(Declaration{Shape: Acquire, Key: 1, Value: 2, TTL: 1, TTLUnit: "s"})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Declare(Declaration{Shape: Release, Key: 1, Value: 1, Done: Status("OK"), Failed: int64(-1)})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	if r, err := acq.Run(ctx, f, []string{"k"}, []string{"30", "me"}); err != nil || r != int64(1) {
		t.Fatalf("acquire: %v %v", r, err)
	}
	if v, ok := f.held("k"); !ok || v.val != "me" || time.Until(v.exp) < 29*time.Second {
		t.Fatalf("after acquire: %+v %v", v, ok)
	}
	if r, err := acq.Run(ctx, f, []string{"k"}, []string{"30", "you"}); err != nil || r != int64(0) {
		t.Fatalf("second acquire: %v %v", r, err)
	}
	if r, err := rel.Run(ctx, f, []string{"k"}, []string{"you"}); err != nil || r != int64(-1) {
		t.Fatalf("release by another: %v %v", r, err)
	}
	if r, err := rel.Run(ctx, f, []string{"k"}, []string{"me"}); err != nil || r != Status("OK") {
		t.Fatalf("release: %v %v", r, err)
	}
	if _, err := acq.Run(ctx, f, []string{"k"}, []string{"x", "me"}); err == nil || err.Error() != "ERR value is not an integer or out of range" {
		t.Fatalf("bad ttl: %v", err)
	}
	for _, d := range []Declaration{{Shape: "lock", Value: 1}, {Shape: Acquire, Value: 1}, {Shape: Release}, {Shape: SemAcquire, Value: 1, TTL: 2}} {
		if _, err := Declare(d); err == nil {
			t.Errorf("Declare(%+v) accepted", d)
		}
	}
}

// FuzzRecognise: no input makes the recogniser panic or run unbounded,
// and whatever it recognises runs without panicking.
func FuzzRecognise(f *testing.F) {
	for _, lc := range libCases {
		f.Add([]byte(lc.src))
	}
	for _, name := range []string{"write", "read", "refresh", "release", "exists", "probe"} {
		b, err := os.ReadFile(filepath.Join("testdata", "zlock", name+".lua"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(eachAcquire))
	f.Add([]byte("--[==[ x ]==] return [[a]] .. 'b' .. \"c\\65\""))
	f.Add([]byte("while true do local x = ARGV[1] .. KEYS[1] end"))
	f.Fuzz(func(t *testing.T, src []byte) {
		// A hang would stall the worker until -fuzztime ran out and
		// be reported without its input; a watchdog panics with it
		// instead, which the fuzzer records as a crasher.
		watchdog := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Recognise or Run still running after 5s on %q", src)) })
		defer watchdog.Stop()
		s, err := Recognise(src)
		if err != nil {
			if strings.Contains(err.Error(), internalError) {
				t.Fatal(err)
			}
			return
		}
		for _, keys := range [][]string{{"a", "b"}, {"a"}} {
			for _, argv := range [][]string{{"v", "1000", "0", "5"}, {"1700000000.5", "v", "1000"}, {}} {
				if _, err := s.Run(context.Background(), newFake(), keys, argv); err != nil && strings.Contains(err.Error(), internalError) {
					t.Fatal(err)
				}
			}
		}
	})
}

// TestComputedPublishName: a command named in ARGV runs only as PUBLISH
// or SPUBLISH (Redisson's choice of pub/sub); any other name is refused
// before the quorum is asked.
func TestComputedPublishName(t *testing.T) {
	s, err := Recognise([]byte(redisson323Unlock))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, want string }{
		{"publish", ""},
		{"SPublish", ""},
		{"del", "ERR drop-in: ARGV[4] names the command the script runs; only PUBLISH or SPUBLISH is served there"},
	}
	for _, tt := range tests {
		fake := newFake()
		_, err := s.Run(context.Background(), fake, []string{"lk", "ch"}, []string{"0", "30000", "me", tt.name})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: error %q, want %q", tt.name, got, tt.want)
		}
		if tt.want != "" && len(fake.calls) > 0 {
			t.Errorf("%s: refused after asking the quorum: %v", tt.name, fake.calls)
		}
	}
}

// TestUnlockLatch: Redisson's unlock since 3.24 records its answer in a
// latch key; the same request retried answers it again without taking a
// second hold away.
func TestUnlockLatch(t *testing.T) {
	s, err := Recognise([]byte(redissonLatchUnlock))
	if err != nil {
		t.Fatal(err)
	}
	fake := newFake()
	ctx := context.Background()
	if ok, _ := fake.Hold(ctx, "lk", "me", time.Minute); !ok {
		t.Fatal("hold")
	}
	fake.Hold(ctx, "lk", "me", time.Minute)
	keys := []string{"lk", "ch", "latch:req1"}
	argv := []string{"0", "30000", "me", "publish", "5000"}
	for i := range 2 {
		v, err := s.Run(ctx, fake, keys, argv)
		if err != nil || v != int64(0) {
			t.Fatalf("run %d: %v %v, want 0 (a hold left)", i+1, v, err)
		}
	}
	if fake.holds["lk"] != 1 {
		t.Fatalf("holds %d after one request sent twice, want 1 (ops: %v)", fake.holds["lk"], fake.calls)
	}
	// A new request takes the last hold away.
	v, err := s.Run(ctx, fake, []string{"lk", "ch", "latch:req2"}, argv)
	if err != nil || v != int64(1) {
		t.Fatalf("last unlock: %v %v, want 1", v, err)
	}
	if _, held := fake.held("lk"); held {
		t.Fatal("still held after the last unlock")
	}
	// A script that keeps a memo beside an acquire is refused.
	_, err = Recognise([]byte(`local v = redis.call('get', KEYS[2]) if v then return v end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[1]) == 1 then redis.call('hincrby', KEYS[1], ARGV[1], 1) redis.call('pexpire', KEYS[1], 1000) redis.call('set', KEYS[2], 1, 'px', 1000) return 1 end return 0`))
	if err == nil || !strings.Contains(err.Error(), "keeps a memo key (KEYS[2]) beside a hash lock's acquire") {
		t.Fatalf("memo beside an acquire: %v", err)
	}
}

// TestHashBatchRenewal: Redisson's batched renewal over several locks,
// each with its own owner, extends exactly the locks their owners hold,
// as on one Redis.
func TestHashBatchRenewal(t *testing.T) {
	srv := redistest.Start(t)
	rc := dialRESP(t, srv.Addr)
	s, err := Recognise([]byte(redissonBatchRenew))
	if err != nil {
		t.Fatal(err)
	}
	fake := newFake()
	ctx := context.Background()
	// a: its owner's; b: another's; c: free.
	rc.do(t, "HINCRBY", "a", "o1", "2")
	rc.do(t, "PEXPIRE", "a", "5000")
	rc.do(t, "HINCRBY", "b", "someone", "1")
	rc.do(t, "PEXPIRE", "b", "5000")
	fake.Hold(ctx, "a", "o1", 5*time.Second)
	fake.Hold(ctx, "a", "o1", 5*time.Second)
	fake.Hold(ctx, "b", "someone", 5*time.Second)
	keys, argv := []string{"a", "b", "c"}, []string{"30000", "o1", "o2", "o3"}
	want := rc.do(t, append(append([]string{"EVAL", redissonBatchRenew, "3"}, keys...), argv...)...)
	got, err := s.Run(ctx, fake, keys, argv)
	if err != nil || fmtReply(got) != fmtReply(want) {
		t.Fatalf("Run = %v %v, one Redis %v (ops: %v)", got, err, want, fake.calls)
	}
	if d := time.Until(fake.kv["a"].exp); d < 29*time.Second {
		t.Errorf("a expires in %v, want 30s", d)
	}
	if d := time.Until(fake.kv["b"].exp); d > 6*time.Second {
		t.Errorf("another's lock b extended to %v", d)
	}
}
