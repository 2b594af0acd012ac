package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// multiGrant is a decoded RMULTILOCK reply.
type multiGrant struct {
	token    string
	validity int64
	fences   []int64 // one per distinct resource, in the order first given
}

// multiResources returns the distinct resources of RMULTILOCK's arguments
// (ttl numkeys resource ... [options]) in the order first given, or nil
// when numkeys is not an int within the arguments.
func multiResources(args []any) []string {
	if len(args) < 2 {
		return nil
	}
	n, ok := args[1].(int)
	if !ok || n < 1 || 2+n > len(args) {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, a := range args[2 : 2+n] {
		if r := fmt.Sprint(a); !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// decodeMultiGrant checks that v is [token, validity, fences] with want
// fences (any number if want is 0), each a valid fence.
func decodeMultiGrant(v any, want int) (multiGrant, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return multiGrant{}, fmt.Errorf("RMULTILOCK reply %#v is not [token, validity, fences]", v)
	}
	var g multiGrant
	var okV bool
	g.token, _ = arr[0].(string)
	g.validity, okV = arr[1].(int64)
	fences, okF := arr[2].([]any)
	if g.token == "" || !okV || !okF {
		return multiGrant{}, fmt.Errorf("RMULTILOCK reply %#v is not [token(bulk), validity(int), fences(array)]", v)
	}
	for _, f := range fences {
		n, ok := f.(int64)
		if !ok || n < 1 {
			return multiGrant{}, fmt.Errorf("RMULTILOCK reply %#v has a fence %#v that is not a positive integer", v, f)
		}
		g.fences = append(g.fences, n)
	}
	if want > 0 && len(g.fences) != want {
		return multiGrant{}, fmt.Errorf("RMULTILOCK reply %#v has %d fences for %d distinct resources", v, len(g.fences), want)
	}
	return g, nil
}

// tryMultiLock sends RMULTILOCK args...: (grant, true, nil) when granted,
// (zero, false, nil) on nil, and the error of an error reply or of a reply
// of the wrong shape (one fence per distinct resource).
func tryMultiLock(c *redis.Client, args ...any) (multiGrant, bool, error) {
	v, err := c.Do(context.Background(), append([]any{"RMULTILOCK"}, args...)...).Result()
	if err == redis.Nil {
		return multiGrant{}, false, nil
	}
	if err != nil {
		return multiGrant{}, false, err
	}
	g, err := decodeMultiGrant(v, len(multiResources(args)))
	if err != nil {
		return multiGrant{}, false, err
	}
	return g, true, nil
}

// multiLock is tryMultiLock where an error fails the test.
func multiLock(t testing.TB, c *redis.Client, args ...any) (multiGrant, bool) {
	t.Helper()
	g, ok, err := tryMultiLock(c, args...)
	if err != nil {
		t.Fatalf("RMULTILOCK %v: %v", args, err)
	}
	return g, ok
}

// decodeRlock checks that v is an RLOCK grant [token, validity, fence].
func decodeRlock(v any) (grant, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 3 {
		return grant{}, fmt.Errorf("RLOCK reply %#v is not [token, validity, fence]", v)
	}
	g := grant{}
	g.token, _ = arr[0].(string)
	g.validity, _ = arr[1].(int64)
	g.fence, _ = arr[2].(int64)
	if g.token == "" || g.fence < 1 {
		return grant{}, fmt.Errorf("RLOCK reply %#v has no token or fence", v)
	}
	return g, nil
}

// validityReply checks that v is a validity in (lo, hi] ms.
func validityReply(t testing.TB, what string, v any, lo, hi int64) {
	t.Helper()
	n, ok := v.(int64)
	if !ok || n <= lo || n > hi {
		t.Fatalf("%s = %#v, want a validity in (%d, %d]", what, v, lo, hi)
	}
}

// keysOf lists, on every master that answers, the keys that belong to any
// of resources: their lock keys, and the proxy's per-resource keys under
// redlock-proxy: (such as redlock-proxy:fence:<resource>). Lock keys that
// hold the value foreign (planted by the test itself) are left out.
func (c *cluster) keysOf(t testing.TB, foreign string, resources ...string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i, rc := range c.direct {
		keys, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			continue // a master that is down holds nothing we can see
		}
		for _, k := range keys {
			for _, r := range resources {
				switch {
				case k == r:
					if v, err := rc.Get(ctx, k).Result(); foreign != "" && err == nil && v == foreign {
						continue
					}
					out = append(out, fmt.Sprintf("master%d:%s", i, k))
				case strings.HasPrefix(k, "redlock-proxy:") && strings.HasSuffix(k, ":"+r):
					out = append(out, fmt.Sprintf("master%d:%s", i, k))
				}
			}
		}
	}
	return out
}

// ttlAbove counts the masters on which key's remaining ttl is above d.
func (c *cluster) ttlAbove(key string, d time.Duration) int {
	n := 0
	for _, rc := range c.direct {
		if pttl, err := rc.PTTL(context.Background(), key).Result(); err == nil && pttl > d {
			n++
		}
	}
	return n
}

// fenceRecords counts the masters whose fence counter of resource
// (redlock-proxy:fence:<resource>) holds fence.
func (c *cluster) fenceRecords(fence int64) int {
	n := 0
	for _, rc := range c.direct {
		if v, err := rc.Get(context.Background(), "redlock-proxy:fence-hwm").Int64(); err == nil && v >= fence {
			n++
		}
	}
	return n
}

// TestMultiLockReplies walks every reply of RMULTILOCK, RMULTIUNLOCK and
// RMULTIEXTEND in PROTOCOL.md against 5 real masters and two proxies.
func TestMultiLockReplies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	ca, cb := a.Client(), b.Client()
	ctx := context.Background()

	// The masters have given fences up to 1000 (their fence sequence,
	// one per master, docs/design/fencing.md): the grant's fences are
	// above it, one for every resource.
	for i, rc := range cl.direct {
		if err := rc.Set(ctx, "redlock-proxy:fence-hwm", 1000, 0).Err(); err != nil {
			t.Fatalf("master%d: %v", i, err)
		}
	}
	args := []any{5000, 4, "acct:2", "acct:1", "acct:2", "acct:3"}
	distinct := []string{"acct:2", "acct:1", "acct:3"} // duplicates count once
	g, ok := multiLock(t, ca, args...)
	if !ok {
		t.Fatalf("RMULTILOCK %v on free resources was not granted", args)
	}
	if !hexToken.MatchString(g.token) {
		t.Errorf("fresh token %q is not 128 bits of hex", g.token)
	}
	if g.validity <= 0 || g.validity > 5000-50-2 {
		t.Errorf("validity %d outside (0, ttl - drift]", g.validity)
	}
	if len(g.fences) != 3 || g.fences[0] <= 1000 || g.fences[1] != g.fences[0] || g.fences[2] != g.fences[0] {
		t.Errorf("fences %v: want three equal fences above the masters' 1000", g.fences)
	}
	// Every member is an ordinary lock key holding the token, on every
	// master (the reply may come before the last master answered).
	waitFor(t, time.Second, "every member held with the token on every master", func() bool {
		for _, r := range distinct {
			if cl.holders(r, g.token) != 5 {
				return false
			}
		}
		return true
	})
	if n := cl.fenceRecords(g.fences[0]); n < 3 {
		t.Errorf("fences %v: the fence sequence reaches %d on %d masters, want a quorum", g.fences, g.fences[0], n)
	}
	if pttl := cl.direct[0].PTTL(ctx, "acct:3").Val(); pttl <= 4*time.Second || pttl > 5*time.Second {
		t.Errorf("PTTL of a member %v, want about 5s", pttl)
	}

	// Held: a member through the other proxy, and an overlapping set in
	// another order, which takes nothing of its free member either.
	if _, ok := rlock(t, cb, "acct:1", 5000); ok {
		t.Fatal("RLOCK of a member of a held multi-lock was granted")
	}
	if _, ok := multiLock(t, cb, 5000, 2, "acct:9", "acct:3"); ok {
		t.Fatal("RMULTILOCK over a set overlapping a held multi-lock was granted")
	}
	if keys := cl.keysOf(t, "", "acct:9"); len(keys) > 0 {
		t.Fatalf("the refused RMULTILOCK left %v", keys)
	}

	// RMULTIEXTEND through the other proxy: the new validity, and the ttl
	// of every member reset on a quorum; a wrong token extends nothing.
	validityReply(t, "RMULTIEXTEND", do(t, cb, "RMULTIEXTEND", g.token, 20000, "acct:2", "acct:1", "acct:3"), 10000, 20000-200-2)
	for _, r := range distinct {
		if n := cl.ttlAbove(r, 19*time.Second); n < 3 {
			t.Errorf("after RMULTIEXTEND 20000, %s has a ttl above 19s on %d masters, want a quorum", r, n)
		}
	}
	if v := do(t, cb, "RMULTIEXTEND", "not-the-token", 20000, "acct:2", "acct:1", "acct:3"); v != nil {
		t.Errorf("RMULTIEXTEND with a wrong token = %v, want nil", v)
	}

	// RMULTIUNLOCK: 0 for a wrong token, 1 while held, 0 after.
	if v := do(t, ca, "RMULTIUNLOCK", "not-the-token", "acct:2", "acct:1", "acct:3"); v != int64(0) {
		t.Errorf("RMULTIUNLOCK with a wrong token = %v, want 0", v)
	}
	if v := do(t, ca, "RMULTIUNLOCK", g.token, "acct:2", "acct:1", "acct:3"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
	if v := do(t, ca, "RMULTIUNLOCK", g.token, "acct:2", "acct:1", "acct:3"); v != int64(0) {
		t.Errorf("second RMULTIUNLOCK = %v, want 0", v)
	}
	if v := do(t, cb, "RMULTIEXTEND", g.token, 1000, "acct:2", "acct:1", "acct:3"); v != nil {
		t.Errorf("RMULTIEXTEND after release = %v, want nil", v)
	}
	waitFor(t, time.Second, "no key of the released multi-lock on any master", func() bool {
		return len(cl.keysOf(t, "", distinct...)) == 0
	})

	// Each member's next grant has a greater fence.
	for i, r := range distinct {
		p, ok := rlock(t, cb, r, 5000)
		if !ok || p.fence <= g.fences[i] {
			t.Fatalf("RLOCK %s after the release: %v %+v, after multi-lock fence %d", r, ok, p, g.fences[i])
		}
		if v := do(t, cb, "RUNLOCK", r, p.token); v != int64(1) {
			t.Fatalf("RUNLOCK %s = %v", r, v)
		}
	}

	// TOKEN: a retry with the same token (lower-case option name, other
	// proxy) is granted again, with the ttl reset and the same fences (the
	// same grant; greater only where a master had lost the key); another
	// token is not.
	g1, ok := multiLock(t, ca, 5000, 2, "job:a", "job:b", "TOKEN", "client-7:attempt")
	if !ok || g1.token != "client-7:attempt" {
		t.Fatalf("RMULTILOCK with TOKEN: %v %+v", ok, g1)
	}
	g2, ok := multiLock(t, cb, 20000, 2, "job:a", "job:b", "token", "client-7:attempt")
	if !ok || g2.token != g1.token {
		t.Fatalf("retry with the same token: %v %+v after %+v", ok, g2, g1)
	}
	for i := range g1.fences {
		if g2.fences[i] < g1.fences[i] {
			t.Errorf("retry fences %v below the first grant's %v", g2.fences, g1.fences)
		}
	}
	if n := cl.ttlAbove("job:b", 19*time.Second); n < 3 {
		t.Errorf("retry did not reset the ttl: above 19s on %d masters, want a quorum", n)
	}
	if _, ok := multiLock(t, ca, 5000, 2, "job:a", "job:b", "TOKEN", "someone-else"); ok {
		t.Fatal("another token took a held multi-lock")
	}
	if v := do(t, ca, "RMULTIUNLOCK", "client-7:attempt", "job:a", "job:b"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
	waitFor(t, time.Second, "no lock key left", func() bool { return len(cl.lockKeys(t)) == 0 })
}

// TestMultiLockBadInput checks every input error of the three commands, in
// Redis's wording, and that none of them reaches the masters.
func TestMultiLockBadInput(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = time.Minute
	cfg.maxWait = 10 * time.Second
	p := startProxy(t, cfg)
	c := p.Client()
	ctx := context.Background()
	long := strings.Repeat("t", 129)
	const (
		arityLock   = "ERR wrong number of arguments for 'rmultilock' command"
		arityUnlock = "ERR wrong number of arguments for 'rmultiunlock' command"
		arityExtend = "ERR wrong number of arguments for 'rmultiextend' command"
		notInt      = "ERR value is not an integer or out of range"
		numkeysLow  = "ERR numkeys should be greater than 0"
		syntax      = "ERR syntax error"
		expireLock  = "ERR invalid expire time in 'rmultilock' command"
		expireExt   = "ERR invalid expire time in 'rmultiextend' command"
		waitNeg     = "ERR timeout is negative"
		waitRange   = "ERR timeout is out of range"
		empty       = "ERR resource name must not be empty"
		tokenLen    = "ERR token must be 1 to 128 bytes"
		reserved    = "ERR resource name is reserved"
	)
	tests := []struct {
		args []any
		want string
	}{
		{[]any{"RMULTILOCK"}, arityLock},
		{[]any{"RMULTILOCK", 1000}, arityLock},
		{[]any{"RMULTILOCK", 1000, 1}, arityLock},
		{[]any{"RMULTILOCK", "ten", 1, "a"}, notInt},
		{[]any{"RMULTILOCK", 1000, "two", "a", "b"}, notInt},
		{[]any{"RMULTILOCK", 1000, "1.5", "a"}, notInt},
		{[]any{"RMULTILOCK", 1000, "99999999999999999999", "a"}, notInt},
		{[]any{"RMULTILOCK", 1000, 0, "a"}, numkeysLow},
		{[]any{"RMULTILOCK", 1000, -1, "a"}, numkeysLow},
		{[]any{"RMULTILOCK", 1000, 3, "a", "b"}, syntax}, // fewer resources than numkeys
		{[]any{"RMULTILOCK", 1000, 1, "a", "b"}, syntax}, // "b" read as an option
		{[]any{"RMULTILOCK", 0, 1, "a"}, expireLock},
		{[]any{"RMULTILOCK", -5, 1, "a"}, expireLock},
		{[]any{"RMULTILOCK", 60001, 1, "a"}, expireLock + " (limits.max_ttl is 1m0s)"},
		{[]any{"RMULTILOCK", 1000, 1, "a", "WAIT"}, syntax},
		{[]any{"RMULTILOCK", 1000, 1, "a", "WAIT", "soon"}, notInt},
		{[]any{"RMULTILOCK", 1000, 1, "a", "WAIT", -1}, waitNeg},
		{[]any{"RMULTILOCK", 1000, 1, "a", "WAIT", 10001}, waitRange + " (limits.max_wait is 10s)"},
		{[]any{"RMULTILOCK", 1000, 1, "a", "WAIT", 1, "WAIT", 1}, syntax},
		{[]any{"RMULTILOCK", 1000, 1, "a", "NX"}, syntax},
		{[]any{"RMULTILOCK", 1000, 1, "a", "TOKEN"}, syntax},
		{[]any{"RMULTILOCK", 1000, 1, "a", "TOKEN", ""}, tokenLen},
		{[]any{"RMULTILOCK", 1000, 1, "a", "TOKEN", long}, tokenLen},
		{[]any{"RMULTILOCK", 1000, 2, "a", ""}, empty},
		{[]any{"RMULTILOCK", 1000, 1, ""}, empty},
		{[]any{"RMULTILOCK", 1000, 2, "a", "redlock-proxy:x"}, reserved},
		{[]any{"RMULTILOCK", 1000, 1, "redlock-proxy:fence:a"}, reserved},

		{[]any{"RMULTIUNLOCK"}, arityUnlock},
		{[]any{"RMULTIUNLOCK", "t"}, arityUnlock},
		{[]any{"RMULTIUNLOCK", "", "a"}, tokenLen},
		{[]any{"RMULTIUNLOCK", long, "a"}, tokenLen},
		{[]any{"RMULTIUNLOCK", "t", "a", ""}, empty},
		{[]any{"RMULTIUNLOCK", "t", "a", "redlock-proxy:x"}, reserved},

		{[]any{"RMULTIEXTEND"}, arityExtend},
		{[]any{"RMULTIEXTEND", "t"}, arityExtend},
		{[]any{"RMULTIEXTEND", "t", 1000}, arityExtend},
		{[]any{"RMULTIEXTEND", "t", "x", "a"}, notInt},
		{[]any{"RMULTIEXTEND", "t", 0, "a"}, expireExt},
		{[]any{"RMULTIEXTEND", "t", -1, "a"}, expireExt},
		{[]any{"RMULTIEXTEND", "t", 60001, "a"}, expireExt + " (limits.max_ttl is 1m0s)"},
		{[]any{"RMULTIEXTEND", "", 1000, "a"}, tokenLen},
		{[]any{"RMULTIEXTEND", long, 1000, "a"}, tokenLen},
		{[]any{"RMULTIEXTEND", "t", 1000, "a", ""}, empty},
		{[]any{"RMULTIEXTEND", "t", 1000, "redlock-proxy:x"}, reserved},
	}
	// Real masters count the scripts they ran; embedded ones do not, and
	// only the keys are checked.
	before := 0
	if redistest.Real() {
		before = cl.scriptCalls(t)
	}
	for _, tc := range tests {
		err := c.Do(ctx, tc.args...).Err()
		if err == nil || err == redis.Nil || err.Error() != tc.want {
			t.Errorf("%q: got error %v, want %q", tc.args, err, tc.want)
		}
	}
	if redistest.Real() {
		if after := cl.scriptCalls(t); after != before {
			t.Errorf("bad input reached the masters: %d script calls, was %d", after, before)
		}
	}
	for i, rc := range cl.direct {
		for _, k := range rc.Keys(ctx, "*").Val() {
			if !masterWide(k) {
				t.Errorf("master%d holds %s after bad input", i, k)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Option names are case-insensitive and come in any order.
	g, ok := multiLock(t, c, 1000, 2, "a", "b", "token", "abc", "wait", 10)
	if !ok || g.token != "abc" {
		t.Fatalf("lower-case options: %v %+v", ok, g)
	}
	if v := do(t, c, "RMULTIUNLOCK", "abc", "a", "b"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
}

// TestMultiLockAllOrNothing: a multi-lock is taken whole or not at all, on
// the quorum and on each master: a refused one leaves no key of any member
// on any master, and a granted one holds every member on every master
// that voted for it and none on the others.
func TestMultiLockAllOrNothing(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	ctx := context.Background()

	// One member held as a plain lock on every master.
	held, ok := rlock(t, c, "inv:2", 30000)
	if !ok {
		t.Fatal("RLOCK inv:2 not granted")
	}
	waitFor(t, time.Second, "the plain lock on every master", func() bool { return cl.holders("inv:2", held.token) == 5 })
	if _, ok := multiLock(t, c, 5000, 3, "inv:1", "inv:2", "inv:3"); ok {
		t.Fatal("RMULTILOCK over a set with a held member was granted")
	}
	if keys := cl.keysOf(t, "", "inv:1", "inv:3"); len(keys) > 0 {
		t.Fatalf("the refused RMULTILOCK took its free members: %v", keys)
	}
	if h := cl.holders("inv:2", held.token); h != 5 {
		t.Fatalf("the refused RMULTILOCK touched the plain lock: held on %d of 5 masters", h)
	}
	if v := do(t, c, "RUNLOCK", "inv:2", held.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v, want 1", v)
	}

	// A member held by someone else on 2 of 5 masters: granted on the other
	// 3 (the quorum), each of them holding every member, the 2 none.
	set := []string{"set:a", "set:b", "set:c"}
	for _, rc := range cl.direct[:2] {
		if err := rc.Set(ctx, "set:b", "foreign", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	g, ok := multiLock(t, c, 5000, 3, "set:a", "set:b", "set:c")
	if !ok {
		t.Fatal("RMULTILOCK not granted with 3 of 5 masters free")
	}
	for i, rc := range cl.direct {
		for _, r := range set {
			want := g.token
			if i < 2 {
				want = "" // the master refused the whole set
				if r == "set:b" {
					want = "foreign"
				}
			}
			if v, _ := rc.Get(ctx, r).Result(); v != want {
				t.Errorf("master%d %s = %q, want %q", i, r, v, want)
			}
		}
	}
	if v := do(t, c, "RMULTIUNLOCK", g.token, "set:a", "set:b", "set:c"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
	waitFor(t, time.Second, "no key of the released multi-lock but the foreign ones", func() bool {
		return len(cl.keysOf(t, "foreign", set...)) == 0
	})
	if n := cl.holders("set:b", "foreign"); n != 2 {
		t.Fatalf("the foreign value of set:b is left on %d masters, want 2", n)
	}

	// Held by someone else on 3 of 5: refused, and whatever the 2 free
	// masters granted is rolled back (right after the reply).
	tri := []string{"tri:a", "tri:b", "tri:c"}
	for _, rc := range cl.direct[:3] {
		if err := rc.Set(ctx, "tri:b", "foreign", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := multiLock(t, c, 5000, 3, "tri:a", "tri:b", "tri:c"); ok {
		t.Fatal("RMULTILOCK granted with a member held on 3 of 5 masters")
	}
	waitFor(t, time.Second, "the refused attempt to leave nothing on any master", func() bool {
		return len(cl.keysOf(t, "foreign", tri...)) == 0
	})
	if n := cl.holders("tri:b", "foreign"); n != 3 {
		t.Fatalf("the foreign value of tri:b is left on %d masters, want 3", n)
	}
	if keys := cl.lockKeys(t); len(keys) != 5 {
		t.Fatalf("lock keys %v, want only the 5 foreign ones", keys)
	}
}

// TestMultiLockExcludesPlainLock: multi-locks and plain locks on the same
// resource exclude each other, both ways, through either proxy.
func TestMultiLockExcludesPlainLock(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	a, b := startProxy(t, defaults(cl.addrs())), startProxy(t, defaults(cl.addrs()))
	ca, cb := a.Client(), b.Client()

	// A multi-lock keeps plain locks off each of its members.
	m, ok := multiLock(t, ca, 10000, 2, "ex:1", "ex:2")
	if !ok {
		t.Fatal("RMULTILOCK not granted")
	}
	if _, ok := rlock(t, cb, "ex:2", 10000); ok {
		t.Fatal("RLOCK through the other proxy granted a member of a held multi-lock")
	}
	if _, ok := rlock(t, ca, "ex:1", 10000); ok {
		t.Fatal("RLOCK through the same proxy granted a member of a held multi-lock")
	}
	if v := do(t, cb, "RMULTIUNLOCK", m.token, "ex:1", "ex:2"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK through the other proxy = %v, want 1", v)
	}
	pl, ok := rlock(t, cb, "ex:2", 10000)
	if !ok || pl.fence <= m.fences[1] {
		t.Fatalf("RLOCK after the release: %v %+v, after multi-lock fence %d", ok, pl, m.fences[1])
	}

	// A plain lock keeps off every multi-lock that contains it; the other
	// members stay free.
	if _, ok := multiLock(t, ca, 10000, 2, "ex:3", "ex:2"); ok {
		t.Fatal("RMULTILOCK through the other proxy granted over a held plain lock")
	}
	if _, ok := multiLock(t, cb, 10000, 3, "ex:2", "ex:1", "ex:3"); ok {
		t.Fatal("RMULTILOCK through the same proxy granted over a held plain lock")
	}
	m2, ok := multiLock(t, ca, 10000, 2, "ex:1", "ex:3")
	if !ok {
		t.Fatal("RMULTILOCK over the members the refused attempts did not get was not granted")
	}
	if m2.fences[0] <= m.fences[0] {
		t.Fatalf("ex:1 fence %d after %d", m2.fences[0], m.fences[0])
	}
	if v := do(t, ca, "RUNLOCK", "ex:2", pl.token); v != int64(1) {
		t.Fatalf("RUNLOCK through the other proxy = %v, want 1", v)
	}
	if v := do(t, cb, "RMULTIUNLOCK", m2.token, "ex:1", "ex:3"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}

	// All free again: the whole set, with greater fences.
	m3, ok := multiLock(t, cb, 10000, 3, "ex:1", "ex:2", "ex:3")
	if !ok {
		t.Fatal("RMULTILOCK over released resources not granted")
	}
	if m3.fences[0] <= m2.fences[0] || m3.fences[1] <= pl.fence || m3.fences[2] <= m2.fences[1] {
		t.Fatalf("fences %v after ex:1 %d, ex:2 %d, ex:3 %d", m3.fences, m2.fences[0], pl.fence, m2.fences[1])
	}
	if v := do(t, ca, "RMULTIUNLOCK", m3.token, "ex:1", "ex:2", "ex:3"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
	waitFor(t, time.Second, "no lock key left", func() bool { return len(cl.lockKeys(t)) == 0 })
}

// TestMultiLockMinorityDown: with 2 of 5 masters down a multi-lock is
// granted, extended and released; with 3 down every command answers
// NOQUORUM and the refused acquisition leaves nothing on the 2 that are up.
func TestMultiLockMinorityDown(t *testing.T) {
	waits(t) // mostly waits (expiries, retries, restarts): overlaps the other waiting tests
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	cl.servers[0].Kill()
	cl.servers[1].Kill()

	g, ok := multiLock(t, c, 10000, 3, "md:a", "md:b", "md:c")
	if !ok {
		t.Fatal("RMULTILOCK not granted with 3 of 5 masters up")
	}
	for _, r := range []string{"md:a", "md:b", "md:c"} {
		if h := cl.holders(r, g.token); h != 3 {
			t.Errorf("%s held on %d masters, want the 3 that are up", r, h)
		}
	}
	validityReply(t, "RMULTIEXTEND", do(t, c, "RMULTIEXTEND", g.token, 10000, "md:a", "md:b", "md:c"), 0, 10000-100-2)
	if v := do(t, c, "RMULTIUNLOCK", g.token, "md:a", "md:b", "md:c"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}

	held, ok := multiLock(t, c, 60000, 2, "md:held:1", "md:held:2")
	if !ok {
		t.Fatal("RMULTILOCK not granted with 3 of 5 masters up")
	}
	cl.servers[2].Kill()
	const noq = "NOQUORUM 2 of 5 masters answered, 3 needed"
	expectErr(t, c, noq, "RMULTILOCK", 10000, 2, "md:x", "md:y")
	expectErr(t, c, noq, "RMULTILOCK", 10000, 2, "md:x", "md:y", "WAIT", 300)
	expectErr(t, c, noq, "RMULTIEXTEND", held.token, 10000, "md:held:1", "md:held:2")
	expectErr(t, c, noq, "RMULTIUNLOCK", held.token, "md:held:1", "md:held:2")
	waitFor(t, time.Second, "the refused acquisitions to leave nothing on the masters that are up", func() bool {
		return len(cl.keysOf(t, "", "md:x", "md:y")) == 0
	})
}

// TestMultiLockWaitWoken: an RMULTILOCK ... WAIT on proxy B waiting for a
// member held through proxy A is woken by its release, long before its
// retry timer.
func TestMultiLockWaitWoken(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.retryDelay = 2 * time.Second
	cfg.retryJitter = time.Millisecond
	a, b := startProxy(t, cfg), startProxy(t, cfg)
	ca, cb := a.Client(), b.Client()
	ctx := context.Background()
	g, ok := rlock(t, ca, "x", 60000)
	if !ok {
		t.Fatal("RLOCK x not granted")
	}

	type result struct {
		g   multiGrant
		ok  bool
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		g, ok, err := tryMultiLock(cb, 5000, 2, "x", "y", "WAIT", 5000)
		got <- result{g, ok, err, time.Now()}
	}()
	const channel = "redlock-proxy:released:x"
	waitFor(t, 5*time.Second, "the waiter to subscribe to x's releases on every master", func() bool {
		for _, rc := range cl.direct {
			if rc.PubSubNumSub(ctx, channel).Val()[channel] < 1 {
				return false
			}
		}
		return true
	})
	released := time.Now()
	if v := do(t, ca, "RUNLOCK", "x", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v, want 1", v)
	}
	r := <-got
	if r.err != nil || !r.ok {
		t.Fatalf("waiter: %+v", r)
	}
	woke := r.at.Sub(released)
	t.Logf("multi-lock waiter granted %v after the release on the other proxy (retry timer: 2s)", woke)
	if woke > 500*time.Millisecond {
		t.Fatalf("waiter granted %v after the release: woken by its timer, not the release", woke)
	}
	if r.g.fences[0] <= g.fence {
		t.Fatalf("x's fence %d in the multi-lock, after its plain lock's %d", r.g.fences[0], g.fence)
	}
	if v := do(t, cb, "RMULTIUNLOCK", r.g.token, "x", "y"); v != int64(1) {
		t.Fatalf("RMULTIUNLOCK = %v, want 1", v)
	}
	waitFor(t, 5*time.Second, "the waiter to unsubscribe", func() bool {
		for _, rc := range cl.direct {
			n := rc.PubSubNumSub(ctx, channel, "redlock-proxy:released:y").Val()
			if n[channel] != 0 || n["redlock-proxy:released:y"] != 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, time.Second, "no lock key left", func() bool { return len(cl.lockKeys(t)) == 0 })
}

// TestMultiLockContention: 8 workers on two proxies take random pairs of 4
// resources, in random order, as multi-locks with WAIT, for a few seconds.
// Every hold of every resource is checked against every other: none may
// overlap and fences must increase in grant order; every WAIT must be
// granted (overlapping sets in opposite orders never deadlock).
func TestMultiLockContention(t *testing.T) {
	busy(t)
	redistest.RequireReal(t, "embedded masters run inside this -race test process, too slow for 50ms master timeouts under this load")
	const workers = 8
	resources := []string{"pool:0", "pool:1", "pool:2", "pool:3"}
	cl := newCluster(t, 5)
	// The binary as shipped: two -race proxies, five masters and this
	// test on two cores manage about 150 cycles/s, too few to make the
	// contention this test is about; the data-race checks run elsewhere.
	cfg := defaults(cl.addrs())
	cfg.plain = true
	proxies := []*Proxy{startProxy(t, cfg), startProxy(t, cfg)}
	clients := []*redis.Client{proxies[0].Client(), proxies[1].Client()}

	var (
		mu     sync.Mutex
		holds  = map[string][]holding{}
		cycles atomic.Int64
		wg     sync.WaitGroup
		errs   = make(chan error, workers)
	)
	// A number of cycles, not a time: enough contention on every machine.
	// The deadline only stops a run that stalls (it is about 20 times what
	// this takes on two cores).
	target := int64(soak(t)) * 1000
	deadline := time.Now().Add(time.Duration(soak(t)) * time.Minute)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			for cycles.Load() < target && time.Now().Before(deadline) {
				pick := rand.Perm(len(resources))
				set := []string{resources[pick[0]], resources[pick[1]]}
				g, ok, err := tryMultiLock(c, 2000, 2, set[0], set[1], "WAIT", 3000)
				got := time.Now()
				if err != nil {
					errs <- fmt.Errorf("worker %d: RMULTILOCK %v: %w", w, set, err)
					return
				}
				if !ok {
					errs <- fmt.Errorf("worker %d: RMULTILOCK %v WAIT 3000 ran out: a stall", w, set)
					return
				}
				released := time.Now()
				v, err := c.Do(context.Background(), "RMULTIUNLOCK", g.token, set[0], set[1]).Result()
				if err != nil || v != int64(1) {
					errs <- fmt.Errorf("worker %d: RMULTIUNLOCK of %v %+v (held %v) = %v, %v", w, set, g, released.Sub(got), v, err)
					return
				}
				mu.Lock()
				for i, r := range set {
					holds[r] = append(holds[r], holding{fence: g.fences[i], got: got, released: released, worker: w})
				}
				mu.Unlock()
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, r := range resources {
		checkExclusive(t, holds[r])
		if h := holds[r]; len(h) > 0 {
			t.Logf("%s: %d grants, fences %d..%d", r, len(h), h[0].fence, h[len(h)-1].fence)
		}
	}
	t.Logf("%d multi-lock cycles by %d workers on 2 proxies", cycles.Load(), workers)
	if n := cycles.Load(); n < target {
		t.Fatalf("only %d of %d cycles before the deadline: a stall", n, target)
	}
	waitFor(t, time.Second, "no lock key left", func() bool { return len(cl.lockKeys(t)) == 0 })
}

// cycleLocks locks and releases every resource with RLOCK / RUNLOCK and
// every set with RMULTILOCK / RMULTIUNLOCK, pipelined in batches, and
// checks every reply.
func cycleLocks(c *redis.Client, plain []string, sets [][]string) error {
	ctx := context.Background()
	const batch = 50
	for len(plain) > 0 {
		n := min(batch, len(plain))
		part := plain[:n]
		plain = plain[n:]
		pipe := c.Pipeline()
		locks := make([]*redis.Cmd, n)
		for i, r := range part {
			locks[i] = pipe.Do(ctx, "RLOCK", r, 10000)
		}
		pipe.Exec(ctx) // every reply is checked below
		pipe = c.Pipeline()
		unlocks := make([]*redis.Cmd, n)
		for i, r := range part {
			v, err := locks[i].Result()
			if err != nil {
				return fmt.Errorf("RLOCK %s: %v", r, err)
			}
			g, err := decodeRlock(v)
			if err != nil {
				return err
			}
			unlocks[i] = pipe.Do(ctx, "RUNLOCK", r, g.token)
		}
		pipe.Exec(ctx)
		for i, r := range part {
			if v, err := unlocks[i].Result(); err != nil || v != int64(1) {
				return fmt.Errorf("RUNLOCK %s = %v, %v", r, v, err)
			}
		}
	}
	for len(sets) > 0 {
		n := min(batch, len(sets))
		part := sets[:n]
		sets = sets[n:]
		pipe := c.Pipeline()
		locks := make([]*redis.Cmd, n)
		for i, set := range part {
			args := []any{"RMULTILOCK", 10000, len(set)}
			for _, r := range set {
				args = append(args, r)
			}
			locks[i] = pipe.Do(ctx, args...)
		}
		pipe.Exec(ctx)
		pipe = c.Pipeline()
		unlocks := make([]*redis.Cmd, n)
		for i, set := range part {
			v, err := locks[i].Result()
			if err != nil {
				return fmt.Errorf("RMULTILOCK %v: %v", set, err)
			}
			g, err := decodeMultiGrant(v, len(set))
			if err != nil {
				return err
			}
			args := []any{"RMULTIUNLOCK", g.token}
			for _, r := range set {
				args = append(args, r)
			}
			unlocks[i] = pipe.Do(ctx, args...)
		}
		pipe.Exec(ctx)
		for i, set := range part {
			if v, err := unlocks[i].Result(); err != nil || v != int64(1) {
				return fmt.Errorf("RMULTIUNLOCK %v = %v, %v", set, v, err)
			}
		}
	}
	return nil
}

// TestReleasedResourcesLeaveNoKeys: what the proxy keeps on the masters is
// bounded by what is live. After 4000 distinct plain locks and 2000
// distinct multi-locks of 3 resources (10,000 distinct resources), all
// released, each master keeps at most a few master-wide keys under
// redlock-proxy: and nothing per resource.
func TestReleasedResourcesLeaveNoKeys(t *testing.T) {
	busy(t)
	const (
		plainN = 4000
		multiN = 2000
		conns  = 4
	)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	ctx := context.Background()

	plain := make([][]string, conns)
	sets := make([][][]string, conns)
	for i := range plainN {
		plain[i%conns] = append(plain[i%conns], fmt.Sprintf("order:%d", i))
	}
	for i := range multiN {
		set := []string{fmt.Sprintf("cart:%d:a", i), fmt.Sprintf("cart:%d:b", i), fmt.Sprintf("cart:%d:c", i)}
		sets[i%conns] = append(sets[i%conns], set)
	}
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for w := range conns {
		c := p.Client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cycleLocks(c, plain[w], sets[w]); err != nil {
				errs <- fmt.Errorf("connection %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	waitFor(t, time.Second, "the releases to reach every master", func() bool { return len(cl.lockKeys(t)) == 0 })
	for i, rc := range cl.direct {
		n, err := rc.DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("master%d: DBSIZE: %v", i, err)
		}
		keys, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatalf("master%d: KEYS: %v", i, err)
		}
		t.Logf("master%d: DBSIZE %d, keys %v", i, n, keys[:min(len(keys), 10)])
		if n > 4 {
			t.Errorf("master%d keeps %d keys after every resource was released, want at most 4 master-wide ones", i, n)
		}
		var stale []string
		for _, k := range keys {
			if !strings.HasPrefix(k, "redlock-proxy:") || strings.HasPrefix(k, "redlock-proxy:fence:") {
				stale = append(stale, k)
			}
		}
		if len(stale) > 0 {
			t.Errorf("master%d keeps %d per-resource keys after their resources were released, e.g. %v", i, len(stale), stale[:min(len(stale), 10)])
		}
	}
}
