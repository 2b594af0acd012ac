package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

const testTimeout = 50 * time.Millisecond

type cluster struct {
	nodes []*fakeNode
	wake  *Wakeups
	eng   *Engine
}

func newCluster(t testing.TB, n int, opts Options) *cluster {
	t.Helper()
	c := buildCluster(t, n, opts)
	t.Cleanup(func() {
		if t.Failed() {
			// A failed test may leave goroutines (an acquisition still
			// waiting) that go on writing to its fakes: they are left
			// to them, never handed to another test (TestEverySubset
			// once reported keys a failed TestReadWritePhases wrote).
			c.eng.Close()
			return
		}
		c.close()
	})
	return c
}

// close closes the engine and recycles the fakes.
func (c *cluster) close() {
	c.eng.Close()
	for _, f := range c.nodes {
		f.recycle()
	}
}

// buildCluster is newCluster for a caller that closes the cluster itself.
func buildCluster(t testing.TB, n int, opts Options) *cluster {
	t.Helper()
	c := &cluster{wake: NewWakeups()}
	for i := range n {
		f := getFake(t, fmt.Sprintf("m%d", i), c.wake.Notify)
		f.inline = true
		c.nodes = append(c.nodes, f)
	}
	c.eng = c.newEngine(t, opts)
	return c
}

// newEngine starts an engine on the cluster's masters with opts (the
// test master timeout unless set), as a proxy would.
func (c *cluster) newEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	nodes := make([]Node, len(c.nodes))
	for i, f := range c.nodes {
		nodes[i] = f
	}
	if opts.MasterTimeout == 0 {
		opts.MasterTimeout = testTimeout
	}
	opts.Wakeups = c.wake
	eng, err := New(nodes, opts)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// holders counts the masters on which key holds token.
func (c *cluster) holders(key, token string) int {
	n := 0
	for _, f := range c.nodes {
		if v, ok := f.value(key); ok && v == token {
			n++
		}
	}
	return n
}

// settle lets held requests land, then waits for every request in flight.
func (c *cluster) settle() {
	for _, f := range c.nodes {
		f.unhold()
	}
	c.eng.Close()
	for _, f := range c.nodes {
		f.drain()
	}
}

func TestUnlockAndExtend(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	lease, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: time.Second})
	if err != nil || lease == nil {
		t.Fatalf("lock: %v %v", lease, err)
	}
	tests := []struct {
		name    string
		token   string
		down    int
		wantV   bool
		wantErr bool
	}{
		{"wrong token", "nope", 0, false, false},
		{"right token", lease.Token, 0, true, false},
		{"two down still quorum", lease.Token, 2, true, false},
		{"three down no quorum", lease.Token, 3, false, true},
	}
	for _, tc := range tests {
		t.Run("extend/"+tc.name, func(t *testing.T) {
			for i, f := range c.nodes {
				f.setDown(i < tc.down)
			}
			v, err := c.eng.extend(ctx, &Lease{Primitive: Lock, Resources: []string{"a"}, Token: tc.token}, 2*time.Second, false)
			if (v > 0) != tc.wantV || (err != nil) != tc.wantErr {
				t.Fatalf("Extend = %v, %v", v, err)
			}
			if tc.wantV && (v > 2*time.Second || v < time.Second) {
				t.Fatalf("validity %v out of range", v)
			}
		})
	}
	for _, f := range c.nodes {
		f.setDown(false)
	}
	if held, err := c.eng.lockRelease(ctx, []string{"a"}, "nope"); held || err != nil {
		t.Fatalf("unlock with wrong token = %v, %v", held, err)
	}
	if held, err := c.eng.lockRelease(ctx, []string{"a"}, lease.Token); !held || err != nil {
		t.Fatalf("unlock = %v, %v", held, err)
	}
	if held, err := c.eng.lockRelease(ctx, []string{"a"}, lease.Token); held || err != nil {
		t.Fatalf("second unlock = %v, %v", held, err)
	}
	c.settle()
	if h := c.holders("a", lease.Token); h != 0 {
		t.Fatalf("held on %d masters after unlock", h)
	}
}

func TestUnlockNoQuorum(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	lease, _ := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: time.Second})
	c.nodes[0].setDown(true)
	c.nodes[1].setDown(true)
	_, err := c.eng.lockRelease(ctx, []string{"a"}, lease.Token)
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("want ErrNoQuorum, got %v", err)
	}
}

// TestReleaseReplyRule: a release or extension reports "not held" only
// when N - quorum + 1 masters said so; when the answers in time decide
// neither way (a holder is slow), it is a *QuorumError, never "lost".
func TestReleaseReplyRule(t *testing.T) {
	t.Parallel()
	// Each case: which of 5 masters hold the lock, which are slow (their
	// answers come after the round), which are down.
	const (
		h = iota // holds, answers
		n        // does not hold, answers
		s        // holds, slow
		d        // holds, down
	)
	tests := []struct {
		name    string
		masters [5]int
		want    string // "held", "not held", "no quorum"
		// why is the no-quorum error's text: a quorum of answers that
		// decides nothing says how they split.
		why string
	}{
		{"all hold", [5]int{h, h, h, h, h}, "held", ""},
		{"quorum holds, two slow", [5]int{h, h, h, s, s}, "held", ""},
		{"quorum holds, two down", [5]int{h, h, h, d, d}, "held", ""},
		{"bare quorum held, two holders slow", [5]int{h, n, n, s, s}, "no quorum",
			"3 of 5 masters answered, 3 needed: 1 held it and 2 did not, 2 did not answer; 3 holding it decide it held, and 3 not holding it that it was not"},
		{"bare quorum held, one holder down, one slow", [5]int{h, h, n, n, s}, "no quorum",
			"4 of 5 masters answered, 3 needed: 2 held it and 2 did not, 1 did not answer; 3 holding it decide it held, and 3 not holding it that it was not"},
		{"three say not held", [5]int{n, n, n, s, s}, "not held", ""},
		{"nobody holds", [5]int{n, n, n, n, n}, "not held", ""},
		{"two answer", [5]int{h, n, d, s, s}, "no quorum", "2 of 5 masters answered, 3 needed"},
	}
	for _, tc := range tests {
		for _, op := range []string{"unlock", "extend"} {
			t.Run(op+"/"+tc.name, func(t *testing.T) {
				t.Parallel() // an undecided case waits out the lease's second
				c := newCluster(t, 5, Options{})
				ctx := context.Background()
				// A short lease: an undecided release asks until its
				// validity ends.
				lease, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: time.Second})
				if err != nil || lease == nil {
					t.Fatalf("lock: %v %v", lease, err)
				}
				c.eng.bg.Wait() // the acquire has landed on every master
				for i, st := range tc.masters {
					switch st {
					case n:
						c.nodes[i].del("a")
					case s:
						c.nodes[i].hold()
					case d:
						c.nodes[i].setDown(true)
					}
				}
				var got string
				var err2 error
				if op == "unlock" {
					var held bool
					held, err2 = c.eng.lockRelease(ctx, []string{"a"}, lease.Token)
					got = map[bool]string{true: "held", false: "not held"}[held]
				} else {
					var v time.Duration
					v, err2 = c.eng.extend(ctx, &Lease{Primitive: Lock, Resources: []string{"a"}, Token: lease.Token}, 10*time.Second, false)
					got = map[bool]string{true: "held", false: "not held"}[v > 0]
				}
				if errors.Is(err2, ErrNoQuorum) {
					got = "no quorum"
				} else if err2 != nil {
					t.Fatalf("%s: %v", op, err2)
				}
				if got != tc.want {
					t.Fatalf("%s %v = %s (%v), want %s", op, tc.masters, got, err2, tc.want)
				}
				if want := "quorum: " + op + ": " + tc.why; tc.why != "" && err2.Error() != want {
					t.Fatalf("%s %v: error %q, want %q", op, tc.masters, err2, want)
				}
			})
		}
	}
}

// TestTinyTTLIsNotGranted: a ttl of 1 or 2 ms on healthy masters has no
// validity left: the caller sees "not granted", never a quorum error (the
// per-master timeout does not shrink to the ttl).
func TestTinyTTLIsNotGranted(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	for _, ttl := range []time.Duration{time.Millisecond, 2 * time.Millisecond} {
		lease, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"tiny"}, TTL: ttl})
		if lease != nil || err != nil {
			t.Fatalf("ttl %v: lease=%v err=%v, want not granted", ttl, lease, err)
		}
	}
}

// TestFencesIncrease grants one resource many times while random minorities
// of masters are down, and checks that fences strictly increase.
func TestFencesIncrease(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var last uint64
	for i := range 300 {
		for _, f := range c.nodes {
			f.setDown(false)
		}
		for _, j := range rng.Perm(5)[:rng.IntN(3)] {
			c.nodes[j].setDown(true)
		}
		lease, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"f"}, TTL: time.Second})
		if err != nil || lease == nil {
			t.Fatalf("grant %d: %v %v", i, lease, err)
		}
		if lease.Fences[0] <= last {
			t.Fatalf("grant %d: fence %d after %d", i, lease.Fences[0], last)
		}
		last = lease.Fences[0]
		if held, err := c.eng.lockRelease(ctx, []string{"f"}, lease.Token); !held || err != nil {
			t.Fatalf("unlock %d: %v %v", i, held, err)
		}
		// Masters that were down during the release keep the key until its
		// ttl; stand in for that expiry.
		for _, f := range c.nodes {
			f.del("f")
		}
	}
}

func TestMultiResource(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	a, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"y", "x", "y"}, TTL: time.Second})
	if err != nil || a == nil {
		t.Fatalf("lock: %v %v", a, err)
	}
	if len(a.Resources) != 2 || a.Resources[0] != "y" || a.Resources[1] != "x" || len(a.Fences) != 2 {
		t.Fatalf("lease %+v", a)
	}
	// Overlapping set: all or nothing, nothing left behind.
	b, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"z", "x"}, TTL: time.Second})
	if err != nil || b != nil {
		t.Fatalf("overlapping lock: %v %v", b, err)
	}
	c.eng.bg.Wait()
	for _, f := range c.nodes {
		if _, held := f.value("z"); held {
			t.Fatal("z left behind by a refused multi-lock")
		}
	}
}

func TestReservedAndBadRequests(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{MetaPrefix: "meta:"})
	ctx := context.Background()
	tests := []struct {
		req  Request
		want error
	}{
		{Request{Resources: []string{"meta:fence:x"}, TTL: time.Second}, ErrReservedResource},
		{Request{Resources: []string{""}, TTL: time.Second}, ErrBadRequest},
		{Request{Resources: nil, TTL: time.Second}, ErrBadRequest},
		{Request{Resources: []string{"a"}, TTL: 0}, ErrBadRequest},
	}
	for _, tc := range tests {
		if _, err := c.eng.lockAcquire(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("Lock(%+v) = %v, want %v", tc.req, err, tc.want)
		}
	}
	for i, f := range c.nodes {
		if n := f.calls("lock_acquire") + f.calls("lock_acquire_wait") + f.calls("lock_acquire_fair"); n != 0 {
			t.Errorf("master %d ran %d acquires for bad requests", i, n)
		}
	}
}

func TestQuorumOption(t *testing.T) {
	t.Parallel()
	nodes := []Node{newFake(t, "a", nil), newFake(t, "b", nil), newFake(t, "c", nil)}
	for _, q := range []int{1, 4} {
		if _, err := New(nodes, Options{Quorum: q}); err == nil {
			t.Errorf("quorum %d of 3 accepted", q)
		}
	}
	e, err := New(nodes, Options{Quorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.quorum != 3 {
		t.Fatalf("quorum %d", e.quorum)
	}
}

// TestWaitWokenByRelease: a waiter with a long retry delay is woken by the
// release notification, not by its timer.
func TestWaitWokenByRelease(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{RetryDelay: 10 * time.Second, RetryJitter: 1})
	ctx := context.Background()
	a, _ := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: 10 * time.Second})
	got := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		b, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: time.Second, Wait: 5 * time.Second})
		if err != nil || b == nil {
			got <- -1
			return
		}
		got <- time.Since(t0)
	}()
	// Wait until the waiter has subscribed on every master.
	for {
		n := 0
		for _, f := range c.nodes {
			f.mu.Lock()
			if f.subs["redlock-proxy:released:w"] {
				n++
			}
			f.mu.Unlock()
		}
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	t1 := time.Now()
	if held, _ := c.eng.lockRelease(ctx, []string{"w"}, a.Token); !held {
		t.Fatal("unlock failed")
	}
	d := <-got
	if d < 0 {
		t.Fatal("waiter not granted")
	}
	if since := time.Since(t1); since > time.Second {
		t.Fatalf("waiter woke %v after the release: timer, not notification", since)
	}
}

// TestGivenBackGrantWakesWaiters: a grant nobody will use, given back
// because its caller left (the rollback attempt returns with a grant) or
// abandoned (its reply could not be delivered), announces itself as a
// release does: a waiter it refused is granted at once, not after its
// retry delay (10 s here), which with clients hanging up mid-wait left
// the lock free and unheld until the waiters' next tries (at most
// WaiterLife/4 apart: 250 ms by default).
func TestGivenBackGrantWakesWaiters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		give func(c *cluster, ctx context.Context) error
	}{
		{"caller left", func(c *cluster, ctx context.Context) error {
			ls, err := c.eng.lockSet([]string{"w"})
			if err != nil {
				return err
			}
			l, back, err := c.eng.attempt(ctx, ls, plainLock{}, NewToken(), 10*time.Second, newTaints(len(c.nodes)), false)
			if err != nil || l == nil {
				return fmt.Errorf("the grant to give back: %v %v", l, err)
			}
			c.waitHeld(t, "w", l.Token)
			back()
			return nil
		}},
		{"abandoned", func(c *cluster, ctx context.Context) error {
			l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: 10 * time.Second})
			if err != nil || l == nil {
				return fmt.Errorf("the grant to abandon: %v %v", l, err)
			}
			c.waitHeld(t, "w", l.Token)
			c.eng.Abandon(ctx, l)
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Tries 10 s apart at most (WaiterLife/4), unless told.
			c := newCluster(t, 3, Options{RetryDelay: 10 * time.Second, RetryJitter: 1, WaiterLife: 40 * time.Second})
			ctx := context.Background()
			first, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: 10 * time.Second})
			if err != nil || first == nil {
				t.Fatalf("the first grant: %v %v", first, err)
			}
			got := make(chan *Lease, 1)
			go func() {
				l, _ := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: 10 * time.Second, Wait: 8 * time.Second})
				got <- l
			}()
			c.waitSubscribed(t, "redlock-proxy:released:w")
			// Registered as a waiter, and refused again after that: it
			// sleeps now.
			if !eventually(5*time.Second, func() bool {
				for _, f := range c.nodes {
					if !f.m.Exists(c.eng.waitingKey("redlock-proxy:released:w")) || f.calls("lock_acquire_wait") < 2 {
						return false
					}
				}
				return true
			}) {
				t.Fatal("the waiter did not try again after registering")
			}
			// The first holder leaves unannounced (its key deleted), so
			// that the waiter is refused only by the grant given back.
			for _, f := range c.nodes {
				f.del("w")
			}
			if err := tc.give(c, ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-got:
				if l == nil {
					t.Fatal("the waiter was not granted")
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the waiter was not told of the grant given back: it sleeps its retry delay")
			}
		})
	}
}

// TestWaitCanceled: a waiter whose context ends stops waiting, holds
// nothing and unsubscribes.
func TestWaitCanceled(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{RetryDelay: 5 * time.Millisecond})
	a, _ := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"w"}, TTL: 10 * time.Second})
	// The grant is decided at a quorum; let the third master's acquire land
	// before the waiter's first try races it there.
	c.settle()
	if h := c.holders("w", a.Token); h != 3 {
		t.Fatalf("first holder on %d masters after settling", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"w"}, TTL: time.Second, Wait: time.Minute})
	if b != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, %v", b, err)
	}
	c.settle()
	if h := c.holders("w", a.Token); h != 3 {
		t.Fatalf("first holder now on %d masters", h)
	}
	for _, f := range c.nodes {
		if len(f.subs) != 0 {
			t.Fatalf("still subscribed: %v", f.subs)
		}
	}
}

// TestValidityRefusesLateGrant: when the round takes longer than the ttl
// allows, the grant is refused and rolled back.
func TestValidityRefusesLateGrant(t *testing.T) {
	t.Parallel()
	// One 30ms round, then 40*0.4+2 = 18ms of drift: nothing left of 40ms.
	c := newCluster(t, 3, Options{MasterTimeout: 200 * time.Millisecond, DriftFactor: 0.4})
	for _, f := range c.nodes {
		f.setDelay(30 * time.Millisecond)
	}
	lease, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"v"}, TTL: 40 * time.Millisecond})
	if lease != nil || err != nil {
		t.Fatalf("got %+v, %v; want refusal", lease, err)
	}
	c.settle()
	for i, f := range c.nodes {
		if _, held := f.value("v"); held {
			t.Fatalf("master %d still holds the refused lock", i)
		}
	}
}

// TestFixedTokenRetryIgnoresUnacknowledgedRollback: a try with a fixed
// token fails with the token set on m0, and its rollback there is not
// acknowledged: it is stranded (as on a connection that was replaced) and
// lands after the next tries' acquires, which reach m0 at once and find
// the token. m0's vote must not count for the rest of the call: counted,
// it makes a grant with m1 that the late rollback then leaves on one
// master of three.
func TestFixedTokenRetryIgnoresUnacknowledgedRollback(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{MasterTimeout: testTimeout, RetryDelay: 5 * time.Millisecond, RetryJitter: 1})
	c.nodes[1].set("r", "other", time.Minute)
	c.nodes[2].set("r", "other", time.Minute)
	stranded := c.nodes[0].strand("lock_release")
	freed := make(chan struct{})
	var triesBefore int // m0's acquires before m1 was freed
	go func() {
		<-stranded // the first try failed and rolled back
		triesBefore = c.nodes[0].callsWith("lock_acquire_wait", "t")
		c.nodes[1].del("r")
		close(freed)
	}()
	lease, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"r"}, TTL: time.Minute, Token: "t", Wait: 300 * time.Millisecond})
	select {
	case <-freed:
	default:
		t.Fatal("the first try's rollback never reached m0")
	}
	tries := c.nodes[0].callsWith("lock_acquire_wait", "t")
	c.settle() // the stranded rollbacks land
	if lease != nil {
		t.Fatalf("granted with the vote of a master whose rollback was not acknowledged: held on %d of 3 masters once it landed", c.holders("r", "t"))
	}
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	if tries <= triesBefore {
		t.Fatalf("no try reached m0 after m1 was freed (%d before, %d in all): the test needs one", triesBefore, tries)
	}
}

// TestReleaseReachesSlowSender: a release that cannot be sent within
// MasterTimeout (the client side is busy) is still sent: a late release is
// harmless (token-checked), a dropped one leaves the key on that master
// until its ttl.
func TestReleaseReachesSlowSender(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	lease, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"s"}, TTL: time.Minute})
	if err != nil || lease == nil {
		t.Fatalf("lock: %v %v", lease, err)
	}
	c.settle()
	c.nodes[2].setSendDelay(3 * testTimeout)
	held, err := c.eng.lockRelease(context.Background(), []string{"s"}, lease.Token)
	if !held || err != nil {
		t.Fatalf("unlock: %v %v", held, err)
	}
	c.settle()
	if h := c.holders("s", lease.Token); h != 0 {
		t.Fatalf("the lock is still held on %d masters after the release", h)
	}
}

// TestFixedTokenTaintLifted: a master paused during a fixed-token try is
// tainted (its rollback is not acknowledged), but only until the rollback
// is: once the master runs its backlog, the rollback's late answer lifts
// the taint and the call's next try counts its vote. Here the grant needs
// it (m2 is held by another token): tainted for the rest of the call, the
// call would wait out its WAIT.
func TestFixedTokenTaintLifted(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{MasterTimeout: testTimeout, RetryDelay: 5 * time.Millisecond, RetryJitter: 1})
	c.nodes[2].set("r", "other", time.Minute)
	c.nodes[0].hold()
	go func() {
		// Once a second try was made (m0 tainted: the first try's
		// rollback waits on m0), let m0's backlog land.
		if eventually(2*time.Second, func() bool { return c.nodes[1].callsWith("lock_acquire_wait", "t") >= 2 }) {
			c.nodes[0].unhold()
		}
	}()
	lease, err := c.eng.lockAcquire(context.Background(), Request{Resources: []string{"r"}, TTL: time.Minute, Token: "t", Wait: 3 * time.Second})
	if err != nil || lease == nil {
		t.Fatalf("a master whose rollback was acknowledged late still does not count: %v %v", lease, err)
	}
	c.eng.bg.Wait()
	if h := c.holders("r", "t"); h < 2 {
		t.Fatalf("granted, held on %d masters", h)
	}
}

// TestFixedTokenTaintOutlivesTheCall: a refused try with a fixed token
// taints a master that is down (its rollback is not waited for), and the
// call returns. A new call with the same token, as a library's retry loop
// makes at once, reaches that master before the rollback does: its vote
// must not count until the rollback is acknowledged, or the rollback
// deletes the new call's key there after the grant.
func TestFixedTokenTaintOutlivesTheCall(t *testing.T) {
	t.Parallel()
	// The second call's acquire must reach m0 (unheld by a goroutine
	// that polls m2) within the call's round: a master_timeout of 400 ms
	// leaves a loaded machine room for that (50 ms did not, once in CI).
	timeout := 8 * testTimeout
	c := newCluster(t, 5, Options{MasterTimeout: timeout})
	ctx := context.Background()
	c.nodes[1].set("r", "other", time.Minute)
	c.nodes[4].set("r", "other", time.Minute)
	c.nodes[0].hold()
	// A request to m0 times out: m0 is down when the tries are counted.
	if l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"x"}, TTL: time.Minute}); l == nil || err != nil {
		t.Fatalf("lock x: %v %v", l, err)
	}
	if !eventually(time.Second, func() bool { return c.eng.downAt()[0] }) {
		t.Fatal("m0 is not down after a request to it timed out")
	}
	// m0 down, m1 and m4 taken, m2 and m3 yes: refused without waiting
	// for m0, whose rollback is sent once its acquire's answer is in.
	if l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute, Token: "t"}); l != nil || err != nil {
		t.Fatalf("first call: %v %v, want refused", l, err)
	}
	// The second call waits for m4 (late, not down), and m0 runs its
	// backlog once that call's acquire was sent: the first call's
	// acquire, the second's (answered in time), then the rollback.
	f := c.nodes[4]
	f.mu.Lock()
	f.holdNext = map[string]time.Duration{"lock_acquire": 3 * timeout}
	f.mu.Unlock()
	go func() {
		if eventually(5*time.Second, func() bool { return c.nodes[2].callsWith("lock_acquire", "t") >= 2 }) {
			c.nodes[0].unhold()
		}
	}()
	lease, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute, Token: "t"})
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	reached := c.nodes[0].callsWith("lock_acquire", "t")
	// Once the undos are acknowledged, the token's taints are forgotten.
	c.nodes[0].drain()
	if !eventually(time.Second, func() bool {
		c.eng.sweepCarried()
		n := 0
		c.eng.carried.Range(func(any, any) bool { n++; return true })
		return n == 0
	}) {
		t.Error("the token's taints are kept after its undos were acknowledged")
	}
	c.settle()
	if reached < 2 {
		t.Fatalf("the second call's acquire reached m0 after the call (%d of 2 before): the test needs it in time", reached)
	}
	if lease != nil && c.holders("r", "t") < 3 {
		t.Fatalf("granted with m0's vote, held on %d of 5 masters once the first call's rollback landed", c.holders("r", "t"))
	}
}

// TestCarriedTaintsSurviveSweeps: a call that leaves a taint while the
// health loop sweeps the token's entry (or another call with the token
// leaves none) never loses it: the token's next call inherits it as long
// as the undo is not acknowledged.
func TestCarriedTaintsSurviveSweeps(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	pending := c.eng.newRound(&op{name: "lock"}, nil) // never answered
	for k := range 500 {
		token := fmt.Sprintf("t%d", k)
		left := newTaints(3)
		left.add(0, pending)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 {
				c.eng.sweepCarried()
				c.eng.leaveTaints(token, newTaints(3)) // a call with the token that leaves none
			}
		}()
		c.eng.leaveTaints(token, left)
		<-done
		next := newTaints(3)
		c.eng.inheritTaints(token, next)
		if !next.has(0) {
			t.Fatalf("call %d: the taint of an unacknowledged undo was lost", k)
		}
	}
}

// TestTaintKeepsEveryUndo: a master tainted by an undo not acknowledged
// yet (a paused master: the undo is sent only once the try's request
// there times out) stays tainted when a later try skipped that master as
// down, whose undo sends nothing there and is acknowledged at once; in
// the call, and in the token's next call. TestSlowMastersExclusion found
// it: the later undo's acknowledgement lifted the taint, the next call's
// try counted the master, and the earlier undo, sent after that try's
// acquire, deleted its key there: a grant held on two of five masters.
func TestTaintKeepsEveryUndo(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	// ack records master i's answer as an acknowledgement, as settle
	// does, without the round's requests in flight.
	ack := func(r *round, i int) {
		r.ans[i] = answer{}
		r.mu.Lock()
		r.settled[i] = true
		r.mu.Unlock()
	}
	pending := c.eng.newRound(&op{name: "lock"}, nil)
	skipped := c.eng.newRound(&op{name: "lock"}, nil)
	ack(skipped, 0) // nothing was sent to m0: nothing to undo there
	call := newTaints(3)
	call.add(0, pending)
	call.add(0, skipped)
	call.refresh()
	if !call.has(0) {
		t.Fatal("the acknowledgement of an undo that sent nothing lifted the taint of one not acknowledged")
	}
	c.eng.leaveTaints("tok", call)
	next := newTaints(3)
	c.eng.inheritTaints("tok", next)
	next.refresh()
	if !next.has(0) {
		t.Fatal("the token's next call counts a master whose undo is not acknowledged")
	}
	ack(pending, 0)
	next.refresh()
	if next.has(0) {
		t.Fatal("still tainted once every undo was acknowledged")
	}
	c.eng.sweepCarried()
	n := 0
	c.eng.carried.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d tokens' taints kept after their undos were acknowledged", n)
	}
}

// TestRefusesOlderProxy: an engine does not start while a master holds
// an older proxy's lagging fence bound (docs/design/fencing.md, Upgrading
// from a proxy with fence keys), and starts once it has expired.
func TestRefusesOlderProxy(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	lag, _ := c.eng.fenceKeys("")
	c.nodes[1].set(lag, "7", time.Minute)
	nodes := make([]Node, len(c.nodes))
	for i, f := range c.nodes {
		nodes[i] = f
	}
	if eng, err := New(nodes, Options{MasterTimeout: testTimeout, Wakeups: c.wake}); !errors.Is(err, ErrOlderProxy) {
		if eng != nil {
			eng.Close()
		}
		t.Fatalf("started beside an older proxy's lagging bound: %v", err)
	}
	c.nodes[1].del(lag)
	c.newEngine(t, Options{}).Close()
}
