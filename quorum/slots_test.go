package quorum

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKeySlot: the slots Redis Cluster computes (CLUSTER KEYSLOT on Redis
// 7.0), hash tags included.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"123456789", 12739},
		{"{user1000}.following", 3443},
		{"foo{}{bar}", 8363},    // an empty tag: the whole key
		{"foo{{bar}}zap", 4015}, // the tag is "{bar"
		{"foo{bar}{zap}", 5061}, // the first tag only
		{"{}", 15257},
		{"a}b{c}", 7365},
	} {
		if got := KeySlot(tt.key); got != tt.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
}

// TestSlotTags: every slot's tag puts a key in that slot, wherever it
// stands after text without braces.
func TestSlotTags(t *testing.T) {
	t.Parallel()
	for s := range Slots {
		tag := SlotTag(s)
		if KeySlot("{"+tag+"}") != s || KeySlot("redlock-proxy:{"+tag+"}fence:x{y}") != s {
			t.Fatalf("slot %d: tag %q puts keys in slot %d", s, tag, KeySlot("{"+tag+"}"))
		}
	}
}

// inSlots returns resources whose lock keys are in n different slots.
func inSlots(n int) []string {
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		r := "res" + strconv.Itoa(i)
		if !seen[KeySlot(r)] {
			seen[KeySlot(r)] = true
			out = append(out, r)
		}
	}
	return out
}

// TestSlottedLayout: with the slotted layout, masters that refuse a
// script over several slots (as a Redis Cluster does) serve every
// primitive: the keys of each script are in one slot, and a
// multi-resource call over several slots is split. Each resource's fence
// comes from its own slot's sequence: after a multi-resource grant, the
// sequence of every resource's slot is at least its fence (on a master
// where the sequence of another slot served them all, a later grant of
// the resource alone could get a lower fence).
func TestSlottedLayout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{Slotted: true})
	for _, f := range c.nodes {
		f.mu.Lock()
		f.oneSlot = true
		f.mu.Unlock()
	}
	ctx := context.Background()
	rs := inSlots(4)
	acquire := func(req Request) *Lease {
		t.Helper()
		l, err := c.eng.Acquire(ctx, req)
		if err != nil || l == nil {
			t.Fatalf("%s %v: lease %v, err %v", req.Primitive, req.Resources, l, err)
		}
		return l
	}
	release := func(l *Lease) {
		t.Helper()
		if held, err := c.eng.Release(ctx, l); !held || err != nil {
			t.Fatalf("release %s %v: held %v, err %v", l.Primitive, l.Resources, held, err)
		}
	}

	multi := acquire(Request{Primitive: Lock, Resources: rs, TTL: 10 * time.Second})
	c.settle()
	for i, r := range rs {
		seq := c.eng.meta(r, "fence-hwm")
		for _, f := range c.nodes {
			v, _ := f.value(seq)
			if n, _ := strconv.ParseUint(v, 10, 64); n < multi.Fences[i] {
				t.Errorf("%s: %s's sequence is %q, below its fence %d", f.addr, r, v, multi.Fences[i])
			}
		}
	}
	if l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"other", rs[2]}, TTL: time.Second}); l != nil || err != nil {
		t.Fatalf("an overlapping multi-lock: %v, %v", l, err)
	}
	if _, err := c.eng.Extend(ctx, multi, 20*time.Second); err != nil {
		t.Fatalf("extend the multi-lock: %v", err)
	}
	release(multi)
	again := acquire(Request{Primitive: Lock, Resources: []string{rs[3]}, TTL: time.Second})
	if again.Fences[0] <= multi.Fences[3] {
		t.Errorf("fence %d after %d", again.Fences[0], multi.Fences[3])
	}
	release(again)

	// Refused at its last slot on two masters: the slots taken there
	// before are rolled back, not left until the ttl.
	last := rs[0]
	for _, r := range rs {
		if KeySlot(r) > KeySlot(last) {
			last = r
		}
	}
	c.nodes[0].set(last, "someone", time.Minute)
	c.nodes[1].set(last, "someone", time.Minute)
	if l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: rs, TTL: time.Minute}); l != nil || err != nil {
		t.Fatalf("granted over a held resource: %v, %v", l, err)
	}
	c.settle()
	for _, f := range c.nodes {
		for _, r := range rs {
			if v, ok := f.value(r); ok && r != last {
				t.Errorf("%s: %s left held by %q after a refused try", f.addr, r, v)
			}
		}
	}
	c.nodes[0].del(last)
	c.nodes[1].del(last)
	release(acquire(Request{Primitive: Fair, Resources: rs[:1], TTL: time.Second}))
	release(acquire(Request{Primitive: Semaphore, Resources: []string{"sem"}, TTL: time.Second, Options: SemaphoreOptions{Limit: 3, Count: 2}}))
	release(acquire(Request{Primitive: Read, Resources: rs[:1], TTL: time.Second}))
	release(acquire(Request{Primitive: Election, Resources: []string{"e"}, TTL: time.Second, Options: ElectionOptions{Value: "v"}}))
	w := acquire(Request{Primitive: Lock, Resources: rs[1:2], TTL: time.Second, Wait: time.Second})
	release(w)
	if created, err := c.eng.Latch(ctx, LatchRequest{Op: LatchCreate, Name: "l", TTL: time.Minute, Count: 1}); created != 1 || err != nil {
		t.Fatalf("latch: %v, %v", created, err)
	}
	if left, err := c.eng.Latch(ctx, LatchRequest{Op: LatchDown, Name: "l", Token: "a"}); left != 0 || err != nil {
		t.Fatalf("latch down: %v, %v", left, err)
	}
	for _, f := range c.nodes {
		for _, k := range f.keys() {
			if rest, ok := strings.CutPrefix(k, "redlock-proxy:"); ok && !strings.HasPrefix(rest, "{") {
				t.Errorf("%s: meta key %q carries no hash tag", f.addr, k)
			}
		}
	}
}

// TestSlottedLearnsUnslottedSequence: an engine that turns to the slotted
// layout over masters that served the other one proposes fences above
// their old sequences: its first fences are not below ones issued before.
func TestSlottedLearnsUnslottedSequence(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"x"}, TTL: time.Second})
	if err != nil || l == nil {
		t.Fatalf("%v, %v", l, err)
	}
	c.eng.Release(ctx, l)
	c.settle()
	for _, f := range c.nodes {
		f.set("redlock-proxy:fence-hwm", "500", 0) // as after 500 grants
	}
	nodes := make([]Node, len(c.nodes))
	for i, f := range c.nodes {
		nodes[i] = f
	}
	slotted, err := New(nodes, Options{Slotted: true, MasterTimeout: testTimeout, Wakeups: c.wake})
	if err != nil {
		t.Fatal(err)
	}
	defer slotted.Close()
	l2, err := slotted.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"x"}, TTL: time.Second})
	if err != nil || l2 == nil {
		t.Fatalf("%v, %v", l2, err)
	}
	if l2.Fences[0] <= 500 {
		t.Fatalf("fence %d under the slotted layout, after 500 under the other", l2.Fences[0])
	}
	slotted.Release(ctx, l2)
}
