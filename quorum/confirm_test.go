package quorum

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// queuedLen is how many late requests wait in the fake's queue (held
// ones included).
func (f *fakeNode) queuedLen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// TestReleaseRetry: with every master holding the lease, one master down
// for good and two whose answers miss MasterTimeout, the first count
// decides nothing (2 of 5 yes). A release or extension of every
// primitive then reads the answers still to come and asks the silent
// masters again, and answers held, not NOQUORUM, whether the two are
// late within the round's own timeout, late past it (held until the
// resend is queued behind the first request: the first request's late
// answer decides), or down the first time and back for the resend. Only
// when they stay silent past ReleaseRetry is it NOQUORUM.
func TestReleaseRetry(t *testing.T) {
	t.Parallel()
	type prim struct {
		name    string
		acquire func(t *testing.T, c *cluster, ttl time.Duration) string // returns the token
		release func(c *cluster, token string) (bool, error)
	}
	ctx := context.Background()
	lock := func(t *testing.T, c *cluster, ttl time.Duration) string {
		l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: ttl})
		if err != nil || l == nil {
			t.Fatalf("lock: %v %v", l, err)
		}
		return l.Token
	}
	read := func(t *testing.T, c *cluster, ttl time.Duration) string {
		l, err := c.eng.readAcquire(ctx, Request{Resources: []string{"a"}, TTL: ttl})
		if err != nil || l == nil {
			t.Fatalf("read lock: %v %v", l, err)
		}
		return l.Token
	}
	sem := func(t *testing.T, c *cluster, ttl time.Duration) string {
		l, err := c.eng.semAcquire(ctx, Request{Resources: []string{"s"}, TTL: ttl, Options: SemaphoreOptions{Limit: 3, Count: 2}})
		if err != nil || l == nil {
			t.Fatalf("sem acquire: %v %v", l, err)
		}
		return l.Token
	}
	extended := func(v time.Duration, err error) (bool, error) { return v > 0, err }
	prims := []prim{
		{"unlock", lock, func(c *cluster, tok string) (bool, error) { return c.eng.lockRelease(ctx, []string{"a"}, tok) }},
		{"extend", lock, func(c *cluster, tok string) (bool, error) {
			return extended(c.eng.extend(ctx, &Lease{Primitive: Lock, Resources: []string{"a"}, Token: tok}, 10*time.Second, false))
		}},
		{"read_unlock", read, func(c *cluster, tok string) (bool, error) { return c.eng.readRelease(ctx, "a", tok) }},
		{"read_extend", read, func(c *cluster, tok string) (bool, error) {
			return extended(c.eng.readExtend(ctx, &Lease{Primitive: Read, Resources: []string{"a"}, Token: tok}, 10*time.Second))
		}},
		{"sem_release", sem, func(c *cluster, tok string) (bool, error) { return c.eng.semRelease(ctx, "s", tok) }},
		{"sem_extend", sem, func(c *cluster, tok string) (bool, error) {
			return extended(c.eng.semExtend(ctx, &Lease{Primitive: Semaphore, Resources: []string{"s"}, Token: tok}, 10*time.Second))
		}},
	}
	scenarios := []struct {
		name  string
		retry time.Duration
		ttl   time.Duration // the lease's (10 s when 0)
		// slow makes masters 3 and 4 miss the first count; after is
		// run while the release runs, to let them answer.
		slow  func(c *cluster)
		after func(t *testing.T, c *cluster)
		want  string
	}{
		{"late within the round", 0, 0,
			func(c *cluster) { c.nodes[3].setDelay(3 * testTimeout); c.nodes[4].setDelay(3 * testTimeout) },
			func(*testing.T, *cluster) {}, "held"},
		{"late past the round", 5 * time.Second, 0,
			func(c *cluster) { c.nodes[3].hold(); c.nodes[4].hold() },
			func(t *testing.T, c *cluster) {
				if !eventually(5*time.Second, func() bool { return c.nodes[3].queuedLen() >= 2 && c.nodes[4].queuedLen() >= 2 }) {
					t.Error("no resend queued behind the first request")
				}
				c.nodes[3].unhold()
				c.nodes[4].unhold()
			}, "held"},
		{"down the first time", 5 * time.Second, 0,
			func(c *cluster) { c.nodes[3].setDown(true); c.nodes[4].setDown(true) },
			func(t *testing.T, c *cluster) {
				if !eventually(5*time.Second, func() bool {
					return c.nodes[3].refusedCalls() >= 1 && c.nodes[4].refusedCalls() >= 1
				}) {
					t.Error("the release's first requests did not fail")
				}
				c.nodes[3].setDown(false)
				c.nodes[4].setDown(false)
			}, "held"},
		// A release asks until the validity of what it releases ends (the
		// ttl the masters that released it said it had left), past the
		// retry bound; an extension stops at the retry bound.
		{"silent past the retry bound", 300 * time.Millisecond, 1200 * time.Millisecond,
			func(c *cluster) { c.nodes[3].hold(); c.nodes[4].hold() },
			func(*testing.T, *cluster) {}, "no quorum"},
	}
	for _, sc := range scenarios {
		for _, p := range prims {
			t.Run(sc.name+"/"+p.name, func(t *testing.T) {
				t.Parallel() // each waits out its scenario's timing
				c := newCluster(t, 5, Options{ReleaseRetry: sc.retry, RetryDelay: 20 * time.Millisecond})
				ttl := cmp.Or(sc.ttl, 10*time.Second)
				tok := p.acquire(t, c, ttl)
				c.eng.bg.Wait() // the acquire landed on every master
				c.nodes[2].setDown(true)
				sc.slow(c)
				type result struct {
					held bool
					err  error
				}
				done := make(chan result, 1)
				t0 := time.Now()
				go func() {
					held, err := p.release(c, tok)
					done <- result{held, err}
				}()
				sc.after(t, c)
				r := <-done
				got := map[bool]string{true: "held", false: "not held"}[r.held]
				if errors.Is(r.err, ErrNoQuorum) {
					got = "no quorum"
				} else if r.err != nil {
					t.Fatalf("%s: %v", p.name, r.err)
				}
				if got != sc.want {
					t.Fatalf("%s = %s (%v) after %v, want %s", p.name, got, r.err, time.Since(t0), sc.want)
				}
				if sc.want == "no quorum" && time.Since(t0) < sc.retry {
					t.Fatalf("NOQUORUM after %v, before the retry bound %v", time.Since(t0), sc.retry)
				}
				if release := !strings.HasSuffix(p.name, "extend"); sc.want == "no quorum" && release && time.Since(t0) < ttl*3/4 {
					t.Fatalf("NOQUORUM after %v, before the %v lease's validity ended", time.Since(t0), ttl)
				}
				c.nodes[3].unhold()
				c.nodes[4].unhold()
			})
		}
	}
}

// TestResentReleaseNotHeldIsNoAnswer: a resent release that finds nothing
// may have been preceded by its own first request, which released the
// lock but whose answer never reached the proxy: such an answer never
// counts as "not held". Two masters never held the lock, one holds it,
// and the first requests to the two other holders fail. If their keys
// are still there when the release asks again, it is held; if they are
// gone (as if the failed requests had run), the answers decide nothing:
// NOQUORUM, never "not held".
func TestResentReleaseNotHeldIsNoAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gone := range []bool{false, true} {
		c := newCluster(t, 5, Options{ReleaseRetry: time.Second, RetryDelay: 20 * time.Millisecond})
		l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: 10 * time.Second})
		if err != nil || l == nil {
			t.Fatalf("lock: %v %v", l, err)
		}
		c.eng.bg.Wait()
		c.nodes[0].del("a")
		c.nodes[1].del("a")
		c.nodes[3].setDown(true)
		c.nodes[4].setDown(true)
		done := make(chan error, 1)
		var held bool
		go func() {
			var err error
			held, err = c.eng.lockRelease(ctx, []string{"a"}, l.Token)
			done <- err
		}()
		if !eventually(5*time.Second, func() bool {
			// The release's own requests, not a health ping: a
			// ping refused before the release was sent would let
			// the release reach the masters after the keys went.
			return c.nodes[3].refusedCalls() >= 1 && c.nodes[4].refusedCalls() >= 1
		}) {
			t.Fatal("the release's first requests did not fail")
		}
		if gone {
			c.nodes[3].del("a")
			c.nodes[4].del("a")
		}
		c.nodes[3].setDown(false)
		c.nodes[4].setDown(false)
		err = <-done
		switch {
		case !gone && (err != nil || !held):
			t.Fatalf("keys still there: %v %v, want held", held, err)
		case gone && !errors.Is(err, ErrNoQuorum):
			t.Fatalf("keys gone before the resend: %v %v, want NOQUORUM (never not held)", held, err)
		}
	}
}
