package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

// reconnect gives the fake a new connection to the same master: nothing
// lost, and the votes it gave on the old one are not vouched for.
func (f *fakeNode) reconnect() {
	f.mu.Lock()
	f.conn++
	f.mu.Unlock()
}

// TestReleaseCountsSilentVoters: a grant is made while master 2 is down
// and master 1 slow, so masters 0, 3 and 4 vote for it (1 takes it too,
// after the decision); then 3 and 4 fall silent (as paused). Master 2
// answers the release "not held", 0 and 1 "held": the answers alone
// decide nothing. Through the engine that granted it, the
// release counts its silent voters (grantNote) and answers held at once,
// for every primitive that releases so, where before it asked the silent
// masters until the validity ended and answered NOQUORUM. It does not
// count them, and answers NOQUORUM after asking again, when a voter
// answers "not held" (the lock was broken), when the silent masters are
// on new connections (they may have restarted), or when the release's
// requests to them fail (killed). A second release of the token counts
// none (the first one's requests, queued there, will empty them): the
// live masters' "not held" decides it.
func TestReleaseCountsSilentVoters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type prim struct {
		name string
		req  Request
	}
	prims := []prim{
		{"lock", Request{Primitive: Lock, Resources: []string{"a"}}},
		{"multi", Request{Primitive: Lock, Resources: []string{"a", "b"}}},
		{"fair", Request{Primitive: Fair, Resources: []string{"a"}}},
		{"read", Request{Primitive: Read, Resources: []string{"a"}}},
		{"semaphore", Request{Primitive: Semaphore, Resources: []string{"s"}, Options: SemaphoreOptions{Limit: 3, Count: 2}}},
	}
	lock := prims[0]
	cases := []struct {
		name  string
		prims []prim
		// before runs once masters 3 and 4 are silent, before the
		// release; twice releases the token twice.
		before func(c *cluster)
		twice  bool
		want   string
	}{
		{"silent voters", prims, func(*cluster) {}, false, "held"},
		{"a voter says not held", []prim{lock}, func(c *cluster) { c.nodes[0].del("a") }, false, "no quorum"},
		{"new connections", []prim{lock}, func(c *cluster) { c.nodes[3].reconnect(); c.nodes[4].reconnect() }, false, "no quorum"},
		{"requests fail", []prim{lock}, func(c *cluster) {
			c.nodes[3].unhold()
			c.nodes[4].unhold()
			c.nodes[3].setDown(true)
			c.nodes[4].setDown(true)
		}, false, "no quorum"},
		{"released twice", []prim{lock}, func(*cluster) {}, true, "not held"},
	}
	for _, tc := range cases {
		for _, p := range tc.prims {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				t.Parallel() // the refusals wait out the validity
				c := newCluster(t, 5, Options{ReleaseRetry: 300 * time.Millisecond, RetryDelay: 20 * time.Millisecond})
				req := p.req
				req.TTL = 10 * time.Second
				if tc.want != "held" {
					req.TTL = 1200 * time.Millisecond
				}
				c.nodes[2].setDown(true)
				c.nodes[1].setDelay(3 * testTimeout)
				l, err := c.eng.Acquire(ctx, req)
				if err != nil || l == nil {
					t.Fatalf("acquire: %v %v", l, err)
				}
				c.eng.bg.Wait() // the grant landed on every master up
				c.nodes[2].setDown(false)
				c.nodes[1].setDelay(0)
				c.nodes[3].hold()
				c.nodes[4].hold()
				defer c.nodes[3].unhold()
				defer c.nodes[4].unhold()
				tc.before(c)
				rel := &Lease{Primitive: p.req.Primitive, Resources: p.req.Resources, Token: l.Token}
				if tc.twice {
					if held, err := c.eng.Release(ctx, rel); err != nil || !held {
						t.Fatalf("first release: %v %v, want held", held, err)
					}
				}
				t0 := time.Now()
				held, err := c.eng.Release(ctx, rel)
				took := time.Since(t0)
				var got string
				switch {
				case errors.Is(err, ErrNoQuorum):
					got = "no quorum"
				case err != nil:
					t.Fatal(err)
				case held:
					got = "held"
				default:
					got = "not held"
				}
				if got != tc.want {
					t.Fatalf("release: %s (%v) after %v, want %s", got, err, took, tc.want)
				}
				// Held at once: the round's deadline, not the validity
				// (10 s) nor the retry bound.
				if tc.want == "held" && took >= 300*time.Millisecond {
					t.Fatalf("held only after %v", took)
				}
				if tc.want == "no quorum" && took < 300*time.Millisecond {
					t.Fatalf("NOQUORUM after %v, before the retry bound", took)
				}
			})
		}
	}
}

// TestGrantNotesBounded: the engine forgets a grant's note at its
// release, at its abandon, and, for a grant nobody releases, once its
// validity ended (the health loop's sweep).
func TestGrantNotesBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, 3, Options{})
	notes := func() int {
		n := 0
		c.eng.notes.Range(func(any, any) bool { n++; return true })
		return n
	}
	take := func(res string, ttl time.Duration) *Lease {
		l, err := c.eng.Acquire(ctx, Request{Resources: []string{res}, TTL: ttl})
		if err != nil || l == nil {
			t.Fatalf("acquire %s: %v %v", res, l, err)
		}
		return l
	}
	released, abandoned := take("released", 10*time.Second), take("abandoned", 10*time.Second)
	expires := take("expires", 200*time.Millisecond)
	if n := notes(); n != 3 {
		t.Fatalf("%d notes for 3 grants", n)
	}
	if _, err := c.eng.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	c.eng.Abandon(ctx, abandoned)
	if n := notes(); n != 1 {
		t.Fatalf("%d notes after a release and an abandon, want 1", n)
	}
	time.Sleep(time.Until(expires.Decided.Add(expires.Validity)))
	c.eng.sweepNotes()
	if n := notes(); n != 0 {
		t.Fatalf("%d notes after the validity ended", n)
	}
}
