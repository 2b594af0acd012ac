package quorum

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// testClock is a Clock the test drives: its time moves only in Advance,
// which fires the timers that fall due, in the order of their due times.
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*testTimer
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

type testTimer struct {
	clk   *testClock
	at    time.Time
	armed bool
	ch    chan time.Time // nil for AfterFunc's
	f     func()
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) NewTimer(d time.Duration) Timer {
	t := &testTimer{clk: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

func (c *testClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &testTimer{clk: c, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock d forward, firing each timer due by then at its
// due time.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *testTimer
		for _, t := range c.timers {
			if t.armed && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.fire(next)
	}
	c.now = end
	c.mu.Unlock()
}

// fire fires t; c.mu is held.
func (c *testClock) fire(t *testTimer) {
	t.armed = false
	c.timers = slices.DeleteFunc(c.timers, func(x *testTimer) bool { return x == t })
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- c.now:
	default:
	}
}

func (t *testTimer) C() <-chan time.Time { return t.ch }

func (t *testTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.armed
	t.armed = false
	c.timers = slices.DeleteFunc(c.timers, func(x *testTimer) bool { return x == t })
	return was
}

func (t *testTimer) Reset(d time.Duration) bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.armed
	if !was {
		c.timers = append(c.timers, t)
	}
	t.at, t.armed = c.now.Add(d), true
	if d <= 0 {
		c.fire(t)
	}
	return was
}

// TestQuarantineEndsOnTheClock: a restarted master's quarantine is
// measured on the engine's clock, exactly: a millisecond before its end it
// still does not vote, and it rejoins when the clock reaches the end,
// with no health tick in between (the interval is an hour).
func TestQuarantineEndsOnTheClock(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	c := newCluster(t, 3, Options{HealthInterval: time.Hour, Quarantine: 10 * time.Second, Clock: clk})
	c.nodes[1].restart()
	// The next answer from the restarted master reveals the restart.
	if _, err := c.eng.Info(context.Background(), Lock, "x"); err != nil {
		t.Fatal(err)
	}
	// Its quarantine is sized by the grants live on the others (none:
	// the shortest there is), on the clock that does not move meanwhile.
	h := &c.eng.health[1]
	if !eventually(time.Second, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.sized }) {
		t.Fatalf("quarantine not sized: %+v", c.eng.nodeStatus()[1])
	}
	left := c.eng.nodeStatus()[1].QuarantineLeft
	if left <= time.Millisecond {
		t.Fatalf("quarantine left %v", left)
	}
	clk.Advance(left - time.Millisecond)
	if st := c.eng.nodeStatus()[1]; st.State != StateQuarantined || st.QuarantineLeft != time.Millisecond {
		t.Fatalf("a millisecond before the end: %+v, want quarantined with 1ms left", st)
	}
	clk.Advance(time.Millisecond)
	if !eventually(time.Second, func() bool { return c.eng.nodeStatus()[1].State == StateUp }) {
		t.Fatalf("not rejoined at the end of its quarantine: %+v", c.eng.nodeStatus()[1])
	}
}
