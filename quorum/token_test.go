package quorum

import (
	"context"
	"testing"
	"time"
)

// TestTokenRetryFence: an acquire retried with the same TOKEN while its
// grant is held is granted again, with higher fences (no fence is kept
// per resource, docs/design/fencing.md: a retry is a new grant of the
// same token, and its fence is greater than every earlier grant's); a
// grant to another token afterwards still gets higher fences, and so does
// the same token once its grant was released.
func TestTokenRetryFence(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	req := Request{Resources: []string{"a", "b"}, TTL: time.Minute, Token: "t"}
	first, err := c.eng.lockAcquire(ctx, req)
	if err != nil || first == nil {
		t.Fatalf("lock: %v %v", first, err)
	}
	// The grant returned at a quorum; its other acquires are still on
	// their way, and the fakes do not keep one master's requests in
	// order (a real master's connection does). A retry that overtook one
	// would find the key missing there and take it fresh: the subject is
	// a retry of a grant held on every master.
	for end := time.Now().Add(2 * time.Second); (c.holders("a", "t") < 5 || c.holders("b", "t") < 5) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if c.holders("a", "t") < 5 || c.holders("b", "t") < 5 {
		t.Fatalf("the first grant never reached every master")
	}
	prev := first
	for i := range 3 {
		again, err := c.eng.lockAcquire(ctx, req)
		if err != nil || again == nil {
			t.Fatalf("retry %d: %v %v", i, again, err)
		}
		for j := range again.Fences {
			if again.Fences[j] <= prev.Fences[j] {
				t.Fatalf("retry %d: fences %v, not above the grant before it %v", i, again.Fences, prev.Fences)
			}
		}
		prev = again
	}
	// One master lost the key (it expired there early): the retry takes
	// it fresh on that master, and the grant's fence is still above every
	// earlier one.
	c.nodes[0].del("a")
	partial, err := c.eng.lockAcquire(ctx, req)
	if err != nil || partial == nil {
		t.Fatalf("retry after a lost key: %v %v", partial, err)
	}
	for j := range first.Fences {
		if partial.Fences[j] <= prev.Fences[j] {
			t.Fatalf("retry after a lost key: fences %v, not above %v", partial.Fences, prev.Fences)
		}
	}
	if held, err := c.eng.lockRelease(ctx, req.Resources, "t"); !held || err != nil {
		t.Fatalf("unlock: %v %v", held, err)
	}
	for _, tok := range []string{"other", "t"} {
		next, err := c.eng.lockAcquire(ctx, Request{Resources: req.Resources, TTL: time.Minute, Token: tok})
		if err != nil || next == nil {
			t.Fatalf("lock %s: %v %v", tok, next, err)
		}
		for j := range partial.Fences {
			if next.Fences[j] <= partial.Fences[j] {
				t.Fatalf("new grant to %s: fences %v not above %v", tok, next.Fences, partial.Fences)
			}
		}
		partial = next
		if held, err := c.eng.lockRelease(ctx, req.Resources, tok); !held || err != nil {
			t.Fatalf("unlock %s: %v %v", tok, held, err)
		}
	}
}
