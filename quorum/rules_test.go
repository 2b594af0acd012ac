package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestGrantRule: a grant needs a quorum of yes; a refusal needs a quorum
// of answers and waits for every master that could still make the yes a
// quorum, except those that were down when the count began (stalled).
func TestGrantRule(t *testing.T) {
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
	timeout := fmt.Errorf("no answer in 50ms: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		seq  []func(h *nodeHealth)
		want bool
	}{
		{"never asked", nil, false},
		{"answered in time", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Millisecond, nil, false) }}, false},
		{"failed at once", []func(h *nodeHealth){func(h *nodeHealth) { h.record(time.Millisecond, errors.New("refused"), false) }}, false},
		{"timed out", []func(h *nodeHealth){func(h *nodeHealth) { h.record(50*time.Millisecond, timeout, false) }}, true},
		{"answered late", []func(h *nodeHealth){func(h *nodeHealth) { h.record(300*time.Millisecond, nil, true) }}, true},
		{"late, then in time", []func(h *nodeHealth){
			func(h *nodeHealth) { h.record(300*time.Millisecond, nil, true) },
			func(h *nodeHealth) { h.record(time.Millisecond, nil, false) },
		}, false},
		{"timed out, then the caller left", []func(h *nodeHealth){
			func(h *nodeHealth) { h.record(50*time.Millisecond, timeout, false) },
			func(h *nodeHealth) { h.record(time.Millisecond, context.Canceled, false) },
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{nodes: make([]Node, 1), health: make([]nodeHealth, 1)}
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
	e := &Engine{nodes: make([]Node, 1), health: make([]nodeHealth, 1), opts: Options{MasterTimeout: 50 * time.Millisecond}}
	h := &e.health[0]
	if e.skipDown(0) {
		t.Fatal("skipped a master never asked")
	}
	for k := range skipAfter {
		if e.skipDown(0) {
			t.Fatalf("skipped after %d late answers in a row, want %d first", k, skipAfter)
		}
		h.record(50*time.Millisecond, fmt.Errorf("no answer: %w", context.DeadlineExceeded), false)
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
	h.record(time.Millisecond, nil, false)
	for range 3 {
		if e.skipDown(0) {
			t.Fatal("skipped a master that answered in time")
		}
	}
}
