package tests

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReentrantTwoProxies: a token's re-entrant holds, taken through two
// proxies, are counted across both; each RUNLOCK through either takes one
// away while a master is paused and another restarted empty; another
// client is refused until the last hold is released, then granted with
// a greater fence.
func TestReentrantTwoProxies(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	c1, c2 := startProxy(t, cfg).Client(), startProxy(t, cfg).Client()
	holds := func(want int64) {
		t.Helper()
		m := do(t, c1, "RLOCKINFO", "acct", "me").(map[any]any)
		if m["held"] != int64(1) || m["mine"] != int64(1) || m["holds"] != want {
			t.Fatalf("RLOCKINFO: %v, want held and mine with %d holds", m, want)
		}
	}
	var fence int64
	for i, c := range []*redis.Client{c1, c2, c1} {
		g, ok := rlock(t, c, "acct", 10000, "TOKEN", "me", "REENTRANT")
		if !ok || g.token != "me" || i > 0 && g.fence != fence {
			t.Fatalf("hold %d: %v %+v (first fence %d)", i+1, ok, g, fence)
		}
		fence = g.fence
		// Nothing contends: the grant reaches every master, so the next
		// hold finds the lock there and keeps its fence.
		waitFor(t, 2*time.Second, "the hold on every master", func() bool { return cl.holders("acct", "me") == 5 })
	}
	holds(3)
	if _, ok := rlock(t, c2, "acct", 1000); ok {
		t.Fatal("another client granted beside a re-entrant lock")
	}
	cl.servers[4].Pause()
	cl.servers[0].Restart() // empty: its holds are on the other masters
	if v := do(t, c2, "RUNLOCK", "acct", "me"); v != int64(1) {
		t.Fatalf("first RUNLOCK: %v", v)
	}
	holds(2)
	if v := do(t, c1, "RUNLOCK", "acct", "me"); v != int64(1) {
		t.Fatalf("second RUNLOCK: %v", v)
	}
	holds(1)
	if _, ok := rlock(t, c2, "acct", 1000); ok {
		t.Fatal("another client granted while one hold is left")
	}
	cl.servers[4].Resume()
	if v := do(t, c2, "RUNLOCK", "acct", "me"); v != int64(1) {
		t.Fatalf("last RUNLOCK: %v", v)
	}
	g, ok := rlock(t, c2, "acct", 1000)
	if !ok || g.fence <= fence {
		t.Fatalf("another client after the last hold: %v, fence %d (the holds' %d)", ok, g.fence, fence)
	}
	do(t, c2, "RUNLOCK", "acct", g.token)
	if v := do(t, c1, "RUNLOCK", "acct", "me"); v != int64(0) {
		t.Fatalf("RUNLOCK with no hold left: %v", v)
	}
	expectErr(t, c1, "ERR REENTRANT needs TOKEN", "RLOCK", "acct", 1000, "REENTRANT")
	cl.expectOnlyFencesWithin(t, 5*time.Second)
}
