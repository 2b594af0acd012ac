package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// queued is master f's fair queue of resource r: token -> ticket.
func (c *cluster) queued(f *fakeNode, r string) map[string]float64 {
	k := c.eng.fairKeys(r)[0]
	ms, err := f.m.ZMembers(k)
	if err != nil {
		return nil
	}
	out := make(map[string]float64, len(ms))
	for _, m := range ms {
		if s, err := f.m.ZScore(k, m); err == nil {
			out[m] = s
		}
	}
	return out
}

// waitQueued waits until token is queued on at least a quorum of masters.
func (c *cluster) waitQueued(t *testing.T, r, token string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		for _, f := range c.nodes {
			if _, ok := c.queued(f, r)[token]; ok {
				n++
			}
		}
		if n >= c.eng.quorum {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s never queued on a quorum", token)
}

// waitHeld waits until key holds token on every master: the grant was
// decided at a quorum, and the test wants the others to agree before the
// next request races the stragglers.
func (c *cluster) waitHeld(t *testing.T, key, token string) {
	t.Helper()
	if !eventually(time.Second, func() bool { return c.holders(key, token) == len(c.nodes) }) {
		t.Fatalf("%s holds %s on %d masters", key, token, c.holders(key, token))
	}
}

type fairResult struct {
	who   int
	lease *Lease
	err   error
}

// TestFairLockOrder: waiters queued one after another are granted in that
// order, each woken by the release alone (the retry delay is far longer
// than the test), and nothing is left once the queue is empty.
func TestFairLockOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: 1})
	ctx := context.Background()
	holder, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second})
	if err != nil || holder == nil {
		t.Fatalf("first fair lock on a free resource: %v %v", holder, err)
	}
	c.waitHeld(t, "f", holder.Token)
	// A retry with the holder's TOKEN while others queue is the same
	// grant again, not a refusal that drops the held lock.
	mine, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"g"}, TTL: 10 * time.Second, Token: "mine"})
	if err != nil || mine == nil {
		t.Fatalf("fair lock with TOKEN: %v %v", mine, err)
	}
	c.waitHeld(t, "g", "mine")
	gw := make(chan fairResult, 1)
	go func() {
		l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"g"}, TTL: time.Second, Wait: 20 * time.Second})
		gw <- fairResult{0, l, err}
	}()
	if !eventually(2*time.Second, func() bool { return len(c.queued(c.nodes[0], "g")) == 1 }) {
		t.Fatal("the waiter on g never queued")
	}
	if again, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"g"}, TTL: 10 * time.Second, Token: "mine"}); again == nil || err != nil {
		t.Fatalf("TOKEN retry by the holder: %v %v", again, err)
	}
	if h := c.holders("g", "mine"); h != len(c.nodes) {
		t.Fatalf("the holder's lock is on %d masters after its TOKEN retry", h)
	}
	c.eng.lockRelease(ctx, []string{"g"}, "mine")
	r := <-gw
	if r.lease == nil || r.err != nil {
		t.Fatalf("the waiter on g: %v %v", r.lease, r.err)
	}
	c.eng.lockRelease(ctx, r.lease.Resources, r.lease.Token)
	// Without WAIT a fair lock does not queue.
	if l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: time.Second}); l != nil || err != nil {
		t.Fatalf("no-wait try on a held lock: %v %v", l, err)
	}
	const n = 8
	got := make(chan fairResult, n)
	for i := range n {
		tok := fmt.Sprintf("w%d", i)
		go func() {
			l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second, Wait: 20 * time.Second, Token: tok})
			got <- fairResult{i, l, err}
		}()
		c.waitQueued(t, "f", tok)
	}
	// One order on every master: the same ticket for each waiter.
	if !eventually(time.Second, func() bool { _, ok := c.sameQueues("f", n); return ok }) {
		for i, f := range c.nodes {
			t.Errorf("master %d queue %v keys %v evals %v", i, c.queued(f, "f"), f.keys(), f.evalsBy)
		}
		t.FailNow()
	}
	tries := func(tok string) int { return c.nodes[0].callsWith("lock_acquire_fair", tok) }
	before := make([]int, n)
	for i := range n {
		before[i] = tries(fmt.Sprintf("w%d", i))
	}
	release := holder
	for i := range n {
		t1 := time.Now()
		if held, err := c.eng.lockRelease(ctx, release.Resources, release.Token); !held || err != nil {
			t.Fatalf("release %d: %v %v", i, held, err)
		}
		r := <-got
		if r.who != i || r.lease == nil || r.err != nil {
			t.Fatalf("hand-off %d went to %d (%v, %v)", i, r.who, r.lease, r.err)
		}
		if d := time.Since(t1); d > time.Second {
			t.Fatalf("hand-off %d took %v: a timer, not the release", i, d)
		}
		release = r.lease
	}
	if held, err := c.eng.lockRelease(ctx, release.Resources, release.Token); !held || err != nil {
		t.Fatalf("last release: %v %v", held, err)
	}
	c.settle()
	// Only the head is woken by a release: after queueing, each waiter
	// tries once or twice (a try may reach a master before the release),
	// rarely more; woken by every release ahead of it, the waiters
	// would try about n*n/2 times.
	total := 0
	for i := range n {
		total += tries(fmt.Sprintf("w%d", i)) - before[i]
	}
	if total > 2*n {
		t.Errorf("%d tries after queueing for %d hand-offs: waiters behind the head were woken", total, n)
	}
	c.expectOnlyFences(t)
}

// expectOnlyFences fails unless every master keeps only the master-wide
// keys (fences, the lease high-water mark) and writer-waiting marks that expire within writerMark (a waiter
// granted by a quorum leaves its mark on a master that refused it).
func (c *cluster) expectOnlyFences(t *testing.T) {
	t.Helper()
	for i, f := range c.nodes {
		for _, k := range f.keys() {
			switch {
			case strings.HasSuffix(k, "fence-hwm"), strings.HasSuffix(k, "fence-lag"), strings.HasSuffix(k, "lease-hwm"):
			case strings.HasPrefix(k, "redlock-proxy:rw-w:") && f.m.TTL(k) > 0 && f.m.TTL(k) <= c.eng.writerMark():
			default:
				t.Errorf("master %d keeps %s", i, k)
			}
		}
	}
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// sameQueues reports whether every master holds the same queue of r, of
// n waiters, and returns master 0's.
func (c *cluster) sameQueues(r string, n int) (map[string]float64, bool) {
	q0 := c.queued(c.nodes[0], r)
	for _, f := range c.nodes {
		if q := c.queued(f, r); len(q) != n || !mapsEqual(q, q0) {
			return q0, false
		}
	}
	return q0, true
}

func mapsEqual(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFairLockLeaves: a waiter whose WAIT runs out, and one whose caller
// leaves, are out of the queue at once; the next release goes to the one
// still waiting, promptly.
func TestFairLockLeaves(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{RetryDelay: 10 * time.Second, RetryJitter: 1})
	ctx := context.Background()
	holder, _ := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second})
	c.waitHeld(t, "f", holder.Token)
	short := make(chan fairResult, 1)
	go func() {
		l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: time.Second, Wait: 300 * time.Millisecond, Token: "short"})
		short <- fairResult{0, l, err}
	}()
	c.waitQueued(t, "f", "short")
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan fairResult, 1)
	go func() {
		l, err := c.eng.fairAcquire(cctx, Request{Resources: []string{"f"}, TTL: time.Second, Wait: 20 * time.Second, Token: "gone"})
		gone <- fairResult{1, l, err}
	}()
	c.waitQueued(t, "f", "gone")
	last := make(chan fairResult, 1)
	go func() {
		l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: time.Second, Wait: 20 * time.Second, Token: "last"})
		last <- fairResult{2, l, err}
	}()
	c.waitQueued(t, "f", "last")
	if r := <-short; r.lease != nil || r.err != nil {
		t.Fatalf("WAIT ran out: %v %v", r.lease, r.err)
	}
	cancel()
	if r := <-gone; r.lease != nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("caller left: %v %v", r.lease, r.err)
	}
	if !eventually(time.Second, func() bool {
		q, ok := c.sameQueues("f", 1)
		_, last := q["last"]
		return ok && last
	}) {
		for i, f := range c.nodes {
			t.Errorf("master %d queue %v, want only last", i, c.queued(f, "f"))
		}
		t.FailNow()
	}
	t1 := time.Now()
	c.eng.lockRelease(ctx, holder.Resources, holder.Token)
	r := <-last
	if r.lease == nil || r.err != nil || time.Since(t1) > time.Second {
		t.Fatalf("last: %v %v after %v", r.lease, r.err, time.Since(t1))
	}
}

// TestFairLockStaleHead: a queued waiter that stops trying (its proxy
// died) leaves the queue once its place's life ran out; the waiter
// behind it is granted then, not blocked for good.
func TestFairLockStaleHead(t *testing.T) {
	t.Parallel()
	stale := 400 * time.Millisecond
	c := newCluster(t, 3, Options{RetryDelay: 50 * time.Millisecond, RetryJitter: 1})
	ctx := context.Background()
	// The dead waiter: queued with the lowest ticket, never tries again.
	dead := c.eng.fairKeys("f")
	now := time.Now().UnixMilli()
	for _, f := range c.nodes {
		f.m.ZAdd(dead[0], 1, "dead")
		f.m.ZAdd(dead[1], float64(now+stale.Milliseconds()), "dead")
	}
	// And one queued ahead without a deadline at all (its deadline key
	// was lost): it counts as gone at once.
	for _, f := range c.nodes {
		f.m.ZAdd(dead[0], 0, "nodeadline")
	}
	t0 := time.Now()
	l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: time.Second, Wait: 5 * time.Second})
	if l == nil || err != nil {
		t.Fatalf("behind a stale head: %v %v", l, err)
	}
	if d := time.Since(t0); d < stale-50*time.Millisecond || d > stale+500*time.Millisecond {
		t.Fatalf("granted after %v, stale after %v", d, stale)
	}
}

// TestFairLockOneOrder is the classic bug of fair locks on several
// masters: waiters arriving together reach the masters in different
// orders, and a queue ordered by each master's arrival splits, so that no
// waiter is the head on a quorum and all of them stall. Tickets are agreed
// by a quorum before waiting: every master holds the same order, and
// every waiter is granted, one at a time, in ticket order.
func TestFairLockOneOrder(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			c := newCluster(t, 5, Options{RetryDelay: 20 * time.Millisecond, RetryJitter: 10 * time.Millisecond})
			ctx := context.Background()
			holder, _ := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second})
			c.waitHeld(t, "f", holder.Token)
			for _, f := range c.nodes {
				f.setSendDelay(time.Duration(rand.IntN(3000)) * time.Microsecond)
			}
			const n = 8
			var mu sync.Mutex
			var order []string
			var holding int
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				tok := fmt.Sprintf("w%d", i)
				go func() {
					defer wg.Done()
					l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second, Wait: 10 * time.Second, Token: tok})
					if l == nil || err != nil {
						t.Errorf("%s: %v %v", tok, l, err)
						return
					}
					mu.Lock()
					holding++
					if holding > 1 {
						t.Errorf("two holders")
					}
					order = append(order, tok)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					holding--
					mu.Unlock()
					c.eng.lockRelease(ctx, l.Resources, l.Token)
				}()
			}
			for i := range n {
				c.waitQueued(t, "f", fmt.Sprintf("w%d", i))
			}
			for _, f := range c.nodes {
				f.setSendDelay(0)
			}
			var tickets map[string]float64
			if !eventually(2*time.Second, func() bool {
				var ok bool
				tickets, ok = c.sameQueues("f", n)
				return ok
			}) {
				for i, f := range c.nodes {
					t.Errorf("master %d queue %v", i, c.queued(f, "f"))
				}
				t.FailNow()
			}
			c.eng.lockRelease(ctx, holder.Resources, holder.Token)
			wg.Wait()
			want := slices.Clone(order)
			slices.SortFunc(want, func(a, b string) int { return int(tickets[a] - tickets[b]) })
			if !slices.Equal(order, want) {
				t.Fatalf("granted %v, ticket order %v (%v)", order, want, tickets)
			}
		})
	}
}

// TestWakeupsHandOff: a hand-off wakes the plain waiters and only the
// fair waiter it names.
func TestWakeupsHandOff(t *testing.T) {
	t.Parallel()
	w := NewWakeups()
	plain := w.watch([]string{"ch"}, nil, "", 1, systemClock{})
	a := w.watch([]string{"ch"}, nil, "a", 1, systemClock{})
	b := w.watch([]string{"ch"}, nil, "b", 1, systemClock{})
	woken := func(wt *watch) bool {
		select {
		case <-wt.c:
			return true
		default:
			return false
		}
	}
	w.Notify("ch", "h:b")
	if !woken(plain) || woken(a) || !woken(b) {
		t.Fatal("h:b must wake the plain waiter and b alone")
	}
	w.Notify("ch", "h:nobody")
	if !woken(plain) || woken(a) || woken(b) {
		t.Fatal("h:nobody must wake the plain waiter only")
	}
	w.Notify("ch", "1")
	if !woken(plain) || !woken(a) || !woken(b) {
		t.Fatal("a plain release wakes everyone")
	}
	// A waiter that needs 2 announcements (a quorum) tries after the
	// second one, or after handOffGrace if it never comes.
	c := w.watch([]string{"ch"}, nil, "c", 2, systemClock{})
	w.Notify("ch", "h:c")
	t0 := time.Now()
	if err := c.sleep(context.Background(), time.Minute); err != nil || time.Since(t0) < handOffGrace {
		t.Fatalf("one announcement of 2: slept %v (%v), want handOffGrace", time.Since(t0), err)
	}
	w.Notify("ch", "h:c")
	w.Notify("ch", "h:c")
	if err := c.sleep(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if c.heard != 0 {
		t.Fatalf("heard %d after the try started", c.heard)
	}
}

// laggingNode is a master as seen by a proxy whose requests leave late
// (a proxy starved of CPU): each Send is issued lag after it was made, in
// the order made.
type laggingNode struct {
	Node
	lag  time.Duration
	reqs chan func()
	// onSend, if set before the node is used, is told of each request
	// as it is sent (before its lag).
	onSend func(name string, keys, args []string)
}

func newLaggingNode(t *testing.T, n Node, lag time.Duration) *laggingNode {
	l := &laggingNode{Node: n, lag: lag, reqs: make(chan func(), 1024)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case f := <-l.reqs:
				f()
			case <-stop:
				return
			}
		}
	}()
	return l
}

func (l *laggingNode) Send(name string, keys, args []string, done func(any, error)) {
	if l.onSend != nil {
		l.onSend(name, keys, args)
	}
	at := time.Now().Add(l.lag)
	l.reqs <- func() {
		time.Sleep(time.Until(at))
		l.Node.Send(name, keys, args, done)
	}
}

// TestFairOrderFromArrival: a waiter's place is when its proxy took the
// command, not when its requests reached the masters. Waiter A arrives
// first at a proxy whose requests leave 80 ms late (a loaded proxy);
// waiter B arrives 30 ms later at a quick one, and is queued on the
// masters first. A is granted first. (When a waiter's place was a ticket
// taken once its first try had been refused, B's came first and B was
// granted first: the inversion the fault runs saw under load.)
func TestFairOrderFromArrival(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{RetryDelay: 20 * time.Millisecond, RetryJitter: 5 * time.Millisecond})
	ctx := context.Background()
	holder, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second})
	if err != nil || holder == nil {
		t.Fatalf("holder: %v %v", holder, err)
	}
	// aSent is closed once A's first try leaves its proxy: A has taken
	// its place (its ticket, from when the proxy took the command) by then.
	aSent := make(chan struct{})
	var aOnce sync.Once
	nodes := make([]Node, len(c.nodes))
	for i, f := range c.nodes {
		ln := newLaggingNode(t, f, 80*time.Millisecond)
		ln.onSend = func(_ string, _, args []string) {
			if slices.Contains(args, "A") {
				aOnce.Do(func() { close(aSent) })
			}
		}
		nodes[i] = ln
	}
	slow, err := New(nodes, Options{MasterTimeout: 400 * time.Millisecond, Wakeups: c.wake, RetryDelay: 20 * time.Millisecond, RetryJitter: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Close)
	type result struct {
		who string
		l   *Lease
		err error
	}
	got := make(chan result, 2)
	wait := func(e *Engine, who string) {
		l, err := e.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second, Wait: 10 * time.Second, Token: who})
		got <- result{who, l, err}
	}
	go wait(slow, "A")
	select {
	case <-aSent:
	case <-time.After(2 * time.Second):
		t.Fatal("A's first try never left its proxy")
	}
	time.Sleep(30 * time.Millisecond) // B arrives 30 ms after A's try left
	go wait(c.eng, "B")
	// Both queued on every master, then the holder lets go.
	if !eventually(2*time.Second, func() bool {
		q := c.eng.fairKeys("f")[0]
		for _, f := range c.nodes {
			if m, _ := f.m.ZMembers(q); !slices.Contains(m, "A") || !slices.Contains(m, "B") {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the waiters never queued on every master")
	}
	if held, err := c.eng.Release(ctx, holder); !held || err != nil {
		t.Fatalf("unlock: %v %v", held, err)
	}
	first := <-got
	if first.err != nil || first.l == nil || first.who != "A" {
		t.Fatalf("granted first: %s (%v, %v); want A, which arrived 30 ms before B", first.who, first.l, first.err)
	}
	eng := slow
	if _, err := eng.Release(ctx, first.l); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second.err != nil || second.l == nil {
		t.Fatalf("B: %v %v", second.l, second.err)
	}
	c.eng.Release(ctx, second.l)
}

// TestFairLateGrantKeepsPlace: the head of a fair queue whose try lands on
// the masters only after its round gave up (a grant, then the try's
// rollback) keeps its place: the next grant is still the head's, not that
// of the waiter behind it, which the rollback's announcement would
// otherwise name. A grant that took the waiter out of the queue on each
// master at once would leave, once rolled back, the waiter behind at the
// head of every master that granted it.
func TestFairLateGrantKeepsPlace(t *testing.T) {
	t.Parallel()
	// Tries only when woken (or after a long retry delay): the order is
	// the queue's, not the retry timers'.
	c := newCluster(t, 5, Options{RetryDelay: 5 * time.Second, RetryJitter: time.Millisecond})
	ctx := context.Background()
	holder, _ := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second})
	if holder == nil {
		t.Fatal("the holder was not granted")
	}
	granted := make(chan string, 2)
	var wg sync.WaitGroup
	for _, tok := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.eng.fairAcquire(ctx, Request{Resources: []string{"f"}, TTL: 10 * time.Second, Wait: 20 * time.Second, Token: tok})
			if l == nil || err != nil {
				t.Errorf("%s: %v %v", tok, l, err)
				granted <- ""
				return
			}
			granted <- tok
			c.eng.lockRelease(ctx, l.Resources, l.Token)
		}()
		c.waitQueued(t, "f", tok) // w1 queues first: the lower ticket
	}
	// w1's next try (it is the head: the release wakes it) reaches every
	// master well after its round gave up.
	for _, f := range c.nodes {
		f.mu.Lock()
		f.holdNext = map[string]time.Duration{"lock_acquire_fair": 4 * c.eng.opts.MasterTimeout}
		f.mu.Unlock()
	}
	c.eng.lockRelease(ctx, holder.Resources, holder.Token)
	if first := <-granted; first != "w1" {
		t.Fatalf("first grant after the release: %q, want the head of the queue, w1", first)
	}
	if second := <-granted; second != "w2" {
		t.Fatalf("second grant: %q, want w2", second)
	}
	wg.Wait()
}
