package quorum

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func semReq(limit, count int, ttl time.Duration) Request {
	return semReqOn("api", limit, count, ttl)
}

func semReqOn(name string, limit, count int, ttl time.Duration) Request {
	return Request{Resources: []string{name}, TTL: ttl, Options: SemaphoreOptions{Limit: limit, Count: count}}
}

func TestSemaphoreBasics(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	var leases []*Lease
	for i := range 3 {
		l, err := c.eng.semAcquire(ctx, semReq(3, 1, 10*time.Second))
		if err != nil || l == nil {
			t.Fatalf("permit %d: %v %v", i, l, err)
		}
		leases = append(leases, l)
	}
	if l, err := c.eng.semAcquire(ctx, semReq(3, 1, 10*time.Second)); l != nil || err != nil {
		t.Fatalf("a 4th permit of 3: %v %v", l, err)
	}
	if n, err := c.eng.semCount(ctx, "api"); n != 3 || err != nil {
		t.Fatalf("count = %d, %v", n, err)
	}
	var le *LimitError
	if _, err := c.eng.semAcquire(ctx, semReq(4, 1, time.Second)); !errors.As(err, &le) || le.Limit != 3 {
		t.Fatalf("other limit: %v", err)
	}
	if held, err := c.eng.semRelease(ctx, "api", "nope"); held || err != nil {
		t.Fatalf("release with a wrong token = %v, %v", held, err)
	}
	if v, err := c.eng.semExtend(ctx, leases[0], 20*time.Second); v < 10*time.Second || err != nil {
		t.Fatalf("extend = %v, %v", v, err)
	}
	if held, err := c.eng.semRelease(ctx, "api", leases[0].Token); !held || err != nil {
		t.Fatalf("release = %v, %v", held, err)
	}
	if held, err := c.eng.semRelease(ctx, "api", leases[0].Token); held || err != nil {
		t.Fatalf("second release = %v, %v", held, err)
	}
	// COUNT: two permits need two free slots, all or nothing.
	if l, err := c.eng.semAcquire(ctx, semReq(3, 2, 10*time.Second)); l != nil || err != nil {
		t.Fatalf("2 permits with 1 free: %v %v", l, err)
	}
	two, err := c.eng.semAcquire(ctx, Request{Resources: []string{"api"}, TTL: 10 * time.Second, Token: "mine", Options: SemaphoreOptions{Limit: 3, Count: 1}})
	if err != nil || two == nil {
		t.Fatalf("the freed permit: %v %v", two, err)
	}
	// A TOKEN retry is idempotent: the same slot, not a second one.
	again, err := c.eng.semAcquire(ctx, Request{Resources: []string{"api"}, TTL: 10 * time.Second, Token: "mine", Options: SemaphoreOptions{Limit: 3, Count: 1}})
	if err != nil || again == nil || !slices.Equal(again.Slots, two.Slots) {
		t.Fatalf("retry with the same token: %+v %v, first %+v", again, err, two)
	}
	for _, l := range append(leases[1:], two) {
		if held, err := c.eng.semRelease(ctx, "api", l.Token); !held || err != nil {
			t.Fatalf("release %s = %v, %v", l.Token, held, err)
		}
	}
	if n, err := c.eng.semCount(ctx, "api"); n != 0 || err != nil {
		t.Fatalf("count after release = %d, %v", n, err)
	}
	// Nothing is left: not the slots, not the records, not the limit;
	// only the master-wide lease high-water mark, which expires with the
	// longest permit granted (20 s here), an eighth of it later at most.
	c.settle()
	for i, f := range c.nodes {
		for _, k := range f.keys() {
			if k != "redlock-proxy:lease-hwm" || f.m.TTL(k) > 20*time.Second*9/8 {
				t.Errorf("master %d keeps %v", i, k)
			}
		}
	}
}

// TestSemaphoreCounterexample runs PROTOCOL.md's counterexample: 3 masters,
// limit 2, grants A on {m1,m2}, B on {m2,m3}, C on {m1,m3}. Per-master
// holder sets of at most 2 would grant all three; slots taken like locks
// grant at most 2.
func TestSemaphoreCounterexample(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	granted := 0
	for _, down := range []int{2, 0, 1} {
		for i, f := range c.nodes {
			f.setDown(i == down)
		}
		l, err := c.eng.semAcquire(ctx, semReq(2, 1, 10*time.Second))
		if err != nil {
			t.Fatalf("master %d down: %v", down, err)
		}
		if l != nil {
			granted++
		}
	}
	if granted > 2 {
		t.Fatalf("%d permits of a limit-2 semaphore granted", granted)
	}
	// Each master alone holds at most 2 tokens, which is what the naive
	// design checks; it is not the invariant.
	for i, f := range c.nodes {
		n := 0
		for _, k := range f.keys() {
			if v, _ := f.value(k); len(v) == 32 {
				n++
			}
		}
		if n > 2 {
			t.Errorf("master %d holds %d slots", i, n)
		}
	}
}

// TestSemaphoreRoundTwo: masters in different states give different slots
// in round 1; a grant still comes (in round 1 or 2) and holds its slots on
// a quorum.
func TestSemaphoreRoundTwo(t *testing.T) {
	t.Parallel()
	for range 20 {
		// Every master answers: a master timeout far above a busy
		// machine's scheduling delays keeps a late answer from
		// reading as a master down; nothing here waits it out.
		c := buildCluster(t, 3, Options{MasterTimeout: 2 * time.Second})
		k, _ := c.eng.semKeys("api")
		c.nodes[0].set(k.base, "2", time.Minute)
		c.nodes[1].set(k.base, "2", time.Minute)
		c.nodes[0].set(k.base+":s:0", "other", time.Minute)
		c.nodes[1].set(k.base+":s:1", "other", time.Minute)
		l, err := c.eng.semAcquire(context.Background(), semReq(2, 1, 10*time.Second))
		if err != nil || l == nil || len(l.Slots) != 1 {
			t.Fatalf("lease %+v, %v", l, err)
		}
		if h := c.holders(fmt.Sprintf("%s:s:%d", k.base, l.Slots[0]), l.Token); h < 2 {
			t.Fatalf("slot %d held on %d masters", l.Slots[0], h)
		}
		c.close()
	}
}

// TestSemaphoreNeverOversubscribes: workers take and give back permits of a
// limit-3 semaphore on 5 masters while random minorities of masters go
// down or slow; at no instant may more than 3 grants be valid.
func TestSemaphoreNeverOversubscribes(t *testing.T) {
	t.Parallel()
	const limit = 3
	const timeout = 50 * time.Millisecond
	c := newCluster(t, 5, Options{MasterTimeout: timeout, RetryDelay: 5 * time.Millisecond, RetryJitter: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	type window struct{ from, to time.Time }
	var (
		mu      sync.Mutex
		windows []window
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for ctx.Err() == nil {
			for _, f := range c.nodes {
				f.setDown(false)
				f.setDelay(0)
			}
			for _, j := range rng.Perm(5)[:rng.IntN(3)] {
				if rng.IntN(2) == 0 {
					c.nodes[j].setDown(true)
				} else {
					c.nodes[j].setDelay(2 * timeout)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, f := range c.nodes {
			f.setDown(false)
			f.setDelay(0)
		}
	}()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := c.eng.semAcquire(ctx, Request{Resources: []string{"api"}, TTL: 300 * time.Millisecond, Wait: 200 * time.Millisecond, Options: SemaphoreOptions{Limit: limit, Count: 1 + w%2}})
				if err != nil || l == nil {
					continue
				}
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				// Live from the decision to the release, or to the end
				// of its validity if that comes first.
				end := l.Start.Add(l.Validity)
				if now := time.Now(); now.Before(end) {
					end = now
				}
				mu.Lock()
				for range 1 + w%2 {
					windows = append(windows, window{l.Decided, end})
				}
				mu.Unlock()
				c.eng.semRelease(context.Background(), "api", l.Token)
			}
		}()
	}
	wg.Wait()
	if len(windows) < 10 {
		t.Fatalf("only %d permits granted", len(windows))
	}
	// Sweep: at every grant's start, count the windows that contain it.
	sort.Slice(windows, func(i, j int) bool { return windows[i].from.Before(windows[j].from) })
	for i, w := range windows {
		live := 0
		for _, o := range windows[:i+1] {
			if !o.to.Before(w.from) {
				live++
			}
		}
		if live > limit {
			t.Fatalf("%d permits valid at once at grant %d of %d", live, i, len(windows))
		}
	}
	t.Logf("%d permits granted", len(windows))
}

// TestWakeupsCounted: a counted release wakes as many local waiters as it
// freed permits, oldest first, once however many masters announce it.
func TestWakeupsCounted(t *testing.T) {
	t.Parallel()
	w := NewWakeups()
	var ws []*watch
	for range 4 {
		ws = append(ws, w.watch([]string{"ch"}, nil, "", 1, systemClock{}))
	}
	woken := func() []int {
		var out []int
		for i, wt := range ws {
			select {
			case <-wt.c:
				out = append(out, i)
			default:
			}
		}
		return out
	}
	for range 5 { // five masters announce the same release
		w.Notify("ch", "1:a")
	}
	if got := woken(); !slices.Equal(got, []int{0}) {
		t.Fatalf("1 permit freed woke %v", got)
	}
	w.Notify("ch", "2:b")
	w.Notify("ch", "2:b")
	if got := woken(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("2 permits freed woke %v", got)
	}
	w.Notify("ch", "1")
	if got := woken(); len(got) != 4 {
		t.Fatalf("a lock release woke %v, want all", got)
	}
	w.Notify("other", "3:c")
	if got := woken(); len(got) != 0 {
		t.Fatalf("another channel woke %v", got)
	}
}

// TestWakeupsRanked: a counted release wakes the local waiters with the
// lowest rank (a semaphore waiter's ticket) first, whatever order they
// began waiting in; equal ranks go oldest first.
func TestWakeupsRanked(t *testing.T) {
	t.Parallel()
	w := NewWakeups()
	ranks := []uint64{5, 3, math.MaxUint64, 4, 3}
	var ws []*watch
	for _, r := range ranks {
		wt := w.watch([]string{"ch"}, nil, "", 1, systemClock{})
		wt.setRank(r)
		ws = append(ws, wt)
	}
	for _, tc := range []struct {
		msg  string
		want []int
	}{
		// Woken so far (a waiter not yet running is not woken twice).
		{"1:a", []int{1}},
		{"2:b", []int{1, 3, 4}},
		{"2:c", []int{0, 1, 2, 3, 4}},
	} {
		w.Notify("ch", tc.msg)
		var got []int
		for i, wt := range ws {
			if len(wt.c) == 1 {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("%s woke %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// TestWakeupsCountedAgain: each later announcement of a counted release
// wakes again the waiters it woke (their try may have reached a master
// before the release did), and no others; one announced before any
// waiter registered wakes, at a later announcement, as many as it freed.
func TestWakeupsCountedAgain(t *testing.T) {
	t.Parallel()
	w := NewWakeups()
	a := w.watch([]string{"ch"}, nil, "", 1, systemClock{})
	b := w.watch([]string{"ch"}, nil, "", 1, systemClock{})
	w.Notify("ch", "1:a")
	<-a.c // a was woken, and tried
	w.Notify("ch", "1:a")
	if len(a.c) != 1 || len(b.c) != 0 {
		t.Fatalf("a later announcement woke a %d, b %d: want a again, not b", len(a.c), len(b.c))
	}
	a.close()
	w.Notify("ch", "1:a")
	if len(b.c) != 0 {
		t.Fatal("an announcement of a release whose waiter left woke another")
	}
	w.Notify("ch2", "1:z") // no waiter yet: it wakes nobody
	late := w.watch([]string{"ch2"}, nil, "", 1, systemClock{})
	later := w.watch([]string{"ch2"}, nil, "", 1, systemClock{})
	w.Notify("ch2", "1:z")
	<-late.c
	w.Notify("ch2", "1:z")
	if len(late.c) != 1 || len(later.c) != 0 {
		t.Fatalf("a release first announced before anyone waited woke %d, %d: want the first only, twice", len(late.c), len(later.c))
	}
}

// TestSemaphoreWokenBeforeReleaseEverywhere: a waiter woken by the first
// master that ran a release tries at once, and may reach other masters
// before the release does there: refused by them, it must be woken again
// by their announcements of the same release, which come after, and not
// wait out its retry timer. Here the release is held back on three of
// five masters until the woken waiter's try was refused there.
func TestSemaphoreWokenBeforeReleaseEverywhere(t *testing.T) {
	t.Parallel()
	const name = "woken early"
	// The waiter tries again only when told (or in 10 s); masters answer
	// late for a second before they count as down, so that the release
	// held back on three of them does not make the rounds skip them.
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: 1, MasterTimeout: time.Second})
	ctx := context.Background()
	held, err := c.eng.semAcquire(ctx, semReqOn(name, 1, 1, time.Minute))
	if err != nil || held == nil {
		t.Fatalf("the permit: %v %v", held, err)
	}
	tries := func(f *fakeNode) int { return f.calls("sem_acquire") }
	before := make([]int, len(c.nodes))
	for i, f := range c.nodes {
		before[i] = tries(f)
	}
	got := c.semWaiter(ctx, name, 1, 1)
	// The waiter was refused twice everywhere (its first try, and the
	// one after it subscribed and queued): it waits for a release.
	if !eventually(5*time.Second, func() bool {
		for i, f := range c.nodes {
			if tries(f) < before[i]+2 || len(c.semQueued(f, name)) != 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the waiter did not queue and wait")
	}
	slow := c.nodes[2:]
	for _, f := range slow {
		f.strand("sem_release")
	}
	released := make(chan error, 1)
	go func() {
		_, err := c.eng.semRelease(ctx, name, held.Token)
		released <- err
	}()
	// Masters 0 and 1 ran the release and announced it; the waiter,
	// woken, tried again, and the slow masters (the permit still held
	// there) refused it.
	if !eventually(5*time.Second, func() bool {
		for i, f := range slow {
			if tries(f) < before[i+2]+3 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the waiter was not woken by the first announcement of the release")
	}
	for _, f := range slow {
		f.unhold() // the release lands there now, and they announce it
	}
	select {
	case r := <-got:
		if r.err != nil || r.l == nil {
			t.Fatalf("the waiter: %+v %v", r.l, r.err)
		}
		if ok, err := c.eng.semRelease(ctx, name, r.l.Token); !ok || err != nil {
			t.Fatalf("release of the waiter's permit: %v %v", ok, err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not woken by the later announcements of the release: it waits for its retry timer")
	}
	if err := <-released; err != nil {
		t.Logf("the held-back release: %v", err)
	}
	c.settle()
}

// heldNotes holds back every release announcement from the masters until
// deliver, so that a test decides when the waiters hear of a release.
type heldNotes struct {
	mu   sync.Mutex
	open bool
	held [][2]string
	to   func(string, string)
}

func (h *heldNotes) notify(ch, msg string) {
	h.mu.Lock()
	if !h.open {
		h.held = append(h.held, [2]string{ch, msg})
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.to(ch, msg)
}

// deliver passes on what was held, and everything from now on.
func (h *heldNotes) deliver() {
	h.mu.Lock()
	held := h.held
	h.open, h.held = true, nil
	h.mu.Unlock()
	for _, m := range held {
		h.to(m[0], m[1])
	}
}

// holdNotes puts a heldNotes between the cluster's masters and its router.
func (c *cluster) holdNotes() *heldNotes {
	h := &heldNotes{to: c.wake.Notify}
	fn := h.notify
	for _, f := range c.nodes {
		f.notify.Store(&fn)
	}
	return h
}

// semResult is what a waiter started by semWaiter got.
type semResult struct {
	l   *Lease
	err error
}

// semWaiter starts a waiter for count of the semaphore name's limit
// permits (ttl a minute, waiting up to 20 s) and returns where its result
// arrives.
func (c *cluster) semWaiter(ctx context.Context, name string, limit, count int) <-chan semResult {
	got := make(chan semResult, 1)
	go func() {
		req := semReqOn(name, limit, count, time.Minute)
		req.Wait = 20 * time.Second
		l, err := c.eng.semAcquire(ctx, req)
		got <- semResult{l, err}
	}()
	return got
}

// semQueued is master f's waiter queue of semaphore name.
func (c *cluster) semQueued(f *fakeNode, name string) []string {
	k, _ := c.eng.semKeys(name)
	ms, _ := f.m.ZMembers(k.queue)
	return ms
}

// TestSemaphoreWaitersFirst: a waiter keeps the permits a release frees
// for it. Requests that arrive after the release, before the waiter has
// even heard of it (the announcements are held back), are refused, both
// one that does not wait and one that waits (and queues behind); a
// COUNT n waiter keeps its place while permits are freed one by one.
// Once told, the waiter is granted, and nothing is left on the masters.
func TestSemaphoreWaitersFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		limit, count int
	}{
		{"one permit", 1, 1},
		{"COUNT 2 of 3", 3, 2},
		{"COUNT 3 of 3", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "first " + tc.name // a semaphore no other test used
			// The waiter tries again only when told (or in 10 s).
			c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: time.Millisecond})
			notes := c.holdNotes()
			ctx := context.Background()
			var held []*Lease
			for i := range tc.limit {
				l, err := c.eng.semAcquire(ctx, semReqOn(name, tc.limit, 1, time.Minute))
				if err != nil || l == nil {
					t.Fatalf("permit %d: %v %v", i, l, err)
				}
				held = append(held, l)
			}
			got := c.semWaiter(ctx, name, tc.limit, tc.count)
			if !eventually(5*time.Second, func() bool {
				for _, f := range c.nodes {
					if len(c.semQueued(f, name)) != 1 {
						return false
					}
				}
				return true
			}) {
				for i, f := range c.nodes {
					t.Logf("master %d queues %v", i, c.semQueued(f, name))
				}
				t.Fatal("the waiter is not queued on every master")
			}
			for i := range tc.count {
				if ok, err := c.eng.semRelease(ctx, name, held[i].Token); !ok || err != nil {
					t.Fatalf("release %d: %v %v", i, ok, err)
				}
				for _, wait := range []time.Duration{0, 30 * time.Millisecond} {
					req := semReqOn(name, tc.limit, 1, time.Minute)
					req.Wait = wait
					if l, err := c.eng.semAcquire(ctx, req); l != nil || err != nil {
						t.Fatalf("after release %d, a request with WAIT %v took a permit the waiter waits for: %+v %v", i, wait, l, err)
					}
				}
			}
			notes.deliver()
			select {
			case r := <-got:
				if r.err != nil || r.l == nil || r.l.Count != tc.count {
					t.Fatalf("the waiter: %+v %v", r.l, r.err)
				}
				held = append(held[tc.count:], r.l)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not granted once told of the releases")
			}
			for _, l := range held {
				if ok, err := c.eng.semRelease(ctx, name, l.Token); !ok || err != nil {
					t.Fatalf("release %s: %v %v", l.Token, ok, err)
				}
			}
			// Nothing is left but the master-wide marks: the lease
			// high-water mark, and the fence sequence, which the
			// waiter's ticket raised.
			c.settle()
			for i, f := range c.nodes {
				for _, k := range f.keys() {
					if k != "redlock-proxy:lease-hwm" && k != "redlock-proxy:fence-hwm" {
						t.Errorf("master %d keeps %v", i, k)
					}
				}
			}
		})
	}
}

// TestSemaphoreQueueLapses: a queued waiter whose proxy died (nobody
// renews its entry) holds its permits back only until its deadline on
// each master: while it lives, a request that does not wait is refused
// when the waiter's count leaves too few permits; once it passed, the
// next try removes it, is granted, and leaves no queue behind.
func TestSemaphoreQueueLapses(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	k, _ := c.eng.semKeys("lapse")
	place := func(deadline time.Time) {
		for _, f := range c.nodes {
			f.m.ZAdd(k.queue, 1, "2:dead")
			f.m.ZAdd(k.deadlines, float64(deadline.UnixMilli()), "2:dead")
		}
	}
	req := semReqOn("lapse", 3, 2, time.Minute)
	place(time.Now().Add(time.Minute))
	if l, err := c.eng.semAcquire(ctx, req); l != nil || err != nil {
		t.Fatalf("COUNT 2 of 3 granted past a live waiter for 2: %+v %v", l, err)
	}
	one, err := c.eng.semAcquire(ctx, semReqOn("lapse", 3, 1, time.Minute))
	if err != nil || one == nil {
		t.Fatalf("1 of 3 beside a waiter for 2: %+v %v", one, err)
	}
	place(time.Now().Add(-time.Millisecond))
	two, err := c.eng.semAcquire(ctx, req)
	if err != nil || two == nil {
		t.Fatalf("COUNT 2 after the waiter's deadline: %+v %v", two, err)
	}
	for _, l := range []*Lease{one, two} {
		if ok, err := c.eng.semRelease(ctx, "lapse", l.Token); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
	c.settle()
	for i, f := range c.nodes {
		for _, key := range f.keys() {
			if key != "redlock-proxy:lease-hwm" {
				t.Errorf("master %d keeps %v", i, key)
			}
		}
	}
}

// TestSemaphoreSilentHolders: a semaphore release or extension whose
// permits are held on a quorum of which two masters are silent (paused)
// and one answers, while two masters that never held them answer "not
// held", decides nothing: no quorum, never "not held" (it answered 0
// when the round's deadline had zeroed its count of silent masters).
// With three "not held" it is 0.
func TestSemaphoreSilentHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ops := []struct {
		name string
		do   func(c *cluster, l *Lease) (bool, error)
	}{
		{"release", func(c *cluster, l *Lease) (bool, error) { return c.eng.semRelease(ctx, "s", l.Token) }},
		{"extend", func(c *cluster, l *Lease) (bool, error) {
			v, err := c.eng.semExtend(ctx, &Lease{Primitive: Semaphore, Resources: []string{"s"}, Token: l.Token}, 5*time.Second)
			return v > 0, err
		}},
	}
	for _, o := range ops {
		for _, notHeld := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d not held", o.name, notHeld), func(t *testing.T) {
				c := newCluster(t, 5, Options{ReleaseRetry: -1})
				l, err := c.eng.semAcquire(ctx, Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 5 * time.Second, Options: SemaphoreOptions{Limit: 3, Count: 1}})
				if err != nil || l == nil {
					t.Fatalf("acquire: %v %v", l, err)
				}
				c.eng.bg.Wait()
				k, _ := c.eng.semKeys("s")
				for i := range notHeld {
					f := c.nodes[2+i%3]
					if notHeld == 3 {
						f = c.nodes[i]
					}
					f.del(k.base + ":s:" + strconv.Itoa(l.Slots[0]))
					f.del(k.base + ":t:" + l.Token)
					f.del(k.base)
				}
				if notHeld == 2 {
					c.nodes[0].hold()
					c.nodes[4].hold()
				}
				held, err := o.do(c, l)
				c.nodes[0].unhold()
				c.nodes[4].unhold()
				switch {
				case notHeld == 2 && (held || err == nil):
					t.Fatalf("held on m0, m1, m4 with m0 and m4 silent: %v %v, want no quorum", held, err)
				case notHeld == 3 && (held || err != nil):
					t.Fatalf("not held on 3 of 5: %v %v, want not held", held, err)
				}
			})
		}
	}
}

// TestSemSet: a stored limit serves requests that give none; a request
// with another limit is refused; a count above it is a CountError; no
// stored limit is ErrNoSemLimit; lowering revokes nothing and grants
// nothing until the held permits fit; raising wakes a waiter at once (the
// retry delay is far longer than the test); the stored limit outlives
// its permits for its keep, then nothing is left.
func TestSemSet(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: 1})
	ctx := context.Background()
	if _, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); !errors.Is(err, ErrNoSemLimit) {
		t.Fatalf("no stored limit: %v", err)
	}
	if err := c.eng.Semaphores().Set(ctx, "s", 3, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	var held []*Lease
	for i := range 3 {
		l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, 10*time.Second))
		if err != nil || l == nil {
			t.Fatalf("permit %d of the stored 3: %v %v", i, l, err)
		}
		held = append(held, l)
	}
	if l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); l != nil || err != nil {
		t.Fatalf("a 4th permit of 3: %v %v", l, err)
	}
	var le *LimitError
	if _, err := c.eng.Acquire(ctx, semStored("s", 5, 1, time.Second)); !errors.As(err, &le) || le.Limit != 3 {
		t.Fatalf("another limit given: %v", err)
	}
	var ce *CountError
	if _, err := c.eng.Acquire(ctx, semStored("s", 0, 4, time.Second)); !errors.As(err, &ce) || ce.Limit != 3 {
		t.Fatalf("4 permits of a stored 3: %v", err)
	}
	// Lower to 1 with 3 held: nothing is revoked, and nothing is granted
	// while any is held (one above the limit, or the one slot below it).
	if err := c.eng.Semaphores().Set(ctx, "s", 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := c.eng.Info(ctx, Semaphore, "s"); err != nil || n.Count != 3 {
		t.Fatalf("permits after lowering to 1: %v %v", n, err)
	}
	for _, l := range held[:2] {
		if ok, err := c.eng.Release(ctx, l); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
		if l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); l != nil || err != nil {
			t.Fatalf("granted with a permit still held of a limit lowered to 1: %v %v", l, err)
		}
	}
	if ok, err := c.eng.Release(ctx, held[2]); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	one, err := c.eng.Acquire(ctx, semStored("s", 0, 1, 10*time.Second))
	if err != nil || one == nil {
		t.Fatalf("the one permit of the lowered limit: %v %v", one, err)
	}
	// Raise to 2: a waiter is granted at once.
	got := make(chan *Lease, 1)
	go func() {
		r := semStored("s", 0, 1, 10*time.Second)
		r.Wait = 5 * time.Second
		l, err := c.eng.Acquire(ctx, r)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	c.waitSubscribed(t, c.eng.opts.MetaPrefix+"semreleased:1:s")
	if !eventually(2*time.Second, func() bool { return len(c.semQueued(c.nodes[0], "s")) == 1 }) {
		t.Fatal("the waiter never queued")
	}
	t0 := time.Now()
	if err := c.eng.Semaphores().Set(ctx, "s", 2, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil || time.Since(t0) > time.Second {
		t.Fatalf("waiter after raising the limit: %v after %v", w, time.Since(t0))
	}
	for _, l := range []*Lease{one, w} {
		if ok, err := c.eng.Release(ctx, l); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
	// No permit held: the stored limit lives its keep (2 s), and as long
	// as the last grant's ttl (10 s), then goes.
	if l, err := c.eng.semLimit(ctx, c.mustSemKeys(t, "s")); l != 2 || err != nil {
		t.Fatalf("the stored limit with no permit held: %v %v", l, err)
	}
	c.settle()
	for _, f := range c.nodes {
		f.m.FastForward(11 * time.Second)
	}
	for i, f := range c.nodes {
		for _, k := range f.keys() {
			if strings.Contains(k, "sem:") {
				t.Errorf("master %d keeps %s after the keep", i, k)
			}
		}
	}
}

func (c *cluster) mustSemKeys(t *testing.T, name string) semKeys {
	k, err := c.eng.semKeys(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSemSetLoweredQuorums is the over-subscription a resize must not
// allow with 5 masters: permit H holds slot 1 of limit 2 on masters 2-4
// only; the limit is lowered to 1 while masters 3 and 4 are down, so it
// reaches masters 0-2. A new permit must then be refused: masters 0 and 1
// would grant slot 0 (they do not hold slot 1), master 2 sees slot 1 held
// above the limit, and masters 3 and 4, which do not check slots above a
// limit they do not store, must not vote with the old limit (a quorum of
// masters that store the limit used). Granted, it would make 2 permits
// of a limit of 1. Then, once SemSet's repair made 3 and 4 store the new
// limit too, masters 2-4 refuse for the slot held above it.
func TestSemSetLoweredQuorums(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: 1})
	ctx := context.Background()
	k := c.mustSemKeys(t, "s")
	for i, f := range c.nodes {
		f.set(k.base, "2", 10*time.Second)
		if i >= 2 {
			f.set(k.base+":s:1", "H", 10*time.Second)
			f.set(k.base+":t:H", "1", 10*time.Second)
		}
	}
	c.nodes[3].setDown(true)
	c.nodes[4].setDown(true)
	if err := c.eng.Semaphores().Set(ctx, "s", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.nodes[3].setDown(false)
	c.nodes[4].setDown(false)
	if l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); l != nil || err != nil {
		t.Fatalf("a second permit of a limit lowered to 1: %v %v", l, err)
	}
	// Once SemSet's repair reached masters 3 and 4, every master stores
	// the limit: only the slot held above it (on 2-4) refuses the try.
	for i, f := range c.nodes {
		if !eventually(5*time.Second, func() bool { v, _ := f.value(k.base); return v == "1" }) {
			t.Fatalf("master %d never stored the lowered limit", i)
		}
	}
	if l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); l != nil || err != nil {
		t.Fatalf("a second permit of a limit lowered to 1, every master storing it: %v %v", l, err)
	}
	// H's permit expires or is released: the lowered limit grants one.
	if ok, err := c.eng.Release(ctx, &Lease{Primitive: Semaphore, Resources: []string{"s"}, Token: "H"}); !ok || err != nil {
		t.Fatalf("H's release: %v %v", ok, err)
	}
	if err := c.eng.Semaphores().Set(ctx, "s", 1, time.Minute); err != nil {
		t.Fatal(err) // now every master stores it
	}
	if l, err := c.eng.Acquire(ctx, semStored("s", 0, 1, time.Second)); l == nil || err != nil {
		t.Fatalf("the one permit once H left: %v %v", l, err)
	}
}

// semStored is semReqOn for Engine.Acquire (limit 0: the stored one).
func semStored(name string, limit, count int, ttl time.Duration) Request {
	r := semReqOn(name, limit, count, ttl)
	r.Primitive = Semaphore
	return r
}

// TestSemSetRepairAndVersions: a SemSet that met masters storing a later
// version (another proxy's clock ahead) proposes above it and is stored;
// a master that was down when SemSet returned is sent the limit until it
// stores it.
func TestSemSetRepairAndVersions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	k := c.mustSemKeys(t, "s")
	ahead := uint64(time.Now().Add(time.Hour).UnixMilli()) * 1000
	for _, f := range c.nodes {
		f.set(k.base, "4", time.Hour)
		f.set(k.base+":c", fmt.Sprintf("4:3600000:%d", ahead), time.Hour)
	}
	c.nodes[4].setDown(true)
	if err := c.eng.Semaphores().Set(ctx, "s", 2, time.Hour); err != nil {
		t.Fatalf("SemSet below a later stored version: %v", err)
	}
	stored := 0
	for _, f := range c.nodes[:4] {
		if v, _ := f.value(k.base); v == "2" {
			stored++
		}
	}
	if stored < c.eng.quorum {
		t.Fatalf("SemSet returned with the limit stored on %d masters", stored)
	}
	c.nodes[4].setDown(false)
	for i, f := range c.nodes {
		if !eventually(5*time.Second, func() bool { v, _ := f.value(k.base); return v == "2" }) {
			v, _ := f.value(k.base)
			t.Fatalf("master %d (4 was down) still stores limit %q", i, v)
		}
	}
	if l, err := c.eng.semLimit(ctx, k); l != 2 || err != nil {
		t.Fatalf("the stored limit: %v %v", l, err)
	}
}

// TestSemExtendAcrossLimits: while an RSEMSET reaches the masters, they
// disagree on the limit; a permit held on four masters (two on each
// limit) with the fifth down is extended all the same: its holders count
// by its slots, not by the limit they name.
func TestSemExtendAcrossLimits(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	l, err := c.eng.Acquire(ctx, semStored("s", 3, 1, 10*time.Second))
	if err != nil || l == nil {
		t.Fatalf("permit: %v %v", l, err)
	}
	k := c.mustSemKeys(t, "s")
	for _, f := range c.nodes[:2] {
		f.set(k.base, "2", 10*time.Second) // an RSEMSET to 2 reached these two
	}
	c.nodes[4].setDown(true)
	if v, err := c.eng.Extend(ctx, l, 10*time.Second); v <= 0 || err != nil {
		t.Fatalf("extension with two masters on limit 2, two on 3, one down: %v %v", v, err)
	}
}

// TestSemRollbackAfterLateAcquire: a refused try whose acquire reaches one
// master only after the round gave up on it (held back before it was sent,
// past master_timeout) is rolled back there after that acquire, not
// before it: the rollback follows it on the master's ordered connection,
// and nothing of the try is left (the subset test's "keys left on a slow
// master"). The acquire is held back and the rollback is not, so a fake
// or an engine that let the later request overtake the earlier one leaves
// the try's slot, record and ticket behind every time.
func TestSemRollbackAfterLateAcquire(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "mine"} {
		t.Run("token="+token, func(t *testing.T) {
			c := buildCluster(t, 3, Options{MasterTimeout: 50 * time.Millisecond})
			defer c.close()
			k, _ := c.eng.semKeys("s")
			// Master 0 is full (another holder), master 1 free, master
			// 2's acquires are sent 300 ms late: one yes, one no, one
			// silent, so the try is refused once master 2 timed out.
			c.nodes[0].set(k.base, "1", time.Minute)
			c.nodes[0].set(k.base+":s:0", "other", time.Minute)
			f := c.nodes[2]
			f.mu.Lock()
			f.holdNext = map[string]time.Duration{"sem_acquire": 300 * time.Millisecond}
			f.mu.Unlock()
			before := make([]map[string]string, 3)
			for i, n := range c.nodes {
				before[i] = n.dump()
			}
			l, err := c.eng.Acquire(context.Background(), Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 10 * time.Second, Token: token, Options: SemaphoreOptions{Limit: 1, Count: 1}})
			if l != nil || err != nil {
				t.Fatalf("acquire = %+v, %v; want refused", l, err)
			}
			c.quiesce()
			if f.calls("sem_acquire") != 1 || f.calls("sem_release") != 1 {
				t.Fatalf("master 2 ran %d acquires and %d releases, want 1 and 1", f.calls("sem_acquire"), f.calls("sem_release"))
			}
			// The master-wide fence bounds and the lease high-water mark
			// (which expires) may change; nothing else.
			lag, seq := c.eng.fenceKeys("")
			hwm := c.eng.leaseKey("")
			for i, n := range c.nodes {
				for key, v := range n.dump() {
					if v != before[i][key] && key != lag && key != seq && !(key == hwm && n.m.TTL(key) > 0) {
						t.Errorf("master %d: %q = %s left by the refused try", i, key, v)
					}
				}
			}
		})
	}
}

// TestSemaphoreLeavesAfterItsTicket: a waiter granted while its ticket is
// still on its way to a master (held: the master is known down, and its
// enqueue there waits for an answer) leaves that master's queue after the
// ticket lands, not before it. Its try skips the master; were its
// departure sent after the try alone, it would reach the master before
// the ticket, and the ticket would queue the departed waiter there again:
// a waiter nobody renews, ahead of every later one, that makes the master
// refuse every try until it lapses (with two of five masters paused, a
// master the grants need).
func TestSemaphoreLeavesAfterItsTicket(t *testing.T) {
	t.Parallel()
	// Tries only when told; the held master's requests outlive the test's
	// steps (they time out after 5 s).
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: time.Millisecond, MasterTimeout: 5 * time.Second})
	ctx := context.Background()
	const name = "leaves after its ticket"
	a, err := c.eng.semAcquire(ctx, semReqOn(name, 1, 1, time.Minute))
	if err != nil || a == nil {
		t.Fatalf("the first permit: %v %v", a, err)
	}
	held := c.nodes[4]
	held.hold()
	h := &c.eng.health[4]
	h.mu.Lock()
	h.lateRun, h.probed = skipAfter, time.Now().Add(time.Hour) // known down: fresh tries skip it
	h.mu.Unlock()
	got := c.semWaiter(ctx, name, 1, 1)
	if !eventually(5*time.Second, func() bool {
		for _, f := range c.nodes[:4] {
			if f.calls("fair_ticket") != 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the waiter's ticket did not reach the four live masters")
	}
	if ok, err := c.eng.semRelease(ctx, name, a.Token); !ok || err != nil {
		t.Fatalf("release of the first permit: %v %v", ok, err)
	}
	var b *Lease
	select {
	case r := <-got:
		if r.err != nil || r.l == nil {
			t.Fatalf("the waiter: %+v %v", r.l, r.err)
		}
		b = r.l
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not granted once the first permit was released")
	}
	if ok, err := c.eng.semRelease(ctx, name, b.Token); !ok || err != nil {
		t.Fatalf("release of the waiter's permit: %v %v", ok, err)
	}
	c.settle() // the held master answers, in the order it was sent to
	if q := c.semQueued(held, name); len(q) != 0 {
		t.Fatalf("the master that was held queues %v once every request landed: a waiter that left", q)
	}
}

// TestSemLateGrantKeepsPlace: the first waiter of a semaphore whose try
// lands on the masters only after its round gave up (a grant, then the
// try's rollback) keeps its place ahead of the waiter queued after it:
// the permit goes to the first waiter. A grant that took the waiter out
// of the queue at once would let the second waiter, when it tries first
// after the rollback, be granted first (about 2 runs in 3 of -count=2).
func TestSemLateGrantKeepsPlace(t *testing.T) {
	t.Parallel()
	const name = "late grant"
	c := newCluster(t, 5, Options{RetryDelay: 10 * time.Second, RetryJitter: time.Millisecond})
	ctx := context.Background()
	holder, err := c.eng.semAcquire(ctx, semReqOn(name, 1, 1, time.Minute))
	if err != nil || holder == nil {
		t.Fatalf("holder: %v %v", holder, err)
	}
	queued := func(n int) {
		t.Helper()
		if !eventually(5*time.Second, func() bool {
			for _, f := range c.nodes {
				if len(c.semQueued(f, name)) != n {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("%d waiters are not queued on every master", n)
		}
	}
	first := c.semWaiter(ctx, name, 1, 1)
	queued(1)
	second := c.semWaiter(ctx, name, 1, 1)
	queued(2)
	for _, f := range c.nodes {
		f.mu.Lock()
		f.holdNext = map[string]time.Duration{"sem_acquire": 4 * c.eng.opts.MasterTimeout}
		f.mu.Unlock()
	}
	if ok, err := c.eng.semRelease(ctx, name, holder.Token); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	select {
	case r := <-second:
		t.Fatalf("the second waiter was granted first: %+v %v", r.l, r.err)
	case r := <-first:
		if r.err != nil || r.l == nil {
			t.Fatalf("the first waiter: %+v %v", r.l, r.err)
		}
		// The case the test is about: the late try was rolled back
		// (the holder's release, then the rollback).
		if !eventually(5*time.Second, func() bool { return c.nodes[0].calls("sem_release") >= 2 }) {
			t.Fatalf("no rollback of the late try on master 0 (%d releases)", c.nodes[0].calls("sem_release"))
		}
		if ok, err := c.eng.semRelease(ctx, name, r.l.Token); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("no waiter granted after the release")
	}
	if r := <-second; r.err != nil || r.l == nil {
		t.Fatalf("the second waiter: %+v %v", r.l, r.err)
	}
}

// TestSemGrantedWaiterNotAhead runs sem_acquire on one master, step by
// step, with the queue as the engine leaves it: a queued waiter that was
// granted stays queued until its call's departure lands. Meanwhile it
// holds its permit and waits for none, so it must not count as a waiter
// ahead: a release landing in that gap must let the next waiter in (else
// the waiter the release woke is refused, and the permit waits for a
// retry timer). A grant rolled back (its record deleted) counts as ahead
// again, so the waiter keeps its place; its departure deletes its mark.
func TestSemGrantedWaiterNotAhead(t *testing.T) {
	t.Parallel()
	const name, limit = "granted waiter", 2
	type step struct {
		do    string // acquire, release or leave
		token string // the try's token
		id    string // the waiter's member ("" not queued)
		tick  int
		want  int64 // acquire: 1 granted, 0 refused
	}
	// The semaphore is full (a and b), two waiters queued behind (w1 and
	// w2, both refused), then a releases and w1 is granted.
	full := []step{
		{do: "acquire", token: "a", want: 1},
		{do: "acquire", token: "b", want: 1},
		{do: "acquire", token: "w1-try1", id: "1:w1", tick: 1, want: 0},
		{do: "acquire", token: "w2-try1", id: "1:w2", tick: 2, want: 0},
		{do: "release", token: "a"},
		{do: "acquire", token: "w1-try2", id: "1:w1", tick: 1, want: 1},
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a release before the granted waiter leaves lets the next in", append(full[:len(full):len(full)],
			step{do: "release", token: "b"},
			step{do: "acquire", token: "w2-try2", id: "1:w2", tick: 2, want: 1})},
		{"a grant rolled back keeps the waiter's place", append(full[:len(full):len(full)],
			step{do: "release", token: "w1-try2"},
			step{do: "acquire", token: "w2-try2", id: "1:w2", tick: 2, want: 0},
			step{do: "acquire", token: "w1-try3", id: "1:w1", tick: 1, want: 1})},
		{"a waiter that left counts no more", append(full[:len(full):len(full)],
			step{do: "leave", id: "1:w1"},
			step{do: "release", token: "b"},
			step{do: "acquire", token: "w2-try2", id: "1:w2", tick: 2, want: 1})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, 3, Options{})
			f := c.nodes[0]
			k, err := c.eng.semKeys(name)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i, s := range tc.steps {
				var v any
				switch s.do {
				case "acquire":
					keys := append(k.keys(s.token), k.queue, k.deadlines)
					if s.id != "" {
						keys = append(keys, grantMark(k.queue, s.id))
					}
					v, err = f.Eval(ctx, "sem_acquire", keys, []string{s.token, "60000", strconv.Itoa(limit), "1", "0", "10000", strconv.Itoa(s.tick), s.id})
					if err == nil {
						if a, ok := decodeSem(v); !ok || a.status != s.want {
							t.Fatalf("step %d (%s %s): %v, want status %d", i, s.do, s.token, v, s.want)
						}
					}
				case "release":
					_, err = f.Eval(ctx, "sem_release", k.releaseKeys(s.token), []string{s.token})
				case "leave":
					mark := grantMark(k.queue, s.id)
					_, err = f.Eval(ctx, "fair_dequeue", []string{k.queue, k.deadlines, mark}, []string{s.id, k.channel, "0"})
					if err == nil && f.m.Exists(mark) {
						t.Fatalf("step %d: the mark of %s is left after its departure", i, s.id)
					}
				}
				if err != nil {
					t.Fatalf("step %d (%s %s): %v", i, s.do, s.token, err)
				}
			}
		})
	}
}
