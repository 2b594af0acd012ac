package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestGrantRule: a grant needs a quorum of yes; a refusal needs a quorum
// of answers and waits for every master that could still make the yes a
// quorum, except those that were down when the count began (stalled).
func TestGrantRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                              string
		yes, no, failed, pending, stalled int
		final                             bool
		want                              verdict
	}{
		{"quorum of yes", 3, 0, 0, 2, 0, false, decidedYes},
		{"quorum of yes, the rest stalled", 3, 0, 0, 2, 2, false, decidedYes},
		{"split, two live pending", 2, 1, 0, 2, 0, false, undecided},
		{"split, two stalled pending", 2, 1, 0, 2, 2, false, decidedNo},
		{"split, one live and one stalled pending", 2, 1, 0, 2, 1, false, undecided},
		{"two no, one live pending", 1, 2, 0, 2, 1, false, decidedNo},
		{"fewer than a quorum answered, stalled pending", 1, 1, 0, 3, 3, false, undecided},
		{"fewer than a quorum answered, final", 1, 1, 3, 0, 0, true, noQuorum},
		{"a quorum answered, final", 2, 1, 2, 0, 0, true, decidedNo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ty := &tally{yes: tc.yes, no: tc.no, failed: tc.failed, pending: tc.pending, stalled: tc.stalled}
			if got := grantRule(3, 5, ty, tc.final); got != tc.want {
				t.Fatalf("grantRule = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDownAfterSlowOrFailed: a master counts as down (its pending answers
// stalled, its fresh requests skipped but for probes) after a timed-out
// request, and after an answer slower than master_timeout, not after a
// failure that came at once; an answer in time brings it back; a caller
// that left says nothing about the master.
func TestDownAfterSlowOrFailed(t *testing.T) {
	t.Parallel()
	timeout := fmt.Errorf("no answer in 50ms: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		seq  []func(h *nodeHealth)
		want bool
	}{
		{"never asked", nil, false},
		{"answered in time", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Now(), time.Millisecond, nil, false, 0) }}, false},
		{"failed at once", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Now(), time.Millisecond, errors.New("refused"), false, 0) }}, false},
		{"timed out", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Now(), 50*time.Millisecond, timeout, false, 0) }}, true},
		{"answered late", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Now(), 300*time.Millisecond, nil, true, 0) }}, true},
		{"late, then in time", []func(h *nodeHealth){
			func(h *nodeHealth) { h.record(time.Now(), 300*time.Millisecond, nil, true, 0) },
			func(h *nodeHealth) { h.record(time.Now(), time.Millisecond, nil, false, 0) },
		}, false},
		{"timed out, then the caller left", []func(h *nodeHealth){
			func(h *nodeHealth) { h.record(time.Now(), 50*time.Millisecond, timeout, false, 0) },
			func(h *nodeHealth) { h.record(time.Now(), time.Millisecond, context.Canceled, false, 0) },
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{clock: systemClock{}, nodes: make([]Node, 1), health: make([]nodeHealth, 1)}
			for _, f := range tc.seq {
				f(&e.health[0])
			}
			if got := e.downAt()[0]; got != tc.want {
				t.Fatalf("down = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSkipDownProbes: fresh requests go to a master that is up, and to one
// with fewer than skipAfter late answers in a row; to one with more, one
// probe per master_timeout goes through and the others are skipped; once
// it answers in time, every request goes again.
func TestSkipDownProbes(t *testing.T) {
	t.Parallel()
	e := &Engine{clock: systemClock{}, nodes: make([]Node, 1), health: make([]nodeHealth, 1), opts: Options{MasterTimeout: 50 * time.Millisecond}}
	h := &e.health[0]
	if e.skipDown(0) {
		t.Fatal("skipped a master never asked")
	}
	for k := range skipAfter {
		if e.skipDown(0) {
			t.Fatalf("skipped after %d late answers in a row, want %d first", k, skipAfter)
		}
		h.record(time.Now(), 50*time.Millisecond, fmt.Errorf("no answer: %w", context.DeadlineExceeded), false, 0)
	}
	if e.skipDown(0) {
		t.Fatal("the first request to a down master is a probe: not skipped")
	}
	if !e.skipDown(0) {
		t.Fatal("a second request within master_timeout of the probe was not skipped")
	}
	h.mu.Lock()
	h.probed = h.probed.Add(-e.opts.MasterTimeout)
	h.mu.Unlock()
	if e.skipDown(0) {
		t.Fatal("no probe a master_timeout after the last one")
	}
	h.record(time.Now(), time.Millisecond, nil, false, 0)
	for range 3 {
		if e.skipDown(0) {
			t.Fatal("skipped a master that answered in time")
		}
	}
}

// TestSkipSetAsksAQuorum: however many masters skipDown would skip, a
// fresh round skips at most N - quorum of them, those with the longest
// late runs, so that skipping alone never loses the quorum.
func TestSkipSetAsksAQuorum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		late []int // each master's late run; >= skipAfter with a probe just sent: skipDown skips it
		want []bool
	}{
		{"none late", []int{0, 0, 0, 0, 0}, []bool{false, false, false, false, false}},
		{"one late", []int{0, 4, 0, 0, 0}, []bool{false, true, false, false, false}},
		{"two late", []int{5, 0, 0, 3, 0}, []bool{true, false, false, true, false}},
		{"three late: the longest two", []int{3, 9, 0, 7, 0}, []bool{false, true, false, true, false}},
		{"every master late (a stalled proxy)", []int{3, 3, 4, 3, 3}, []bool{true, false, true, false, false}},
		{"under skipAfter", []int{2, 2, 2, 2, 2}, []bool{false, false, false, false, false}},
		{"three masters, all late", []int{3, 3, 3}, []bool{true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.late)
			e := &Engine{clock: systemClock{}, nodes: make([]Node, n), health: make([]nodeHealth, n), quorum: n/2 + 1, opts: Options{MasterTimeout: 50 * time.Millisecond}}
			for i, l := range tc.late {
				e.health[i].lateRun, e.health[i].probed = l, time.Now()
			}
			if got := e.skipSet(); !slices.Equal(got, tc.want) {
				t.Fatalf("skipSet = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLateRunCountsWindows: the requests one stall kept waiting time out
// together and count as one late answer; late answers in separate
// master_timeout windows count one each.
func TestLateRunCountsWindows(t *testing.T) {
	t.Parallel()
	const window = 50 * time.Millisecond
	var h nodeHealth
	timeout := fmt.Errorf("no answer: %w", context.DeadlineExceeded)
	for range 50 {
		h.record(time.Now(), window, timeout, false, window)
	}
	if h.lateRun != 1 {
		t.Fatalf("50 timeouts in one window: late run %d, want 1", h.lateRun)
	}
	for want := 2; want <= skipAfter; want++ {
		h.lateAt = h.lateAt.Add(-window)
		h.record(time.Now(), window, timeout, false, window)
		if h.lateRun != want {
			t.Fatalf("a timeout in a new window: late run %d, want %d", h.lateRun, want)
		}
	}
	h.record(time.Now(), time.Millisecond, nil, false, window)
	if h.lateRun != 0 {
		t.Fatalf("an answer in time: late run %d, want 0", h.lateRun)
	}
}

// TestStalledProxyKeepsQuorum: every master up, but each with a run of
// late answers behind it and its probe just taken by another round (a
// proxy that stalled under load): a new lock is still asked of a quorum
// and granted, not answered NOQUORUM.
func TestStalledProxyKeepsQuorum(t *testing.T) {
	t.Parallel()
	c := buildCluster(t, 5, Options{MasterTimeout: 50 * time.Millisecond})
	defer c.close()
	for i := range c.eng.health {
		h := &c.eng.health[i]
		h.mu.Lock()
		h.lateRun, h.failing, h.probed = skipAfter, true, time.Now().Add(time.Hour)
		h.mu.Unlock()
	}
	l, err := c.eng.Acquire(context.Background(), Request{Primitive: Lock, Resources: []string{"order:38"}, TTL: 10 * time.Second})
	if l == nil || err != nil {
		t.Fatalf("acquire with every master up = %v, %v; want a grant", l, err)
	}
	if h := c.holders(c.eng.opts.KeyPrefix+"order:38", l.Token); h < 3 {
		t.Fatalf("granted, held on %d masters", h)
	}
}
