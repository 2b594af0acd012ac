package quorum

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Wakeups routes release notifications from the masters to the waiters of
// this process. Nodes call Notify for every message on a release channel;
// the engine subscribes the nodes to a channel while at least one local
// waiter needs it, and unsubscribes when the last one leaves.
type Wakeups struct {
	mu      sync.Mutex
	waiters map[string]map[*watch]struct{}
	seq     uint64               // arrival order of watches
	seen    map[string]time.Time // counted releases already routed, by id
	pruned  time.Time            // when seen was last pruned
}

// NewWakeups returns an empty router.
func NewWakeups() *Wakeups {
	return &Wakeups{waiters: make(map[string]map[*watch]struct{}), seen: make(map[string]time.Time)}
}

// seenFor is how long a counted release's id is remembered: every master
// announces the same release, and only the first announcement wakes.
const seenFor = 2 * time.Second

// Notify routes one message on channel. A lock release ("1") wakes every
// local waiter of channel. A hand-off ("h:<token>", from a resource with
// fair waiters) wakes the plain waiters and, of the fair waiters, only
// the one queued with token: the head of the queue, wherever it waits.
// A counted release ("<k>:<id>", from semaphores) wakes the k first local
// waiters not already woken, once per id however many masters announce
// it: first by rank (a semaphore waiter's ticket, its place on the
// masters), then longest-waiting. It never blocks.
func (w *Wakeups) Notify(channel, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.waiters[channel]
	for wt := range set {
		if wt.all {
			wt.wake()
		}
	}
	k, id, counted := strings.Cut(message, ":")
	if k == "h" && counted {
		for wt := range set {
			switch wt.fair {
			case "":
				wt.wake()
			case id:
				wt.heard++
				wt.wake()
			}
		}
		return
	}
	if !counted {
		for wt := range set {
			wt.heard = wt.need
			wt.wake()
		}
		return
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 1 {
		return
	}
	now := time.Now() // shared by the engines of a process: the system clock
	if now.Sub(w.pruned) > seenFor {
		for old, at := range w.seen {
			if now.Sub(at) > seenFor {
				delete(w.seen, old)
			}
		}
		w.pruned = now
	}
	if _, dup := w.seen[id]; dup {
		return
	}
	w.seen[id] = now
	order := make([]*watch, 0, len(set))
	for wt := range set {
		order = append(order, wt)
	}
	slices.SortFunc(order, func(a, b *watch) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq)) })
	for _, wt := range order {
		if n == 0 {
			break
		}
		if wt.wake() {
			n--
		}
	}
}

// watch is one waiter's interest in a set of channels.
type watch struct {
	w        *Wakeups
	clock    Clock // the engine's, for its sleeps
	channels []string
	nodes    []Node
	seq      uint64
	// rank orders the waiters a counted release wakes, before seq: a
	// semaphore waiter's ticket (see setRank). Under w.mu.
	rank uint64
	fair string // a fair waiter's token; "" for others
	all  bool   // woken by every message (an election's observer)
	// A fair waiter tries once need masters announced its hand-off (a
	// quorum: the release is through), or handOffGrace after the first
	// announcement; heard counts them. Both under w.mu.
	need, heard int
	c           chan struct{}
}

// wake signals the waiter; false if it was signalled already.
func (wt *watch) wake() bool {
	select {
	case wt.c <- struct{}{}:
		return true
	default:
		return false
	}
}

func (w *Wakeups) watch(channels []string, nodes []Node, fair string, need int, clock Clock) *watch {
	return w.add(&watch{w: w, clock: clock, channels: channels, nodes: nodes, fair: fair, need: need, c: make(chan struct{}, 1)})
}

// watchAll is a watch woken by every message on channels (an election's
// observers: announcements and resignations alike).
func (w *Wakeups) watchAll(channels []string, nodes []Node, clock Clock) *watch {
	return w.add(&watch{w: w, clock: clock, channels: channels, nodes: nodes, all: true, c: make(chan struct{}, 1)})
}

// add registers wt on its channels, subscribing the nodes to a channel
// its first watch needs.
func (w *Wakeups) add(wt *watch) *watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	wt.seq = w.seq
	for _, ch := range wt.channels {
		set := w.waiters[ch]
		if set == nil {
			set = make(map[*watch]struct{})
			w.waiters[ch] = set
			for _, nd := range wt.nodes {
				nd.Subscribe(ch)
			}
		}
		set[wt] = struct{}{}
	}
	return wt
}

// ready waits, at most timeout, until enough of the nodes (all of them
// when enough is 0) confirm the subscriptions. Masters that do not confirm
// in time are not waited for: the retry timer still bounds the wait. A
// waiter needs a quorum: a release that deleted on a quorum was announced
// by at least one master of any other quorum, and waiting for every
// master would let a paused one hold every first wait for the whole
// timeout.
func (wt *watch) ready(ctx context.Context, timeout time.Duration, enough int) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if enough <= 0 || enough > len(wt.nodes) {
		enough = len(wt.nodes)
	}
	confirmed := make(chan bool, len(wt.nodes))
	for _, nd := range wt.nodes {
		go func() {
			for _, ch := range wt.channels {
				if nd.Subscribed(ctx, ch) != nil {
					confirmed <- false
					return
				}
			}
			confirmed <- true
		}()
	}
	for range wt.nodes {
		if <-confirmed {
			if enough--; enough == 0 {
				return
			}
		}
	}
}

// wakeJitter spreads the retries of waiters woken by the same release, so
// that the first usually completes its round before the others start
// instead of all of them splitting the masters' votes.
const wakeJitter = 2 * time.Millisecond

// sleep waits for a notification (plus up to wakeJitter), d, or ctx,
// whichever comes first.
func (wt *watch) sleep(ctx context.Context, d time.Duration) error {
	t := wt.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-wt.c:
		if wt.fair != "" {
			// Woken alone: no one to spread from, but wait for the
			// release to be through on a quorum before trying.
			return wt.gather(ctx)
		}
		t.Reset(time.Duration(rand.Int64N(int64(wakeJitter))))
		select {
		case <-t.C():
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handOffGrace is how long a fair waiter woken by the first announcement
// of its hand-off waits for a quorum of them: a master whose announcement
// is lost (its subscription is being restored) does not hold it up longer.
const handOffGrace = 5 * time.Millisecond

// gather waits, after a first hand-off announcement, until a quorum of
// masters announced it or handOffGrace passed, so that the try does not
// reach masters before the release did and get refused there.
func (wt *watch) gather(ctx context.Context) error {
	t := wt.clock.NewTimer(handOffGrace)
	defer t.Stop()
	defer func() {
		wt.w.mu.Lock()
		wt.heard = 0
		wt.w.mu.Unlock()
	}()
	for {
		wt.w.mu.Lock()
		enough := wt.heard >= wt.need
		wt.w.mu.Unlock()
		if enough {
			return nil
		}
		select {
		case <-wt.c:
		case <-t.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setRank sets the waiter's rank.
func (wt *watch) setRank(r uint64) {
	wt.w.mu.Lock()
	wt.rank = r
	wt.w.mu.Unlock()
}

func (wt *watch) close() {
	w := wt.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range wt.channels {
		set := w.waiters[ch]
		delete(set, wt)
		if len(set) == 0 {
			delete(w.waiters, ch)
			for _, nd := range wt.nodes {
				nd.Unsubscribe(ch)
			}
		}
	}
}

// step is what a try of a blocking primitive tells retry.
type step int

const (
	// stepFinal: retrying cannot change the outcome (granted, bad request,
	// the caller left).
	stepFinal step = iota
	// stepWait: held by others, or no quorum; wait for a release or the
	// retry delay.
	stepWait
)

// retry runs try until it reports a final outcome or wait runs out, and
// returns the last outcome. Between tries it sleeps for the retry delay
// (RetryDelay +- RetryJitter), woken early by a release notification on
// any of channels through any proxy. Every blocking primitive waits
// through it.
//
// A try that is not final and runs out of wait is returned as it is (not
// granted, or no quorum on the last try).
//
// fair, if not "", makes the waiter a fair-lock waiter queued with that
// token: a hand-off wakes it only when it is the head of the queue, and it
// retries at once, without jitter. rank, if not nil, is read after every
// try and orders the waiters a counted release wakes (Notify).
func retry[T any](e *Engine, ctx context.Context, wait time.Duration, channels []string, fair string, rank func() uint64, try func() (T, step, error)) (T, error) {
	deadline := e.now().Add(wait)
	var w *watch
	var counted *waitCount
	defer func() {
		if w != nil {
			w.close()
		}
		if counted != nil {
			counted.leave(ctx)
		}
	}()
	for {
		v, st, err := try()
		if st == stepFinal {
			return v, err
		}
		if cerr := ctx.Err(); cerr != nil {
			var zero T
			return zero, cerr
		}
		if !e.now().Before(deadline) {
			return v, err
		}
		if w == nil {
			// Subscribe before the next try, so that a release between the
			// failed try and the subscription is not missed: the next try
			// runs at once and sees it.
			w = e.wake.watch(channels, e.nodes, fair, e.quorum, e.clock)
			if rank != nil {
				w.setRank(rank())
			}
			w.ready(ctx, e.opts.MasterTimeout, e.quorum)
			continue
		}
		if rank != nil {
			w.setRank(rank())
		}
		if err := w.sleep(ctx, min(e.retryDelay(), e.until(deadline))); err != nil {
			var zero T
			return zero, err
		}
		// A call counts itself among the waiters once it has slept
		// once without a grant: the many short waits of a contended
		// resource, over at their first wake-up, cost the masters
		// nothing (see docs/design/waiters.md).
		if counted == nil {
			counted = e.countWait(ctx, channels, deadline)
		} else {
			counted.refresh(ctx)
		}
	}
}

// attemptFunc is one try of an acquisition with token: the grant and its
// rollback (for a caller that left meanwhile), or nil with why not (nil:
// refused by a quorum). tainted and fixed are as in attempt.
type attemptFunc func(token string, tainted *taints, fixed bool) (*Lease, func(), error)

// waiting is what a primitive adds to the acquire loop: its wake-up
// channels, a fair waiter's id, a semaphore waiter's rank among the
// local waiters (its ticket), and hooks run when a try is refused (the
// queue takes a place) or a grant is given back because the caller left.
type waiting struct {
	channels []string
	fair     string
	rank     func() uint64
	refused  func(err error) error
	gaveBack func()
}

// acquireLoop is the one acquire loop of every primitive: it tries with
// the caller's token, or a fresh one per try; a grant is final, given back
// if the caller left meanwhile; a bad request or any error but no quorum
// is final; a refusal or no quorum waits in retry (release notification
// or jittered timer, hang-up, WAIT deadline) and tries again. The votes of
// masters whose rollback of an earlier try with the same token was not
// acknowledged yet never count (tainted).
func (e *Engine) acquireLoop(ctx context.Context, req Request, w waiting, try attemptFunc) (*Lease, error) {
	fixed := req.Token != ""
	tainted := newTaints(len(e.nodes))
	if fixed {
		e.inheritTaints(req.Token, tainted)
		defer e.leaveTaints(req.Token, tainted)
	}
	return retry(e, ctx, req.Wait, w.channels, w.fair, w.rank, func() (*Lease, step, error) {
		token := req.Token
		if !fixed {
			token = NewToken()
		}
		tainted.refresh()
		lease, rb, err := try(token, tainted, fixed)
		switch {
		case lease != nil && ctx.Err() != nil:
			// The caller left while we were granting: hold nothing.
			rb()
			if w.gaveBack != nil {
				w.gaveBack()
			}
			return nil, stepFinal, ctx.Err()
		case lease != nil, err != nil && !errors.Is(err, ErrNoQuorum):
			return lease, stepFinal, err
		}
		if w.refused != nil {
			err = w.refused(err)
		}
		return nil, stepWait, err
	})
}
