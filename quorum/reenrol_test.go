package quorum

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// The tests of "Extensions re-enrol masters" (package doc): an extension
// takes a live lease's keys again where they are absent, and counts those
// masters; never where another holder has them, never for a lease whose
// validity is unknown or over, never counting a quarantined master.

// reenrolCluster is five masters, and the lease granted on all of them.
func reenrolCluster(t *testing.T, opts Options, req Request) (*cluster, *Lease) {
	t.Helper()
	c := newCluster(t, 5, opts)
	l, err := c.eng.Acquire(context.Background(), req)
	if err != nil || l == nil {
		t.Fatalf("acquire: %v, %v", l, err)
	}
	c.quiesce()
	return c, l
}

// down makes masters is unreachable.
func (c *cluster) down(is ...int) {
	for _, i := range is {
		c.nodes[i].setDown(true)
	}
}

// fenceKey is resource r's fence key.
func (c *cluster) fenceKey(r string) string { return c.eng.opts.MetaPrefix + "fence:" + r }

// seq is master i's fence sequence.
func (c *cluster) seq(t *testing.T, i int) uint64 {
	_, k := c.eng.fenceKeys()
	v, _ := c.nodes[i].value(k)
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// pttl is key's remaining ttl on master i (0 when it has none).
func (c *cluster) pttl(i int, key string) time.Duration { return c.nodes[i].m.TTL(key) }

// TestExtendRetakes: masters whose copy of a lock expired, or that never
// had it, are taken again by the extension, and their votes make the
// quorum that the masters still holding it cannot make alone (two are
// down, one holds): the lease survives. The re-taken keys live the new
// ttl and hold the lease's fence.
func TestExtendRetakes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(c *cluster, l *Lease)
		// before the grant: masters down while it is made
		downAtGrant []int
	}{
		{name: "expired", setup: func(c *cluster, l *Lease) {
			c.nodes[0].del("r")
			c.nodes[1].del("r")
		}},
		{name: "expired with its fence key", setup: func(c *cluster, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del("r")
				c.nodes[i].del(c.fenceKey("r"))
			}
		}},
		{name: "never set", downAtGrant: []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 5, Options{})
			c.down(tc.downAtGrant...)
			l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 2 * time.Second})
			if err != nil || l == nil {
				t.Fatalf("acquire: %v, %v", l, err)
			}
			c.quiesce()
			for _, i := range tc.downAtGrant {
				c.nodes[i].setDown(false)
			}
			if tc.setup != nil {
				tc.setup(c, l)
			}
			if h := c.holders("r", l.Token); h != 3 {
				t.Fatalf("set-up: held on %d masters, want 3", h)
			}
			c.down(2, 3)
			decided := l.Decided
			v, err := c.eng.Extend(ctx, l, 10*time.Second)
			if err != nil || v <= 5*time.Second || v > 10*time.Second {
				t.Fatalf("Extend = %v, %v; want the new validity (masters 0 and 1 re-taken and counted)", v, err)
			}
			if !l.Decided.After(decided) || l.Validity != v {
				t.Errorf("the lease's validity was not updated: %v at %v", l.Validity, l.Decided)
			}
			c.quiesce()
			for _, i := range []int{0, 1, 4} {
				if got, _ := c.nodes[i].value("r"); got != l.Token {
					t.Errorf("master %d holds %q, want the token", i, got)
				}
				if ttl := c.pttl(i, "r"); ttl < 5*time.Second {
					t.Errorf("master %d: the lock lives %v more, want the new ttl", i, ttl)
				}
				f, _ := c.nodes[i].value(c.fenceKey("r"))
				if f != strconv.FormatUint(l.Fences[0], 10) {
					t.Errorf("master %d: fence key %q, want the lease's fence %d", i, f, l.Fences[0])
				}
				if ttl := c.pttl(i, c.fenceKey("r")); ttl < 10*time.Second {
					t.Errorf("master %d: the fence key lives %v more, want ttl + lag", i, ttl)
				}
				if s := c.seq(t, i); s < l.Fences[0] {
					t.Errorf("master %d: sequence %d below the fence %d it holds", i, s, l.Fences[0])
				}
			}
			// The lease mark was raised with the re-take (see "Restarted
			// masters").
			for _, i := range []int{0, 1} {
				if ttl := c.pttl(i, c.eng.leaseKey()); ttl < 5*time.Second {
					t.Errorf("master %d: lease mark lives %v, want the new ttl", i, ttl)
				}
			}
		})
	}
}

// TestExtendNeverTakesAnothersKey: where another token holds the key the
// extension takes nothing and that master does not count.
func TestExtendNeverTakesAnothersKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		other  []int // masters where another token holds the key
		down   []int
		wantNo bool // lost (0, nil), else no quorum
	}{
		{name: "a quorum says no", other: []int{0, 1, 2}, wantNo: true},
		{name: "undecided", other: []int{0, 1}, down: []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, l := reenrolCluster(t, Options{ReleaseRetry: 100 * time.Millisecond}, Request{Resources: []string{"r"}, TTL: 2 * time.Second})
			for _, i := range tc.other {
				c.nodes[i].del("r")
				c.nodes[i].set("r", "other", 5*time.Second)
			}
			c.down(tc.down...)
			v, err := c.eng.Extend(context.Background(), l, 10*time.Second)
			var qe *QuorumError
			switch {
			case tc.wantNo && (v != 0 || err != nil):
				t.Fatalf("Extend = %v, %v; want lost (0, nil)", v, err)
			case !tc.wantNo && (v != 0 || !errors.As(err, &qe)):
				t.Fatalf("Extend = %v, %v; want a *QuorumError", v, err)
			}
			c.quiesce()
			for _, i := range tc.other {
				if got, _ := c.nodes[i].value("r"); got != "other" || c.pttl(i, "r") > 5*time.Second {
					t.Errorf("master %d: the other holder's key is %q, living %v", i, got, c.pttl(i, "r"))
				}
			}
		})
	}
}

// TestExtendRetakeNeedsLiveLease: a lease whose validity is unknown (built
// from a client's arguments) or over is extended only where it is held;
// a re-taking extension that decides after the validity ended is not
// trusted.
func TestExtendRetakeNeedsLiveLease(t *testing.T) {
	t.Run("unknown or over", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			lease func(l *Lease) *Lease
		}{
			{"built from a client's arguments", func(l *Lease) *Lease {
				return &Lease{Primitive: Lock, Resources: l.Resources, Token: l.Token}
			}},
			{"validity over", func(l *Lease) *Lease {
				cp := *l
				cp.Decided = time.Now().Add(-time.Minute)
				return &cp
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, l := reenrolCluster(t, Options{ReleaseRetry: 100 * time.Millisecond}, Request{Resources: []string{"r"}, TTL: 2 * time.Second})
				c.nodes[0].del("r")
				c.nodes[1].del("r")
				c.down(2, 3)
				v, err := c.eng.Extend(context.Background(), tc.lease(l), 10*time.Second)
				var qe *QuorumError
				if v != 0 || !errors.As(err, &qe) {
					t.Fatalf("Extend = %v, %v; want a *QuorumError (one master holds, two do not)", v, err)
				}
				c.quiesce()
				for _, i := range []int{0, 1} {
					if got, ok := c.nodes[i].value("r"); ok {
						t.Errorf("master %d: a lease not known live was taken again (%q)", i, got)
					}
				}
			})
		}
	})
	t.Run("decided after the validity", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			validity time.Duration
			want     bool
		}{
			{"decided within", 10 * time.Second, true},
			{"decided after", 30 * time.Millisecond, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c, l := reenrolCluster(t, Options{MasterTimeout: 400 * time.Millisecond, ReleaseRetry: 100 * time.Millisecond},
					Request{Resources: []string{"r"}, TTL: 20 * time.Second})
				// Masters 0 and 1 lost it and answer after 150 ms; 2 and 3
				// do not answer; 4 holds it.
				for _, i := range []int{0, 1} {
					c.nodes[i].del("r")
					c.nodes[i].setDelay(150 * time.Millisecond)
				}
				c.nodes[2].hold()
				c.nodes[3].hold()
				l.Decided, l.Validity = time.Now(), tc.validity
				v, err := c.eng.Extend(context.Background(), l, 20*time.Second)
				var qe *QuorumError
				switch {
				case tc.want && (v <= 0 || err != nil):
					t.Fatalf("Extend = %v, %v; want extended", v, err)
				case !tc.want && (v != 0 || !errors.As(err, &qe)):
					t.Fatalf("Extend = %v, %v; want a *QuorumError: the quorum came after the validity", v, err)
				}
				c.quiesce()
			})
		}
	})
}

// TestExtendQuarantinedNotCounted: masters that restarted empty are
// re-taken (their keys are back when the quarantine ends) but do not
// count while quarantined.
func TestExtendQuarantinedNotCounted(t *testing.T) {
	c, l := reenrolCluster(t, Options{HealthInterval: 5 * time.Millisecond, Quarantine: 10 * time.Second, ReleaseRetry: 100 * time.Millisecond},
		Request{Resources: []string{"r"}, TTL: 5 * time.Second})
	c.nodes[0].restart()
	c.nodes[1].restart()
	c.down(2, 3)
	v, err := c.eng.Extend(context.Background(), l, 5*time.Second)
	if v != 0 || !errors.Is(err, ErrNoQuorum) || !errors.Is(err, ErrQuarantined) {
		t.Fatalf("Extend = %v, %v; want no quorum, the restarted masters quarantined", v, err)
	}
	c.quiesce()
	for _, i := range []int{0, 1} {
		if got, _ := c.nodes[i].value("r"); got != l.Token {
			t.Errorf("restarted master %d holds %q: the re-take did not run there", i, got)
		}
		if st := c.eng.nodeStatus()[i]; st.State != StateQuarantined {
			t.Errorf("master %d: %v, want quarantined", i, st.State)
		}
	}
}

// TestRetakenFence: a re-taken master holds the lease's fence, or the
// higher fence its fence key held already (the max); and the next holder
// of the resource gets a fence above the lease's, through a proxy that
// has seen no fence, on a quorum with the re-taken masters in it.
func TestRetakenFence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(c *cluster, l *Lease) // masters 0 and 1, after the grant
		want   func(l *Lease) uint64
	}{
		{"own fence key", func(c *cluster, l *Lease) {
			c.nodes[0].del("r")
			c.nodes[1].del("r")
		}, func(l *Lease) uint64 { return l.Fences[0] }},
		{"a higher fence key (a refused try's)", func(c *cluster, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del("r")
				c.nodes[i].set(c.fenceKey("r"), strconv.FormatUint(l.Fences[0]+100, 10), 5*time.Second)
			}
		}, func(l *Lease) uint64 { return l.Fences[0] + 100 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c, l := reenrolCluster(t, Options{}, Request{Resources: []string{"r"}, TTL: 2 * time.Second})
			tc.before(c, l)
			c.down(2, 3)
			if v, err := c.eng.Extend(ctx, l, 2*time.Second); v <= 0 || err != nil {
				t.Fatalf("Extend = %v, %v", v, err)
			}
			c.quiesce()
			want := strconv.FormatUint(tc.want(l), 10)
			for _, i := range []int{0, 1} {
				if f, _ := c.nodes[i].value(c.fenceKey("r")); f != want {
					t.Errorf("master %d: fence key %s, want %s", i, f, want)
				}
			}
			if held, err := c.eng.Release(ctx, l); !held || err != nil {
				t.Fatalf("release = %v, %v", held, err)
			}
			c.quiesce()
			// A second proxy, which has seen no fence, on masters 0, 1
			// and 4.
			nodes := make([]Node, len(c.nodes))
			for i, f := range c.nodes {
				nodes[i] = f
			}
			other, err := New(nodes, Options{MasterTimeout: testTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			next, err := other.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second})
			if err != nil || next == nil {
				t.Fatalf("next grant: %v, %v", next, err)
			}
			if next.Fences[0] <= l.Fences[0] {
				t.Errorf("next holder's fence %d, not above the lease's %d", next.Fences[0], l.Fences[0])
			}
		})
	}
}

// TestExtendRetakesMulti: a multi-resource lock is taken again on a
// master only when every key is the token's or free.
func TestExtendRetakesMulti(t *testing.T) {
	c, l := reenrolCluster(t, Options{}, Request{Resources: []string{"a", "b"}, TTL: 2 * time.Second})
	c.nodes[0].del("a") // a lost, b kept: re-taken, counts
	c.nodes[1].del("a") // a lost, b another's: nothing taken
	c.nodes[1].del("b")
	c.nodes[1].set("b", "other", 5*time.Second)
	c.down(3)
	if v, err := c.eng.Extend(context.Background(), l, 5*time.Second); v <= 0 || err != nil {
		t.Fatalf("Extend = %v, %v; want extended (masters 0, 2 and 4)", v, err)
	}
	c.quiesce()
	if got, _ := c.nodes[0].value("a"); got != l.Token {
		t.Errorf("master 0: a = %q, want the token", got)
	}
	if got, ok := c.nodes[1].value("a"); ok {
		t.Errorf("master 1: a = %q taken although b is another's", got)
	}
	if got, _ := c.nodes[1].value("b"); got != "other" {
		t.Errorf("master 1: b = %q, want the other holder's", got)
	}
}

// TestExtendRetakesSetNX: a drop-in lock re-taken gets its owner nonce
// back beside the key.
func TestExtendRetakesSetNX(t *testing.T) {
	c, l := reenrolCluster(t, Options{}, Request{Primitive: SetNX, Resources: []string{"k"}, TTL: 2 * time.Second, Token: "v"})
	owner := c.eng.opts.MetaPrefix + "owner:k"
	nonce, _ := c.nodes[4].value(owner)
	if nonce == "" {
		t.Fatal("no owner nonce after the grant")
	}
	c.nodes[0].del("k")
	c.nodes[0].del(owner)
	c.nodes[1].del("k")
	c.nodes[1].del(owner)
	c.down(2, 3)
	if v, err := c.eng.Extend(context.Background(), l, 5*time.Second); v <= 0 || err != nil {
		t.Fatalf("Extend = %v, %v", v, err)
	}
	c.quiesce()
	for _, i := range []int{0, 1} {
		if got, _ := c.nodes[i].value("k"); got != "v" {
			t.Errorf("master %d: k = %q", i, got)
		}
		if got, _ := c.nodes[i].value(owner); got != nonce {
			t.Errorf("master %d: owner %q, want %q", i, got, nonce)
		}
	}
}

// TestSemExtendRetakes: a semaphore's extension re-takes the lease's
// slots where they are free, never where another token holds one.
func TestSemExtendRetakes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(c *cluster, k semKeys, l *Lease) // masters 0 and 1
		want  bool
	}{
		{"lost", func(c *cluster, k semKeys, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(slotKey(k, l.Slots[0]))
				c.nodes[i].del(k.keys(l.Token)[1])
			}
		}, true},
		{"restarted empty, limit key gone", func(c *cluster, k semKeys, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].m.FlushAll()
			}
		}, true},
		{"on another slot", func(c *cluster, k semKeys, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(slotKey(k, l.Slots[0]))
				c.nodes[i].set(slotKey(k, 1-l.Slots[0]), l.Token, 5*time.Second)
				c.nodes[i].set(k.keys(l.Token)[1], strconv.Itoa(1-l.Slots[0]), 5*time.Second)
			}
		}, true},
		{"another token's", func(c *cluster, k semKeys, l *Lease) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(k.keys(l.Token)[1])
				c.nodes[i].set(slotKey(k, l.Slots[0]), "other", 5*time.Second)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, l := reenrolCluster(t, Options{ReleaseRetry: 100 * time.Millisecond},
				Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 2 * time.Second, Limit: 2, Count: 1})
			if l.Limit != 2 || len(l.Slots) != 1 {
				t.Fatalf("lease %+v", l)
			}
			k, _ := c.eng.semKeys("s")
			tc.setup(c, k, l)
			c.down(2, 3)
			v, err := c.eng.Extend(context.Background(), l, 5*time.Second)
			if tc.want != (v > 0 && err == nil) {
				t.Fatalf("Extend = %v, %v; want extended %v", v, err, tc.want)
			}
			c.quiesce()
			slot := slotKey(k, l.Slots[0])
			for _, i := range []int{0, 1} {
				got, _ := c.nodes[i].value(slot)
				if !tc.want {
					if got != "other" {
						t.Errorf("master %d: another token's slot is now %q", i, got)
					}
					continue
				}
				rec, _ := c.nodes[i].value(k.keys(l.Token)[1])
				lim, _ := c.nodes[i].value(k.base)
				if got != l.Token || rec != strconv.Itoa(l.Slots[0]) || lim != "2" {
					t.Errorf("master %d: slot %q, record %q, limit %q", i, got, rec, lim)
				}
				if stray, ok := c.nodes[i].value(slotKey(k, 1-l.Slots[0])); ok {
					t.Errorf("master %d: the token's other slot is still held (%q)", i, stray)
				}
			}
		})
	}
}

func slotKey(k semKeys, s int) string { return k.base + ":s:" + strconv.Itoa(s) }

// TestReadExtendRetakes: a reader is recorded again where the lock key is
// free or held by readers, despite a writer's mark; never where a writer
// holds the key.
func TestReadExtendRetakes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(c *cluster, k rwKeys) // masters 0 and 1
		want  bool
	}{
		{"lost", func(c *cluster, k rwKeys) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(k.lock)
				c.nodes[i].del(k.readers)
			}
		}, true},
		{"lost, a writer waits", func(c *cluster, k rwKeys) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(k.lock)
				c.nodes[i].del(k.readers)
				c.nodes[i].set(k.mark, "w", 5*time.Second)
			}
		}, true},
		{"a writer holds", func(c *cluster, k rwKeys) {
			for _, i := range []int{0, 1} {
				c.nodes[i].del(k.readers)
				c.nodes[i].set(k.lock, "writer", 5*time.Second)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, l := reenrolCluster(t, Options{ReleaseRetry: 100 * time.Millisecond},
				Request{Primitive: Read, Resources: []string{"r"}, TTL: 2 * time.Second})
			k := c.eng.rwKeys("r")
			tc.setup(c, k)
			c.down(2, 3)
			v, err := c.eng.Extend(context.Background(), l, 5*time.Second)
			if tc.want != (v > 0 && err == nil) {
				t.Fatalf("Extend = %v, %v; want extended %v", v, err, tc.want)
			}
			c.quiesce()
			for _, i := range []int{0, 1} {
				lock, _ := c.nodes[i].value(k.lock)
				readers, _ := c.nodes[i].m.SortedSet(k.readers)
				if _, reader := readers[l.Token]; tc.want && (lock != "" || !reader || c.pttl(i, k.lock) < 4*time.Second) {
					t.Errorf("master %d: lock key %q (%v), readers: %v", i, lock, c.pttl(i, k.lock), readers)
				}
				if !tc.want && lock != "writer" {
					t.Errorf("master %d: the writer's key is now %q", i, lock)
				}
			}
		})
	}
}

// TestExtendAfterReleaseNotRevived: a lease released (through any
// connection or proxy) while its keeper still knows it valid is not taken
// again by the keeper's next extension: each announced release leaves the
// token's tombstone where it released the grant, for as long as the grant
// had to live. Masters the release did not reach (down) still hold it,
// but they are not a quorum: the extension answers lost.
func TestExtendAfterReleaseNotRevived(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"lock", Request{Resources: []string{"r"}, TTL: 5 * time.Second}},
		{"multi", Request{Resources: []string{"a", "b"}, TTL: 5 * time.Second}},
		{"read", Request{Primitive: Read, Resources: []string{"r"}, TTL: 5 * time.Second}},
		{"semaphore", Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 5 * time.Second, Limit: 2, Count: 1}},
		{"drop-in", Request{Primitive: SetNX, Resources: []string{"k"}, TTL: 5 * time.Second, Token: "v"}},
	} {
		for _, missed := range []int{0, 2} {
			t.Run(tc.name+"/release missed "+strconv.Itoa(missed), func(t *testing.T) {
				ctx := context.Background()
				c, l := reenrolCluster(t, Options{ReleaseRetry: 100 * time.Millisecond}, tc.req)
				c.down([]int{3, 4}[:missed]...)
				held, err := c.eng.Release(ctx, &Lease{Primitive: l.Primitive, Resources: l.Resources, Token: l.Token})
				if !held || err != nil {
					t.Fatalf("release = %v, %v", held, err)
				}
				c.quiesce()
				for _, i := range []int{3, 4} {
					c.nodes[i].setDown(false)
				}
				v, err := c.eng.Extend(ctx, l, 5*time.Second)
				if v != 0 || err != nil {
					t.Fatalf("Extend after the release = %v, %v; want lost (0, nil)", v, err)
				}
				c.quiesce()
				if info, err := c.eng.Info(ctx, l.Primitive, l.Resources[0]); err != nil || info.Mine(l.Token) || (l.Primitive == Semaphore && info.Count != 0) {
					t.Errorf("after the extension: %v, %v", info, err)
				}
			})
		}
	}
}
