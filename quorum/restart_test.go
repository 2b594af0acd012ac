package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

func grantN(t *testing.T, c *cluster, n int) uint64 {
	t.Helper()
	var last uint64
	for range n {
		l, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"r"}, TTL: time.Second})
		if err != nil || l == nil {
			t.Fatalf("grant: %v %v", l, err)
		}
		if held, err := c.eng.lockRelease(context.Background(), []string{"r"}, l.Token); !held || err != nil {
			t.Fatalf("unlock: %v %v", held, err)
		}
		last = l.Fences[0]
	}
	return last
}

// backwardsFenceSetup builds the example on masters A, B, C: fence
// 3 everywhere, then fence 10 written back to {A, B} only, so C holds 3.
func backwardsFenceSetup(t *testing.T) *cluster {
	c := newCluster(t, 3, Options{HealthInterval: 5 * time.Millisecond, Quarantine: 30 * time.Millisecond})
	if f := grantN(t, c, 3); f != 3 {
		t.Fatalf("fence %d, want 3", f)
	}
	c.nodes[2].setDown(true)
	if f := grantN(t, c, 7); f != 10 {
		t.Fatalf("fence %d, want 10", f)
	}
	c.nodes[2].setDown(false)
	return c
}

// TestBackwardsFenceOnSilentDataLoss: B loses its data without the proxy
// being able to tell by its run_id (the case PROTOCOL.md excludes: "no
// master silently loses its data"), A goes down, and a grant on {B, C}
// goes through a second proxy that has seen nothing (the stateless
// replica a load balancer may pick). B's intact mark went with its data,
// while C has one: that proxy quarantines B and grants nothing. With the
// mark unread (off.intact), it issues fence 4 after fence 10.
func TestBackwardsFenceOnSilentDataLoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		off    safetyOff
		fence  uint64    // 0: no grant
		master NodeState // B's state before the grant ("": not checked)
	}{
		{"intact mark read", safetyOff{}, 0, StateQuarantined},
		{"intact mark unread", safetyOff{intact: true}, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := backwardsFenceSetup(t)
			c.nodes[1].m.FlushAll()
			c.nodes[0].setDown(true)
			nodes := make([]Node, len(c.nodes))
			for i, f := range c.nodes {
				nodes[i] = f
			}
			fresh, err := New(nodes, Options{MasterTimeout: testTimeout, off: tc.off})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			if st := fresh.nodeStatus()[1]; tc.master != "" && st.State != tc.master {
				t.Fatalf("B: %+v, want %s", st, tc.master)
			}
			l, err := fresh.lockAcquire(context.Background(), Request{Resources: []string{"r"}, TTL: time.Second})
			switch {
			case tc.fence == 0 && (l != nil || !errors.Is(err, ErrNoQuorum)):
				t.Fatalf("grant on {B, C} with B's loss seen: %+v %v, want NOQUORUM", l, err)
			case tc.fence != 0 && (l == nil || l.Fences[0] != tc.fence):
				t.Fatalf("grant %+v %v: the silent loss did not produce the backwards fence %d", l, err, tc.fence)
			}
		})
	}
}

// TestBackwardsFenceFixed: the same, but B restarts (new run_id): it is
// quarantined, its fence floor is raised from a quorum of the others before
// it votes again, and the grant on {B, C} issues 11.
func TestBackwardsFenceFixed(t *testing.T) {
	t.Parallel()
	c := backwardsFenceSetup(t)
	c.nodes[1].restart()
	waitRejoined(t, c, 1)
	c.nodes[0].setDown(true)
	if f := grantN(t, c, 1); f != 11 {
		t.Fatalf("fence %d after 10, want 11", f)
	}
}

// waitRejoined waits until master i's restart was noticed and it votes
// again.
func waitRejoined(t *testing.T, c *cluster, i int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := c.eng.nodeStatus()[i]
		if st.Restarts >= 1 && st.State == StateUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("master %d did not rejoin after its restart: %+v", i, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQuarantineBlocksVotes: two of three masters restart empty while a
// lock is held; until their quarantine (here longer than the ttl) ends,
// their votes do not count, so nobody else can be granted the lock.
func TestQuarantineBlocksVotes(t *testing.T) {
	t.Parallel()
	const quarantine = 400 * time.Millisecond
	c := newCluster(t, 3, Options{HealthInterval: 5 * time.Millisecond, Quarantine: quarantine})
	ctx := context.Background()
	a, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"q"}, TTL: 300 * time.Millisecond})
	if err != nil || a == nil {
		t.Fatal(err)
	}
	restartTogether(c.nodes[0], c.nodes[1])
	// The restarted masters lost A's lock: without quarantine a second
	// client would now win on them.
	b, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"q"}, TTL: time.Second})
	var qe *QuorumError
	if b != nil || !errors.As(err, &qe) || qe.Got != 1 {
		t.Fatalf("second client during the quarantine: %+v, %v", b, err)
	}
	if !errors.Is(err, ErrQuarantined) {
		t.Errorf("the refusal does not say why: %v", err)
	}
	st := c.eng.nodeStatus()
	if st[0].State != StateQuarantined || st[0].QuarantineLeft <= 0 || st[0].Restarts != 1 || st[2].State != StateUp {
		t.Fatalf("status during quarantine: %+v", st)
	}
	waitRejoined(t, c, 0)
	waitRejoined(t, c, 1)
	b, err = c.eng.lockAcquire(ctx, Request{Resources: []string{"q"}, TTL: time.Second})
	if err != nil || b == nil {
		t.Fatalf("after the quarantine: %+v, %v", b, err)
	}
	if b.Fences[0] <= a.Fences[0] {
		t.Fatalf("fence %d after %d", b.Fences[0], a.Fences[0])
	}
}

// TestSeedingNeedsQuorumOfOthers: a restarted master cannot rejoin while
// fewer than a quorum of the others answer.
func TestSeedingNeedsQuorumOfOthers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{HealthInterval: 5 * time.Millisecond})
	grantN(t, c, 2)
	c.nodes[2].setDown(true)
	before := c.nodes[0].calls("fence_highwater")
	c.nodes[1].restart()
	// Each try to rejoin asks the others for their high-water marks: after
	// three tries that only m0 answered, m1 must still be out.
	rejoined := false
	if !eventually(5*time.Second, func() bool {
		rejoined = rejoined || c.nodes[0].calls("fence_highwater") > before && c.eng.nodeStatus()[1].State != StateQuarantined
		return rejoined || c.nodes[0].calls("fence_highwater") >= before+3
	}) {
		t.Fatalf("no three tries to rejoin: %+v", c.eng.nodeStatus()[1])
	}
	if st := c.eng.nodeStatus()[1]; rejoined || st.State != StateQuarantined {
		t.Fatalf("rejoined without a quorum of the others: %+v", st)
	}
	c.nodes[2].setDown(false)
	waitRejoined(t, c, 1)
}

// TestRejoinAtQuarantineEnd: a restarted master rejoins when its quarantine
// ends, not at the next health tick.
func TestRejoinAtQuarantineEnd(t *testing.T) {
	t.Parallel()
	const quarantine = 100 * time.Millisecond
	c := newCluster(t, 3, Options{HealthInterval: time.Hour, Quarantine: quarantine})
	grantN(t, c, 1)
	c.nodes[1].restart()
	// The next answer from the restarted master reveals the restart (the
	// health loop sleeps for an hour here).
	c.eng.lockAcquire(context.Background(), Request{Resources: []string{"x"}, TTL: time.Second})
	deadline := time.Now().Add(time.Second)
	for c.eng.nodeStatus()[1].State != StateQuarantined {
		if time.Now().After(deadline) {
			t.Fatalf("restart not seen: %+v", c.eng.nodeStatus()[1])
		}
		time.Sleep(time.Millisecond)
	}
	seen := time.Now()
	waitRejoined(t, c, 1)
	if d := time.Since(seen); d > quarantine+500*time.Millisecond {
		t.Fatalf("rejoined %v after the restart was seen, quarantine %v", d, quarantine)
	}
}

// TestQuarantineSizedByLeases: a restarted master's quarantine lasts as
// long as the longest grant still live on the other masters (here an
// extension made it 1.5 s), not Options.Quarantine; with nothing live it
// rejoins at once.
func TestQuarantineSizedByLeases(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{HealthInterval: 5 * time.Millisecond, Quarantine: time.Minute})
	ctx := context.Background()
	a, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"short"}, TTL: 300 * time.Millisecond})
	if err != nil || a == nil {
		t.Fatal(err)
	}
	b, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"long"}, TTL: 300 * time.Millisecond})
	if err != nil || b == nil {
		t.Fatal(err)
	}
	if v, err := c.eng.extend(ctx, &Lease{Primitive: Lock, Resources: b.Resources, Token: b.Token}, 1500*time.Millisecond, false); v <= 0 || err != nil {
		t.Fatalf("extend: %v %v", v, err)
	}
	extended := time.Now()
	c.settle0ForHWM(t)
	c.nodes[0].restart()
	var st NodeStatus
	if !eventually(time.Second, func() bool {
		st = c.eng.nodeStatus()[0]
		return st.Restarts == 1 && st.QuarantineLeft > 0 && st.QuarantineLeft < 10*time.Second
	}) {
		t.Fatalf("quarantine not sized: %+v", st)
	}
	if st.QuarantineLeft < 1200*time.Millisecond-time.Since(extended) {
		t.Fatalf("quarantine %v is shorter than the extended grant's %v left", st.QuarantineLeft, 1500*time.Millisecond-time.Since(extended))
	}
	waitRejoined(t, c, 0)
	if d := time.Since(extended); d < 1500*time.Millisecond {
		t.Fatalf("rejoined %v after the extension, before the 1.5 s grant expired", d)
	}
	// Nothing live now: a restart costs only the round that sizes it.
	c.nodes[1].restart()
	t0 := time.Now()
	if !eventually(time.Second, func() bool { return c.eng.nodeStatus()[1].Restarts == 1 }) {
		t.Fatal("restart not seen")
	}
	waitRejoined(t, c, 1)
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("rejoined %v after a restart with no live grant", d)
	}
}

// settle0ForHWM waits until every master holds the lease high-water mark
// (the grants' stragglers landed).
func (c *cluster) settle0ForHWM(t *testing.T) {
	t.Helper()
	if !eventually(time.Second, func() bool {
		for _, f := range c.nodes {
			if _, ok := f.value(c.eng.leaseKey("")); !ok {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the lease high-water mark never reached every master")
	}
}
