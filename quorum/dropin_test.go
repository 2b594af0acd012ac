package quorum

import (
	"context"
	"testing"
	"time"
)

// TestDeleteHeldIgnoresLateDeleteOfSameValue: the SET lock 1 NX + DEL
// idiom. X's lock is deleted; the delete is stranded on two masters (it
// lands late, as on a replaced connection) while Y takes the lock again
// with the same constant value on every master. When the late deletes
// land they must not remove Y's keys: a delete that checks only the value
// (or none) would leave Y's lock on 3 of 5 masters, and two more such
// stragglers on fewer than a quorum.
func TestDeleteHeldIgnoresLateDeleteOfSameValue(t *testing.T) {
	t.Parallel()
	// Room for every master to answer on a loaded machine: the subject
	// needs Y's keys on masters 3 and 4.
	c := newCluster(t, 5, Options{MasterTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	// X is granted on masters 0-2 only: 3 and 4 hold another lock, Z's,
	// which goes once X's tries there were refused (the fakes run each
	// request on a goroutine of its own, so "refused" is waited for).
	for _, f := range c.nodes[3:] {
		f.set("r", "z", time.Minute)
	}
	x, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute, Token: "1", Primitive: SetNX})
	if err != nil || x == nil {
		t.Fatalf("X: %v %v", x, err)
	}
	for _, f := range c.nodes[3:] {
		for end := time.Now().Add(2 * time.Second); f.callsWith("lock_acquire_nx", "1") == 0 && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		if v, _ := f.value("r"); v != "z" {
			t.Fatalf("X's try on a master Z holds: r=%q", v)
		}
		f.del("r")
	}
	late := []<-chan struct{}{c.nodes[3].strand("lock_delete_exact"), c.nodes[4].strand("lock_delete_exact")}
	held, err := c.eng.deleteHeld(ctx, "r", "")
	if err != nil || !held {
		t.Fatalf("DEL: held=%v err=%v", held, err)
	}
	for _, ch := range late {
		<-ch
	}
	y, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute, Token: "1", Primitive: SetNX})
	if err != nil || y == nil {
		t.Fatalf("Y: %v %v", y, err)
	}
	// Y's grant returned at a quorum; its other acquires land right after.
	for end := time.Now().Add(2 * time.Second); c.holders("r", "1") < 5 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if h := c.holders("r", "1"); h != 5 {
		t.Fatalf("Y holds on %d masters before the late deletes land", h)
	}
	c.settle()
	if h := c.holders("r", "1"); h != 5 {
		t.Fatalf("late deletes of X's lock removed Y's: Y holds on %d of 5 masters", h)
	}
}

// TestDeleteHeldLeavesPartialGrants: a delete finds the value on fewer
// than a quorum (an acquire in progress, or remnants): it answers not held
// and touches nothing, so that it can never cut a grant that completes
// right after to fewer than a quorum.
func TestDeleteHeldLeavesPartialGrants(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	c.nodes[0].set("r", "v", time.Minute)
	c.nodes[1].set("r", "v", time.Minute)
	held, err := c.eng.deleteHeld(context.Background(), "r", "")
	if err != nil || held {
		t.Fatalf("DEL of a lock on 2 of 5: held=%v err=%v", held, err)
	}
	c.settle()
	if h := c.holders("r", "v"); h != 2 {
		t.Fatalf("the partial keys were touched: %d left", h)
	}
}

// TestDeleteHeldSparesAttemptWithSameValue: while the holder of "r" (value
// "1") is deleted, another client's acquire with the same value is in
// progress on the two masters the holder does not hold. The delete ends
// the holder's grant only: the other attempt's keys (its own owner nonce)
// are left, so that if it is granted it holds every master it counted.
func TestDeleteHeldSparesAttemptWithSameValue(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{MasterTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	c.nodes[3].setDown(true)
	c.nodes[4].setDown(true)
	h, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute, Token: "1", Primitive: SetNX})
	if err != nil || h == nil {
		t.Fatalf("holder: %v %v", h, err)
	}
	owner := c.eng.opts.MetaPrefix + "owner:r"
	for _, f := range c.nodes[3:] {
		f.setDown(false)
		f.set("r", "1", time.Minute)
		f.set(owner, "attempt-b", time.Minute)
	}
	held, err := c.eng.deleteHeld(ctx, "r", "")
	if err != nil || !held {
		t.Fatalf("DEL: held=%v err=%v", held, err)
	}
	c.settle()
	for i, f := range c.nodes {
		v, ok := f.value("r")
		if want := i >= 3; ok != want || (ok && v != "1") {
			t.Errorf("master %d: r=%q (%v), want the other attempt's key only on masters 3 and 4", i, v, ok)
		}
	}
}

// TestDeleteHeldReadsLateFirstAnswers: two of five masters paused, and the
// three live ones run the delete but their answers come after the count
// gave up (the first request was held back before it was sent, as a
// stalled proxy does). The resends then find nothing to delete and answer
// 0: that is no evidence that the lock was not held, and the release
// answers held once the first answers are read, never "not held" (a
// drop-in client told its held lock had expired).
func TestDeleteHeldReadsLateFirstAnswers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{MasterTimeout: 50 * time.Millisecond})
	for _, f := range c.nodes {
		f.set("r", "v", time.Minute)
	}
	for _, f := range c.nodes[3:] {
		f.hold()
	}
	for _, f := range c.nodes[:3] {
		f.mu.Lock()
		f.holdNext = map[string]time.Duration{"lock_delete_exact": 150 * time.Millisecond}
		f.mu.Unlock()
	}
	held, err := c.eng.deleteHeld(context.Background(), "r", "v")
	if !held || err != nil {
		t.Fatalf("release of a lock held on every master = %v, %v; want held", held, err)
	}
	for i, f := range c.nodes[:3] {
		if _, ok := f.value("r"); ok {
			t.Errorf("master %d still holds the lock", i)
		}
	}
}
