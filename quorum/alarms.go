package quorum

import (
	"container/heap"
	"sync"
	"time"
)

// alarms runs functions at given times on the engine's clock with one
// timer for all of them. Each round's deadline (the masters still silent
// then answer with a timeout) and each count's are alarms: a round whose
// masters all answer in time cancels its alarms and never creates,
// resets or fires a timer of its own. The timer is armed for the earliest
// alarm; a cancelled alarm leaves it armed, and when it fires early it
// only re-arms for the next one. Since most alarms are set a fixed
// timeout after they are made, a new one is rarely the earliest: in the
// common case the timer is reset about once per master_timeout, whatever
// the rate of rounds.
type alarms struct {
	clock Clock

	mu    sync.Mutex
	q     alarmHeap
	seq   uint64
	timer Timer     // nil until the first alarm
	armed time.Time // when timer fires; zero when it is not armed
}

// alarm is one function due at a time.
type alarm struct {
	at  time.Time
	seq uint64 // order of alarms due at the same time: the order they were set
	f   func()
	i   int // index in the queue; -1 once fired or cancelled
}

func newAlarms(c Clock) *alarms { return &alarms{clock: c} }

// set runs f at time at (at once, on another goroutine, if at has passed)
// unless the alarm is cancelled first. f runs on the timer's goroutine and
// must not block.
func (a *alarms) set(at time.Time, f func()) *alarm {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	al := &alarm{at: at, seq: a.seq, f: f}
	heap.Push(&a.q, al)
	if a.armed.IsZero() || at.Before(a.armed) {
		a.arm(at)
	}
	return al
}

// cancel keeps al from running, if it has not run yet. It may be called
// more than once, and with nil.
func (a *alarms) cancel(al *alarm) {
	if al == nil {
		return
	}
	a.mu.Lock()
	if al.i >= 0 {
		heap.Remove(&a.q, al.i)
	}
	a.mu.Unlock()
}

// arm sets the timer to fire at at; a.mu is held.
func (a *alarms) arm(at time.Time) {
	d := at.Sub(a.clock.Now())
	if a.timer == nil {
		a.timer = a.clock.AfterFunc(d, a.fire)
	} else {
		a.timer.Reset(d)
	}
	a.armed = at
}

// fire runs every alarm that is due, in the order of their times, then
// arms the timer for the next one.
func (a *alarms) fire() {
	a.mu.Lock()
	now := a.clock.Now()
	var due []*alarm
	for len(a.q) > 0 && !a.q[0].at.After(now) {
		due = append(due, heap.Pop(&a.q).(*alarm))
	}
	a.armed = time.Time{}
	if len(a.q) > 0 {
		a.arm(a.q[0].at)
	}
	a.mu.Unlock()
	for _, al := range due {
		al.f()
	}
}

// alarmHeap orders alarms by time, then by the order they were set.
type alarmHeap []*alarm

func (h alarmHeap) Len() int { return len(h) }
func (h alarmHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h alarmHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}
func (h *alarmHeap) Push(x any) {
	al := x.(*alarm)
	al.i = len(*h)
	*h = append(*h, al)
}
func (h *alarmHeap) Pop() any {
	old := *h
	al := old[len(old)-1]
	old[len(old)-1] = nil
	al.i = -1
	*h = old[:len(old)-1]
	return al
}
