package quorum

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestWaiters: every call that waits for a resource, whatever the
// primitive and on whichever engine, is counted on the masters while it
// waits and no longer once it returns; a fair waiter's place counts the
// waiters queued ahead of it on a quorum; a master restarted empty does
// not lower the count; and the waiting sets are gone once nobody waits.
func TestWaiters(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{RetryDelay: 20 * time.Millisecond, RetryJitter: 10 * time.Millisecond})
	ctx := context.Background()
	held, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"r"}, TTL: 10 * time.Second})
	if err != nil || held == nil {
		t.Fatalf("first lock: %v %v", held, err)
	}
	count := func(token string) (int, int) {
		t.Helper()
		n, place, err := c.eng.Operator().Waiters(ctx, Lock, "r", token)
		if err != nil {
			t.Fatalf("Waiters: %v", err)
		}
		return n, place
	}
	if n, place := count("f1"); n != 0 || place != 0 {
		t.Fatalf("nobody waits: waiters %d place %d", n, place)
	}
	var wg sync.WaitGroup
	wait := func(p Primitive, token string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.eng.Acquire(ctx, Request{Primitive: p, Resources: []string{"r"}, TTL: time.Second, Wait: 10 * time.Second, Token: token})
			if err != nil || l == nil {
				t.Errorf("%s %s: %v %v", p, token, l, err)
				return
			}
			if _, err := c.eng.Release(ctx, l); err != nil {
				t.Errorf("release: %v", err)
			}
		}()
	}
	wait(Fair, "f1")
	c.waitQueued(t, "r", "f1")
	wait(Fair, "f2")
	c.waitQueued(t, "r", "f2")
	wait(Lock, "")
	wait(Read, "")
	if !eventually(5*time.Second, func() bool { n, _ := count(""); return n == 4 }) {
		n, _ := count("")
		t.Fatalf("4 calls wait, the masters count %d", n)
	}
	for tok, want := range map[string]int{"f1": 1, "f2": 2, "nobody": 0} {
		if _, place := count(tok); place != want {
			t.Errorf("place of %s = %d, want %d", tok, place, want)
		}
	}
	c.nodes[0].restart() // empty: the quorum-th count stands
	if n, place := count("f2"); n != 4 || place != 2 {
		t.Errorf("after a master restarted empty: waiters %d place %d, want 4 and 2", n, place)
	}
	if _, err := c.eng.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !eventually(5*time.Second, func() bool { n, _ := count(""); return n == 0 }) {
		n, _ := count("")
		t.Fatalf("nobody waits any more, the masters count %d", n)
	}
	key := c.eng.waitingKey(c.eng.opts.MetaPrefix + "released:r")
	for i, f := range c.nodes {
		if !eventually(time.Second, func() bool { return !f.m.Exists(key) }) {
			t.Errorf("master %d keeps %s once nobody waits", i, key)
		}
	}
	if _, _, err := c.eng.Operator().Waiters(ctx, Lock, "", ""); err == nil {
		t.Errorf("an empty resource was accepted")
	}
}
