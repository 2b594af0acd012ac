package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// busCluster is one proxy's bus over n fakes, with what it delivered.
type busCluster struct {
	bus   *Bus
	nodes []*fakeNode
	mu    sync.Mutex
	got   []string       // "channel=message"
	raw   map[string]int // raw messages from the masters, by payload
	more  chan struct{}
}

func newBusCluster(t *testing.T, n int) *busCluster {
	t.Helper()
	c := &busCluster{bus: NewBus(), raw: map[string]int{}, more: make(chan struct{}, 100)}
	nodes := make([]quorum.Node, n)
	for i := range n {
		f := newFake(t, fmt.Sprintf("m%d", i), func(ch, msg string) {
			c.bus.Notify(ch, msg)
			c.mu.Lock()
			c.raw[msg]++
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default: // the test is not waiting: it reads raw again
			}
		})
		c.nodes = append(c.nodes, f)
		nodes[i] = f
	}
	eng, err := quorum.New(nodes, quorum.Options{MasterTimeout: testTimeout, Relay: c.bus})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close) // before the fakes close (cleanups run last first)
	c.bus.Receive(func(ch, msg string) int {
		c.mu.Lock()
		c.got = append(c.got, ch+"="+msg)
		c.mu.Unlock()
		return 1
	})
	return c
}

func (c *busCluster) delivered() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

// TestBusOncePerPublication: a publication of another proxy arrives from
// every master and is handed on once; the bus's own publication comes back
// from the masters and is not handed on again; a copy older than the
// window, a malformed one and a release notification are not handed on.
func TestBusOncePerPublication(t *testing.T) {
	c := newBusCluster(t, 3)
	ctx := context.Background()
	c.bus.Listen(ctx, "ch", false)
	c.bus.Listen(ctx, "p*", true)

	// Our own publication: delivered locally by Publish, once.
	n, err := c.bus.Publish(ctx, "ch", "mine")
	if err != nil || n != 1 {
		t.Fatalf("Publish = %d, %v; want 1, nil", n, err)
	}
	// Another proxy's, as each of the 3 masters announces it, twice over
	// (an exact and a pattern subscription of one proxy both match).
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for range 2 {
		for range 3 {
			if !c.bus.Notify("redlock-proxy:pub:pq", "otherid1 "+now+" theirs with spaces") {
				t.Fatal("Notify did not take a bus message")
			}
		}
	}
	old := strconv.FormatInt(time.Now().Add(-busWindow-time.Second).UnixMilli(), 10)
	c.bus.Notify("redlock-proxy:pub:ch", "otherid2 "+old+" stale")
	c.bus.Notify("redlock-proxy:pub:ch", "garbage")
	if c.bus.Notify("redlock-proxy:released:x", "1") {
		t.Fatal("Notify took a release notification")
	}
	// A message sent to the masters directly, as a proxy does: arrives
	// through the fakes' subscriptions. Once every fake delivered it,
	// every fake has delivered the echo of our own publication before it
	// (a fake delivers in order): check that the echo was not repeated.
	last := "otherid3 " + now + " last"
	for _, f := range c.nodes {
		if _, err := f.Eval(ctx, "bus_publish", nil, []string{"redlock-proxy:pub:ch", last}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		n := c.raw[last]
		c.mu.Unlock()
		if n == len(c.nodes) {
			break
		}
		select {
		case <-c.more:
		case <-deadline:
			t.Fatalf("%d of %d masters delivered the last message", n, len(c.nodes))
		}
	}
	want := []string{"ch=mine", "pq=theirs with spaces", "ch=last"}
	got := c.delivered()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}

// TestBusPublishQuorum: a publication that fewer than a quorum of masters
// took is reported (the local subscribers still have it); a minority down
// is not.
func TestBusPublishQuorum(t *testing.T) {
	c := newBusCluster(t, 5)
	ctx := context.Background()
	c.nodes[0].setDown(true)
	c.nodes[1].setDown(true)
	if n, err := c.bus.Publish(ctx, "ch", "a"); err != nil || n != 1 {
		t.Fatalf("2 of 5 down: Publish = %d, %v; want 1, nil", n, err)
	}
	c.nodes[2].setDown(true)
	n, err := c.bus.Publish(ctx, "ch", "b")
	var qe *quorum.QuorumError
	if n != 1 || !errors.As(err, &qe) || qe.Got != 2 || qe.Need != 3 || qe.Op != "publish" {
		t.Fatalf("3 of 5 down: Publish = %d, %v; want 1 and a QuorumError 2 of 3", n, err)
	}
}

// TestBusListenCounts: the masters are subscribed while at least one
// listener of a topic remains, to the reserved channel, and patterns have
// the prefix escaped.
func TestBusListenCounts(t *testing.T) {
	c := newBusCluster(t, 3)
	ctx := context.Background()
	subs := func() string {
		f := c.nodes[0]
		f.mu.Lock()
		defer f.mu.Unlock()
		return fmt.Sprint(f.subs, f.psubs)
	}
	c.bus.Listen(ctx, "ch", false)
	c.bus.Listen(ctx, "ch", false)
	c.bus.Listen(ctx, "a*", true)
	if got, want := subs(), `map[redlock-proxy:pub:ch:true] map[redlock-proxy:pub:a*:true]`; got != want {
		t.Fatalf("subscriptions %s, want %s", got, want)
	}
	c.bus.Unlisten("ch", false)
	c.bus.Unlisten("a*", true)
	if got, want := subs(), `map[redlock-proxy:pub:ch:true] map[]`; got != want {
		t.Fatalf("after one Unlisten each: %s, want %s", got, want)
	}
	c.bus.Unlisten("ch", false)
	c.bus.Unlisten("ch", false) // one too many: ignored
	if got, want := subs(), `map[] map[]`; got != want {
		t.Fatalf("after the last Unlisten: %s, want %s", got, want)
	}
	if got := globEscape(`a*b?c[d]e\f`); got != `a\*b\?c\[d\]e\\f` {
		t.Fatalf("globEscape = %s", got)
	}
}

// TestBusRememberBounded: ids are forgotten once expired, and never more
// than maxSeen are kept.
func TestBusRememberBounded(t *testing.T) {
	b := NewBus()
	t0 := time.Now()
	for i := range maxSeen + 10 {
		b.remember(strconv.Itoa(i), t0, t0)
	}
	if len(b.seen) != maxSeen || len(b.order)-b.head != maxSeen {
		t.Fatalf("%d ids kept (%d in order), want %d", len(b.seen), len(b.order)-b.head, maxSeen)
	}
	if _, ok := b.seen["0"]; ok {
		t.Fatal("the oldest id was kept")
	}
	b.remember("late", t0.Add(busWindow), t0)
	if len(b.seen) != 1 {
		t.Fatalf("%d ids kept after the window, want 1", len(b.seen))
	}
}

// TestBusHandsOnInOrderSeen: two masters' readers notify two messages at
// once; the one whose id was seen first is handed on first even when its
// reader is held up inside the hand-on (as a preempted goroutine would
// be). Without the ordering, the second reader's hand-on overtakes it.
func TestBusHandsOnInOrderSeen(t *testing.T) {
	b := NewBus()
	b.Attach(nil, 1, "meta:", time.Second)
	var mu sync.Mutex
	var order []string
	entered, release := make(chan struct{}), make(chan struct{})
	b.Receive(func(ch, msg string) int {
		if msg == "first" {
			close(entered)
			<-release
		}
		mu.Lock()
		order = append(order, msg)
		mu.Unlock()
		return 1
	})
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	firstDone, secondDone := make(chan struct{}), make(chan struct{})
	go func() { b.Notify("meta:pub:c", "id1 "+now+" first"); close(firstDone) }()
	<-entered
	go func() { b.Notify("meta:pub:c", "id2 "+now+" second"); close(secondDone) }()
	// The second hand-on must wait for the first: give a wrong
	// implementation the time to overtake before the first goes on.
	select {
	case <-secondDone:
		t.Error("the second message was handed on while the first was still being handed on")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-firstDone
	<-secondDone
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "first" || order[1] != "second" {
		t.Fatalf("handed on %q, want [first second]", order)
	}
}

// TestBusHandOnWaitsWithoutTheBusLock: a hand-on waiting for its turn
// holds no lock of the bus. The proxy's receiver takes its pub/sub lock,
// under which client tracking calls into the bus (WatchKeys): had a
// waiting hand-on held the bus's lock, a receiver blocked on the pub/sub
// lock, its holder blocked on the bus's lock and the waiting hand-on would
// wait for each other forever.
func TestBusHandOnWaitsWithoutTheBusLock(t *testing.T) {
	b := NewBus()
	b.Attach(nil, 1, "meta:", time.Second)
	var hub sync.Mutex // the proxy's pub/sub lock
	entered := make(chan struct{}, 2)
	recv := func(ch, msg string) int {
		entered <- struct{}{}
		hub.Lock()
		defer hub.Unlock()
		return 1
	}
	b.Receive(recv)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	hub.Lock()
	done := make(chan struct{}, 2)
	go func() { b.Notify("meta:pub:c", "id1 "+now+" first"); done <- struct{}{} }()
	<-entered // the first hand-on waits for the pub/sub lock
	go func() { b.Notify("meta:pub:c", "id2 "+now+" second"); done <- struct{}{} }()
	// The second hand-on has taken its ticket (under the bus's lock) and
	// goes on to wait for its turn: seen with the bus's lock free. Had it
	// kept the lock while waiting, TryLock would never succeed.
	for deadline := time.Now().Add(2 * time.Second); ; {
		if b.mu.TryLock() {
			n := b.tickets
			b.mu.Unlock()
			if n == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the second hand-on never took its ticket with the bus's lock free")
		}
		time.Sleep(time.Millisecond)
	}
	watched := make(chan struct{})
	go func() { b.WatchKeys(true); close(watched) }() // under the pub/sub lock, as tracking does
	select {
	case <-watched:
	case <-time.After(2 * time.Second):
		t.Fatal("the bus's lock is held by a hand-on waiting for its turn: deadlock")
	}
	hub.Unlock()
	for range 2 {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("a hand-on never returned")
		}
	}
}

// TestBusChainOrder: one publisher's messages on one channel are handed
// on in the order published whichever masters bring them first: a
// message whose previous one has not come is held until it does, or for
// holdBack, then handed on past the gap; one that comes after a later
// one was handed on is dropped, not handed on out of order. Without the
// chain, "m3" (brought first by a master that missed "m2") goes before
// "m2".
func TestBusChainOrder(t *testing.T) {
	b := NewBus()
	b.Attach(nil, 1, "meta:", 25*time.Millisecond)
	var mu sync.Mutex
	var got []string
	b.Receive(func(ch, msg string) int {
		mu.Lock()
		got = append(got, msg)
		mu.Unlock()
		return 1
	})
	delivered := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	const base = "0123456789ab"
	send := func(id, msg string) { b.Notify("meta:pub:c", base+id+" "+now+" "+msg) }
	send("1", "m1")
	send("3.2", "m3") // its master missed m2
	if d := delivered(); !slices.Equal(d, []string{"m1"}) {
		t.Fatalf("handed on %q before m2 came, want [m1]", d)
	}
	send("2.1", "m2")
	send("3.2", "m3") // the other masters' copies
	send("2.1", "m2")
	if d := delivered(); !slices.Equal(d, []string{"m1", "m2", "m3"}) {
		t.Fatalf("handed on %q, want [m1 m2 m3]", d)
	}
	// m4 never comes: m5 goes on after holdBack.
	t0 := time.Now()
	send("5.4", "m5")
	for !slices.Equal(delivered(), []string{"m1", "m2", "m3", "m5"}) {
		if time.Since(t0) > 5*time.Second {
			t.Fatalf("m5 was never handed on past the gap: %q", delivered())
		}
		time.Sleep(time.Millisecond)
	}
	if d := time.Since(t0); d < b.holdBack() {
		t.Fatalf("m5 went on after %v, before holdBack %v", d, b.holdBack())
	}
	// m4 after all: too late to go in order.
	send("4.3", "m4")
	if d := delivered(); len(d) != 4 || b.Dropped() != 1 {
		t.Fatalf("a message older than one handed on: handed on %q, %d dropped", d, b.Dropped())
	}
	// Another channel is another stream; an id without a chain goes at once.
	b.Notify("meta:pub:other", base+"6.4 "+now+" o6")
	b.Notify("meta:pub:c", "plainid "+now+" plain")
	if d := delivered(); !slices.Equal(d[4:], []string{"o6", "plain"}) {
		t.Fatalf("handed on %q, want o6 and plain at once", d[4:])
	}
}

// TestBusPublishChains: a proxy's publications on one channel name the
// one before them; the first on a channel names none.
func TestBusPublishChains(t *testing.T) {
	c := newBusCluster(t, 3)
	ctx := context.Background()
	var ids []string
	for _, ch := range []string{"a", "a", "b", "a"} {
		if _, err := c.bus.Publish(ctx, ch, "x"); err != nil {
			t.Fatal(err)
		}
		c.bus.mu.Lock()
		ids = append(ids, c.bus.order[len(c.bus.order)-1].id)
		c.bus.mu.Unlock()
	}
	var chain [][2]uint64
	for _, id := range ids {
		_, seq, prev, ok := parseID(id)
		if !ok {
			t.Fatalf("id %q does not parse", id)
		}
		chain = append(chain, [2]uint64{seq, prev})
	}
	want := [][2]uint64{{1, 0}, {2, 1}, {3, 0}, {4, 2}}
	if !slices.Equal(chain, want) {
		t.Fatalf("(sequence, previous) %v, want %v", chain, want)
	}
}
