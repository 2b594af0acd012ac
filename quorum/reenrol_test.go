package quorum

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestExtendReenrols: an extension takes the lease again on masters that
// lost it (docs/design/leases.md), for every primitive
// with a plain extension: after the reply when a quorum held it, before
// the verdict when the caller knows the lease is valid; never where
// another token holds it, and never for a lease whose validity ended.
func TestExtendReenrols(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const other = "someone-else"
	type prim struct {
		name string
		// acquire takes the lease; holds reports whether master f holds
		// it; lose makes f forget it (as an expiry would); steal gives f's
		// key to another token.
		acquire func(c *cluster) *Lease
		holds   func(c *cluster, f *fakeNode, l *Lease) bool
		lose    func(c *cluster, f *fakeNode, l *Lease)
		steal   func(c *cluster, f *fakeNode, l *Lease)
	}
	lockPrim := func(name string, rs ...string) prim {
		return prim{
			name: name,
			acquire: func(c *cluster) *Lease {
				l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: rs, TTL: 5 * time.Second})
				if err != nil || l == nil {
					t.Fatalf("lock: %v %v", l, err)
				}
				c.eng.bg.Wait() // the acquire landed on every master
				return l
			},
			holds: func(_ *cluster, f *fakeNode, l *Lease) bool {
				for _, r := range rs {
					if v, _ := f.value(r); v != l.Token {
						return false
					}
				}
				return true
			},
			lose: func(_ *cluster, f *fakeNode, _ *Lease) {
				for _, r := range rs {
					f.del(r)
				}
			},
			steal: func(_ *cluster, f *fakeNode, _ *Lease) { f.set(rs[len(rs)-1], other, time.Minute) },
		}
	}
	prims := []prim{
		lockPrim("lock", "a"),
		lockPrim("multi", "a", "b", "c"),
		{
			name: "read",
			acquire: func(c *cluster) *Lease {
				l, err := c.eng.Acquire(ctx, Request{Primitive: Read, Resources: []string{"a"}, TTL: 5 * time.Second})
				if err != nil || l == nil {
					t.Fatalf("read lock: %v %v", l, err)
				}
				c.eng.bg.Wait()
				return l
			},
			holds: func(c *cluster, f *fakeNode, l *Lease) bool {
				s, err := f.m.ZScore(c.eng.rwKeys("a").readers, l.Token)
				v, _ := f.value("a")
				return err == nil && s > 0 && v == ""
			},
			lose: func(c *cluster, f *fakeNode, l *Lease) {
				f.del(c.eng.rwKeys("a").readers)
				f.del("a")
			},
			steal: func(c *cluster, f *fakeNode, l *Lease) { f.set("a", other, time.Minute) },
		},
		{
			name: "semaphore",
			acquire: func(c *cluster) *Lease {
				l, err := c.eng.Acquire(ctx, Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 5 * time.Second, Options: SemaphoreOptions{Limit: 3, Count: 2}})
				if err != nil || l == nil || len(l.Slots) != 2 {
					t.Fatalf("semaphore: %v %v", l, err)
				}
				c.eng.bg.Wait()
				return l
			},
			holds: func(c *cluster, f *fakeNode, l *Lease) bool {
				k, _ := c.eng.semKeys("s")
				for _, s := range l.Slots {
					if v, _ := f.value(k.base + ":s:" + strconv.Itoa(s)); v != l.Token {
						return false
					}
				}
				v, _ := f.value(k.base)
				return v == "3"
			},
			lose: func(c *cluster, f *fakeNode, l *Lease) {
				k, _ := c.eng.semKeys("s")
				for _, s := range l.Slots {
					f.del(k.base + ":s:" + strconv.Itoa(s))
				}
				f.del(k.base + ":t:" + l.Token)
				f.del(k.base) // the limit key goes with the last slot
			},
			steal: func(c *cluster, f *fakeNode, l *Lease) {
				k, _ := c.eng.semKeys("s")
				f.set(k.base+":s:"+strconv.Itoa(l.Slots[0]), other, time.Minute)
			},
		},
	}
	// The extension's lease: as a client names it (token only), or as
	// its keeper does (validity known), or known but ended.
	named := func(l *Lease) *Lease {
		return &Lease{Primitive: l.Primitive, Resources: l.Resources, Token: l.Token}
	}
	known := func(l *Lease) *Lease {
		k := named(l)
		k.Decided, k.Validity = time.Now(), 4*time.Second
		return k
	}
	ended := func(l *Lease) *Lease {
		k := named(l)
		k.Decided, k.Validity = time.Now().Add(-10*time.Second), 5*time.Second
		return k
	}
	// lostTwo: a lease held on masters 3 and 4 (answering), on 2 (down),
	// lost on 0 and 1; releases and extensions do not ask again.
	lostTwo := func(t *testing.T, p prim) (*cluster, *Lease) {
		c := newCluster(t, 5, Options{ReleaseRetry: -1})
		l := p.acquire(c)
		p.lose(c, c.nodes[0], l)
		p.lose(c, c.nodes[1], l)
		c.nodes[2].setDown(true)
		return c, l
	}
	for _, p := range prims {
		t.Run(p.name+"/quorum held: re-enrolled after the reply", func(t *testing.T) {
			// Held on 3 and 4 (answering), 2 down, lost on 0 and 1, of
			// unknown validity: not re-enrolled.
			c, l := lostTwo(t, p)
			if v, err := c.eng.Extend(ctx, named(l), 5*time.Second); v > 0 || err == nil {
				t.Fatalf("extend held on 2 answering, validity unknown: %v %v", v, err)
			}
			c.eng.bg.Wait()
			if p.holds(c, c.nodes[0], l) || p.holds(c, c.nodes[1], l) {
				t.Fatal("a lease found on fewer than a quorum, of unknown validity, was re-enrolled")
			}

			c = newCluster(t, 5, Options{})
			l = p.acquire(c)
			p.lose(c, c.nodes[0], l)
			p.steal(c, c.nodes[1], l)
			v, err := c.eng.Extend(ctx, named(l), 5*time.Second)
			if v <= 0 || err != nil {
				t.Fatalf("extend held on 3 of 5: %v %v", v, err)
			}
			c.eng.bg.Wait()
			if !p.holds(c, c.nodes[0], l) {
				t.Error("the master that lost the lease was not re-enrolled")
			}
			if p.holds(c, c.nodes[1], l) {
				t.Error("a master where another token holds it was taken")
			}
			for i := 2; i < 5; i++ {
				if !p.holds(c, c.nodes[i], l) {
					t.Errorf("master %d no longer holds the lease", i)
				}
			}
		})
		t.Run(p.name+"/validity known: re-enrolled before the verdict", func(t *testing.T) {
			c := newCluster(t, 5, Options{})
			l := p.acquire(c)
			// Held on 3 and 4 (answering), on 2 (paused); lost on 0 and 1.
			p.lose(c, c.nodes[0], l)
			p.lose(c, c.nodes[1], l)
			c.nodes[2].setDown(true)
			v, err := c.eng.Extend(ctx, known(l), 5*time.Second)
			if v <= 0 || err != nil {
				t.Fatalf("extend held on 2 answering, lost on 2, validity known: %v %v", v, err)
			}
			for _, i := range []int{0, 1, 3, 4} {
				if !p.holds(c, c.nodes[i], l) {
					t.Errorf("master %d does not hold the lease after the extension", i)
				}
			}
		})
		t.Run(p.name+"/validity known: not where another holds it", func(t *testing.T) {
			c := newCluster(t, 5, Options{ReleaseRetry: -1})
			l := p.acquire(c)
			p.steal(c, c.nodes[0], l)
			p.steal(c, c.nodes[1], l)
			c.nodes[2].setDown(true)
			v, err := c.eng.Extend(ctx, known(l), 5*time.Second)
			if v > 0 || err == nil {
				t.Fatalf("extended on 2 of 5, the others down or another token's: %v %v", v, err)
			}
			if p.holds(c, c.nodes[0], l) || p.holds(c, c.nodes[1], l) {
				t.Error("a master where another token holds it was taken")
			}
		})
		t.Run(p.name+"/validity ended: not re-enrolled", func(t *testing.T) {
			c, l := lostTwo(t, p)
			v, _ := c.eng.Extend(ctx, ended(l), 5*time.Second)
			if v > 0 {
				t.Fatalf("a lease whose validity ended was extended on 2 of 5 held: %v", v)
			}
			if p.holds(c, c.nodes[0], l) || p.holds(c, c.nodes[1], l) {
				t.Error("a lease whose validity ended was re-enrolled")
			}
		})
	}
}

// TestReenrolFences: a re-enrolled master's fence sequence is raised to
// at least the lease's fence, and the next grant after the release gets a
// greater fence than the lease's, even on a quorum made of masters that
// were re-enrolled and masters that lost their sequence.
func TestReenrolFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"a"}, TTL: 5 * time.Second})
	if err != nil || l == nil {
		t.Fatal(err)
	}
	c.eng.bg.Wait()
	_, sk := c.eng.fenceKeys("a")
	for _, i := range []int{0, 1} {
		c.nodes[i].del("a")
		c.nodes[i].del(sk)
	}
	if v, err := c.eng.Extend(ctx, l, 5*time.Second); v <= 0 || err != nil {
		t.Fatalf("extend: %v %v", v, err)
	}
	c.eng.bg.Wait()
	for _, i := range []int{0, 1} {
		v, ok := c.nodes[i].value(sk)
		f, _ := strconv.ParseUint(v, 10, 64)
		if !ok || f < l.Fences[0] {
			t.Errorf("master %d re-enrolled with its sequence at %q, below the lease's fence %d", i, v, l.Fences[0])
		}
	}
	if held, err := c.eng.Release(ctx, l); !held || err != nil {
		t.Fatalf("release: %v %v", held, err)
	}
	// Only the re-enrolled masters and one other answer the next grant.
	c.nodes[3].setDown(true)
	c.nodes[4].setDown(true)
	l2, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"a"}, TTL: time.Second})
	if err != nil || l2 == nil {
		t.Fatalf("second lock: %v %v", l2, err)
	}
	if l2.Fences[0] <= l.Fences[0] {
		t.Fatalf("fence went back: %d after %d", l2.Fences[0], l.Fences[0])
	}
}

// TestReleaseStopsReenrolment: a release that follows an extension stops
// the re-enrolment the extension left to do after its reply (it waits for
// the first round's last answer, held back here on m4): the master that
// lost the lock must not get it back once it was released.
func TestReleaseStopsReenrolment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, 5, Options{})
	l, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"a"}, TTL: 5 * time.Second})
	if err != nil || l == nil {
		t.Fatal(err)
	}
	c.eng.bg.Wait()
	c.nodes[0].del("a")
	c.nodes[4].hold()
	if v, err := c.eng.Extend(ctx, &Lease{Primitive: Lock, Resources: []string{"a"}, Token: l.Token}, 5*time.Second); v <= 0 || err != nil {
		t.Fatalf("extend held on 3 answering of 5: %v %v", v, err)
	}
	if held, err := c.eng.Release(ctx, l); !held || err != nil {
		t.Fatalf("release: %v %v", held, err)
	}
	c.settle()
	for i, f := range c.nodes {
		if v, ok := f.value("a"); ok {
			t.Errorf("master %d holds %q after the release", i, v)
		}
	}
}
