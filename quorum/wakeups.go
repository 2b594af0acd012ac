package quorum

import (
	"cmp"
	"context"
	"maps"
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
	seq     uint64             // arrival order of watches
	seen    map[string]*routed // counted releases already routed, by id
	pruned  time.Time          // when seen was last pruned
	rnd     *entropy           // nil: unseeded (tests seed it)
}

// routed is what a counted release did here: when it was first
// announced, the watches it woke, and how many more it may wake.
type routed struct {
	at    time.Time
	woken []*watch
	left  int
}

// NewWakeups returns an empty router.
func NewWakeups() *Wakeups {
	return &Wakeups{waiters: make(map[string]map[*watch]struct{}), seen: make(map[string]*routed)}
}

// seenFor is how long a counted release's id is remembered: every master
// announces the same release, and it wakes no more waiters however many
// of them do.
const seenFor = 2 * time.Second

// Notify routes one message on channel. A lock release ("1") wakes every
// local waiter of channel. A hand-off ("h:<token>", from a resource with
// fair waiters) wakes the plain waiters and, of the fair waiters, only
// the one queued with token: the head of the queue, wherever it waits.
// A counted release ("<k>:<id>", from semaphores) wakes at most k local
// waiters however many masters announce it: first by rank (a semaphore
// waiter's ticket, its place on the masters), then longest-waiting, of
// those not already woken (one that is takes none of the k). Each later
// announcement of it wakes again the waiters it woke: a woken waiter
// tries at once, and may reach a master before the release does there
// and be refused; that master announces the release after, and the
// waiter tries again rather than wait out its retry timer. It never
// blocks.
func (w *Wakeups) Notify(channel, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.waiters[channel]
	// In arrival order, not the map's: waiters woken together run in the
	// order they are woken, and a simulated run must replay exactly.
	inOrder := slices.SortedFunc(maps.Keys(set), func(a, b *watch) int { return cmp.Compare(a.seq, b.seq) })
	for _, wt := range inOrder {
		if wt.all {
			wt.wake()
		}
	}
	k, id, counted := strings.Cut(message, ":")
	if k == "h" && counted {
		for _, wt := range inOrder {
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
		for _, wt := range inOrder {
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
		for old, rt := range w.seen {
			if now.Sub(rt.at) > seenFor {
				delete(w.seen, old)
			}
		}
		w.pruned = now
	}
	rt := w.seen[id]
	if rt == nil {
		rt = &routed{at: now, left: n}
		w.seen[id] = rt
	}
	for _, wt := range rt.woken {
		if _, waits := set[wt]; waits {
			wt.wake()
		}
	}
	if rt.left == 0 {
		return
	}
	order := make([]*watch, 0, len(set))
	for _, wt := range inOrder {
		if !slices.Contains(rt.woken, wt) {
			order = append(order, wt)
		}
	}
	slices.SortFunc(order, func(a, b *watch) int { return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq)) })
	for _, wt := range order {
		if rt.left == 0 {
			break
		}
		if wt.wake() {
			rt.left--
			rt.woken = append(rt.woken, wt)
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
		t.Reset(time.Duration(wt.w.rnd.int64N(int64(wakeJitter))))
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
