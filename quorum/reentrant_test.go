package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReentrant: a token's re-entrant grants count holds; each release
// takes one away and only the last frees the lock; a plain grant it joins
// counts as one; the count survives a master restarted empty; a failed
// try and an abandoned grant take away only their own hold; the count is
// bounded; and nothing is left once the lock is free.
func TestReentrant(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{MaxHolds: 4})
	ctx := context.Background()
	hold := func(tok string) *Lease {
		t.Helper()
		l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: tok, Options: LockOptions{Reentrant: true}})
		if err != nil || l == nil {
			t.Fatalf("re-entrant grant of %s: %v %v", tok, l, err)
		}
		return l
	}
	holds := func() int {
		t.Helper()
		info, err := c.eng.Info(ctx, Lock, "r")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			return 0
		}
		return info.Holds
	}
	release := func(tok string, want bool) {
		t.Helper()
		if held, err := c.eng.Release(ctx, &Lease{Primitive: Lock, Resources: []string{"r"}, Token: tok}); held != want || err != nil {
			t.Fatalf("release of %s: %v %v, want %v", tok, held, err, want)
		}
	}
	competitor := func() bool {
		t.Helper()
		l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if l != nil {
			c.eng.Release(ctx, l)
		}
		return l != nil
	}

	a := hold("t")
	c.waitHeld(t, "r", "t") // nothing contends: the grant reaches every master
	b := hold("t")
	if b.Fences[0] != a.Fences[0] {
		t.Errorf("a second hold changed the fence: %d then %d", a.Fences[0], b.Fences[0])
	}
	if n := holds(); n != 2 {
		t.Fatalf("2 holds, RLOCKINFO counts %d", n)
	}
	if competitor() {
		t.Fatal("another token granted beside a re-entrant lock")
	}
	c.nodes[0].restart() // empty: the holds live on the other four
	if n := holds(); n != 2 {
		t.Fatalf("after a master restarted empty: %d holds, want 2", n)
	}
	release("t", true)
	if n := holds(); n != 1 || competitor() {
		t.Fatalf("after one release: %d holds (want 1), or granted to another", n)
	}
	release("t", true)
	if n := holds(); n != 0 || !competitor() {
		t.Fatalf("after the last release: %d holds, or not granted to another", n)
	}
	release("t", false)

	// A plain grant counts as one hold once a re-entrant one joins it.
	plain, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "u"})
	if err != nil || plain == nil {
		t.Fatalf("plain grant: %v %v", plain, err)
	}
	hold("u")
	if n := holds(); n != 2 {
		t.Fatalf("a plain grant and a re-entrant one: %d holds", n)
	}
	// The most holds: 4.
	hold("u")
	hold("u")
	if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "u", Options: LockOptions{Reentrant: true}}); !errors.Is(err, ErrTooManyHolds) {
		t.Fatalf("a fifth hold: %v %v", l, err)
	}
	// A try that fails for want of a quorum takes away only its own hold.
	for _, f := range c.nodes[2:] {
		f.setDown(true)
	}
	if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "u", Options: LockOptions{Reentrant: true}}); l != nil || !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("a try with 3 of 5 masters down: %v %v", l, err)
	}
	for _, f := range c.nodes[2:] {
		f.setDown(false)
	}
	if n := holds(); n != 4 {
		t.Fatalf("after a failed try: %d holds, want 4", n)
	}
	// An abandoned grant (its client left) gives back only its hold.
	release("u", true)
	ab := hold("u")
	c.eng.Abandon(ctx, ab)
	if !eventually(2*time.Second, func() bool { return holds() == 3 }) {
		t.Fatalf("after an abandoned hold: %d holds, want 3", holds())
	}
	for range 3 {
		release("u", true)
	}
	if holds() != 0 {
		t.Fatal("held after as many releases as holds")
	}
	for _, k := range []string{"r", c.eng.holdsKey("r")} {
		for i, f := range c.nodes {
			if !eventually(time.Second, func() bool { return !f.m.Exists(k) }) {
				t.Errorf("master %d keeps %s", i, k)
			}
		}
	}
	reentrant := LockOptions{Reentrant: true}
	for _, bad := range []Request{
		{Resources: []string{"r"}, TTL: time.Second, Options: reentrant},                              // no token
		{Resources: []string{"a", "b"}, TTL: time.Second, Token: "t", Options: reentrant},             // two resources
		{Primitive: Fair, Resources: []string{"r"}, TTL: time.Second, Token: "t", Options: reentrant}, // a fair lock
	} {
		if _, err := c.eng.Acquire(ctx, bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: %v, want a bad request", bad, err)
		}
	}
}

// TestReentrantReenrols: a re-entrant lock kept alive by extensions while
// three of five masters restart empty, one after the other, keeps its
// count: each extension that takes the lock again on a restarted master
// takes its holds there too, so they never fall below a quorum.
func TestReentrantReenrols(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	for range 2 {
		if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: ttl, Token: "t", Options: LockOptions{Reentrant: true}}); err != nil || l == nil {
			t.Fatalf("hold: %v %v", l, err)
		}
	}
	lease := &Lease{Primitive: Lock, Resources: []string{"r"}, Token: "t"}
	extend := func() {
		t.Helper()
		if v, err := c.eng.Extend(ctx, lease, ttl); v <= 0 || err != nil {
			t.Fatalf("extend: %v %v", v, err)
		}
	}
	key := c.eng.holdsKey("r")
	for i := range 3 {
		c.nodes[i].restart()
		// The holder keeps extending, as a client would, until master i
		// has rejoined and an extension has re-enrolled it with both
		// holds: an extension may leave the re-enrolment to the next
		// one (when the holds a quorum records are not known yet).
		deadline := time.Now().Add(5 * time.Second)
		for {
			extend()
			st := c.eng.nodeStatus()[i]
			if n, _ := c.nodes[i].m.ZMembers(key); st.Restarts >= 1 && st.State == StateUp && len(n) == 2 {
				break
			}
			if time.Now().After(deadline) {
				n, _ := c.nodes[i].m.ZMembers(key)
				for j, f := range c.nodes {
					m, _ := f.m.ZMembers(key)
					v, _ := f.m.Get("r")
					t.Logf("master %d: holds %v, lock %q", j, m, v)
				}
				t.Fatalf("master %d not re-enrolled with both holds in 5 s: %+v, holds %v", i, st, n)
			}
			time.Sleep(ttl / 4)
		}
	}
	info, err := c.eng.Info(ctx, Lock, "r")
	if err != nil || !info.Held || info.Holds != 2 {
		t.Fatalf("after 3 of 5 masters restarted empty: %+v %v, want 2 holds", info, err)
	}
	for _, want := range []bool{true, true, false} {
		if held, err := c.eng.Release(ctx, lease); held != want || err != nil {
			t.Fatalf("release: %v %v, want %v", held, err, want)
		}
	}
}

// TestReentrantDowngrade: the holder of a re-entrant lock that takes the
// read lock with its token keeps it when its last hold is released, as a
// plain lock's downgrade does: no writer gets in beside the reader.
func TestReentrantDowngrade(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for range 2 {
		if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "w", Options: LockOptions{Reentrant: true}}); err != nil || l == nil {
			t.Fatalf("hold: %v %v", l, err)
		}
	}
	if l, err := c.eng.Acquire(ctx, Request{Primitive: Read, Resources: []string{"r"}, TTL: 5 * time.Second, Token: "w"}); err != nil || l == nil {
		t.Fatalf("downgrade: %v %v", l, err)
	}
	lease := &Lease{Primitive: Lock, Resources: []string{"r"}, Token: "w"}
	for range 2 {
		if held, err := c.eng.Release(ctx, lease); !held || err != nil {
			t.Fatalf("release a hold: %v %v", held, err)
		}
	}
	if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second}); l != nil || err != nil {
		t.Fatalf("a writer beside the downgraded reader: %v %v", l, err)
	}
	info, err := c.eng.Info(ctx, Lock, "r")
	if err != nil || !info.Held || !info.Mine("w") || info.Readers == nil {
		t.Fatalf("after the last hold: %+v %v, want the reader w", info, err)
	}
}

// TestReentrantReenrolNeedsHolds: a master that lost a re-entrant lock is
// re-enrolled with the holds a quorum records, or not at all. When fewer
// than a quorum of the masters holding it answer the read of the holds in
// time, the holds are unknown, and taking the lock there without them
// would let one release free it on that master while the holder still
// has a hold (the re-enrolment waits for the next extension).
func TestReentrantReenrolNeedsHolds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	const ttl = 5 * time.Second
	for range 2 {
		if l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: ttl, Token: "t", Options: LockOptions{Reentrant: true}}); err != nil || l == nil {
			t.Fatalf("hold: %v %v", l, err)
		}
	}
	ls, err := c.eng.lockSet([]string{"r"})
	if err != nil {
		t.Fatal(err)
	}
	lock, holds := ls.keys[0], c.eng.holdsKey("r")
	c.eng.bg.Wait() // the grants' requests have landed everywhere
	lost := c.nodes[0]
	lost.del(lock)
	lost.del(holds)
	// Two of the four masters that hold it answer the holds' read late.
	for _, f := range c.nodes[1:3] {
		f.mu.Lock()
		f.holdNext = map[string]time.Duration{"lock_info": 4 * c.eng.opts.MasterTimeout}
		f.mu.Unlock()
	}
	lease := &Lease{Primitive: Lock, Resources: []string{"r"}, Token: "t"}
	if v, err := c.eng.Extend(ctx, lease, ttl); v <= 0 || err != nil {
		t.Fatalf("extend: %v %v", v, err)
	}
	c.eng.bg.Wait()
	for _, f := range c.nodes {
		f.drain()
	}
	if _, ok := lost.value(lock); ok {
		if n, _ := lost.m.ZMembers(holds); len(n) != 2 {
			t.Fatalf("master 0 re-enrolled with holds %v while they were unknown, want none or the 2", n)
		}
	}
	// With every holder answering in time, the next extension re-enrols
	// it with both holds.
	if v, err := c.eng.Extend(ctx, lease, ttl); v <= 0 || err != nil {
		t.Fatalf("extend: %v %v", v, err)
	}
	if !eventually(time.Second, func() bool { n, _ := lost.m.ZMembers(holds); return len(n) == 2 }) {
		n, _ := lost.m.ZMembers(holds)
		t.Fatalf("master 0 re-enrolled with holds %v, want the 2", n)
	}
}

// TestReentrantReleaseSeesFewMasters: a release that hears from only some
// of the masters holding a re-entrant lock must not take a hold it cannot
// see on a quorum for the last one. The second hold is on masters 0-2,
// the first on all five; the release hears masters 2-4 only (0 and 1
// stall), where the second hold shows once: it may still be on a quorum,
// so one hold is taken away and the lock stays held.
func TestReentrantReleaseSeesFewMasters(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{MaxHolds: 4})
	ctx := context.Background()
	hold := func() {
		t.Helper()
		l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "t", Options: LockOptions{Reentrant: true}})
		if err != nil || l == nil {
			t.Fatalf("re-entrant grant: %v %v", l, err)
		}
	}
	hold()
	c.waitHeld(t, "r", "t")
	c.nodes[3].setDown(true)
	c.nodes[4].setDown(true)
	hold()
	c.nodes[3].setDown(false)
	c.nodes[4].setDown(false)
	c.nodes[0].hold()
	c.nodes[1].hold()
	held, err := c.eng.Release(ctx, &Lease{Primitive: Lock, Resources: []string{"r"}, Token: "t"})
	if !held || err != nil {
		t.Fatalf("release: %v %v", held, err)
	}
	c.nodes[0].unhold()
	c.nodes[1].unhold()
	c.nodes[0].drain()
	c.nodes[1].drain()
	info, err := c.eng.Info(ctx, Lock, "r")
	if err != nil || !info.Held || info.Holder != "t" || info.Holds != 1 {
		t.Fatalf("after one release of two holds: %v %v, want held by t with 1 hold", info, err)
	}
	l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second})
	if err != nil || l != nil {
		t.Fatalf("a competitor got the lock with a hold left: %v %v", l, err)
	}
}

// TestReentrantReleaseAnsweredLate: a release of a re-entrant lock whose
// masters all answer after MasterTimeout (and within the release's own
// timeout) must not answer "not held": each late answer records the holds
// (the release released nothing there), and the lock is still held. Found
// by the simulation (seed 1796059379543843860, three slowed masters).
func TestReentrantReleaseAnsweredLate(t *testing.T) {
	// Not parallel: beside the parallel tests that build many clusters at
	// once, TestFairLockOneOrder failed in 5 of 24 runs of the package
	// under -race (none in 7 with this test skipped, 1 in 7 with it
	// run first, alone). Its strict ticket order is load-sensitive.
	c := newCluster(t, 3, Options{ReleaseRetry: 2 * time.Second})
	ctx := context.Background()
	l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 5 * time.Second, Token: "t", Options: LockOptions{Reentrant: true}})
	if err != nil || l == nil {
		t.Fatalf("re-entrant grant: %v %v", l, err)
	}
	c.waitHeld(t, "r", "t")
	for _, n := range c.nodes {
		n.setDelay(3 * testTimeout) // late for the round, in time for the request
	}
	held, err := c.eng.Release(ctx, l)
	for _, n := range c.nodes {
		n.setDelay(0)
		n.drain()
	}
	if err == nil && !held {
		t.Fatal("release answered not held; the masters hold the lock re-entrantly and released nothing")
	}
	info, err2 := c.eng.Info(ctx, Lock, "r")
	if err2 != nil {
		t.Fatal(err2)
	}
	if held && info.Held || !held && (!info.Held || info.Holder != "t") {
		t.Fatalf("release answered held=%v err=%v, then the lock: %+v", held, err, info)
	}
}
