package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// confirm finishes a release whose first count decided nothing (a
// quorum neither held it nor could not have held it, within
// MasterTimeout): it reads the round's answers still to come (each
// master has the op's timeout, releaseTimeout), then asks the masters
// that failed or stayed silent again, every RetryDelay, until the
// answers decide or until passes (releaseUntil, extendUntil); then the
// release is a *QuorumError, as before.
//
// group names what a yes answer holds (the answers of one group count
// together: a semaphore's slot list; "" for a lock) and says false for a
// "not held". seed (may be nil) names masters known to hold it, by group,
// whatever r's answers say. The verdict: held once a group has a quorum; not held once
// no group can reach a quorum even if every master without a definite
// answer joined it.
//
// A resend is safe: every release script is token-checked and
// idempotent on one master (it deletes only what the token holds, and a
// second run finds nothing). But its "not held" is not definite: the
// earlier request to that master may have run after its deadline and
// released it. So with ambiguousNo (releases) a resent "not held" counts
// as no answer, never as a no: a release never reports "not held"
// because of its own late request. The earlier request's own answer, when
// it comes after its round's deadline (op.keepLate), settles it if it
// found the token held. Extensions (ambiguousNo false) never delete, so
// their resent answers are definite.
//
// vouch (may be nil) is the note of the grant being released
// (grantNote): its voters that are silent so far, on the connection they
// voted on and within the grant's validity, count as holding it, beside
// at least one master that answered that it held it, and only while no
// voter answered otherwise. So a release with two of five masters
// paused, two live voters answering held and the third live master not,
// answers held once the round's deadline passed, instead of asking the
// paused masters until the validity ends and answering NOQUORUM.
func (e *Engine) confirm(ctx context.Context, r *round, group func(i int, v any) (string, bool), ambiguousNo bool, opName string, until time.Time, seed map[int]string, vouch *grantNote) (bool, error) {
	n := len(e.nodes)
	const (
		open int8 = iota // no definite answer yet
		yes
		no
		unsure // a resent "not held" (ambiguousNo)
	)
	st := make([]int8, n)
	groups := make([]string, n)
	// failed[i]: a request of this release to master i failed other than
	// by silence (a timeout, or not sent to a master known down): it
	// cannot be vouched for.
	failed := make([]bool, n)
	var errs []error
	rounds := []*round{r}
	read := func(cur *round, resent bool, i int, asked []bool) {
		if !asked[i] || st[i] != open {
			return
		}
		a := cur.ans[i]
		g, ok := group(i, a.val)
		switch {
		case a.err != nil:
			errs = append(errs, a.err) // still open: asked again
			if !errors.Is(a.err, context.DeadlineExceeded) && !errors.Is(a.err, errSkippedDown) {
				failed[i] = true
			}
		case ok:
			st[i], groups[i] = yes, g
		case resent && ambiguousNo:
			st[i] = unsure
		default:
			st[i] = no
		}
	}
	// A late answer (one that came after its round's deadline) that
	// found the token held is definite, whichever request of ours ran
	// first; a late "not held" is not (a later request on a new
	// connection may have run before it).
	absorbLate := func() {
		for _, rr := range rounds {
			for i := range rr.late {
				if st[i] != open && st[i] != unsure {
					continue
				}
				if l := rr.late[i].Load(); l != nil && l.err == nil {
					if g, ok := group(i, l.val); ok {
						st[i], groups[i] = yes, g
					}
				}
			}
		}
	}
	// vouched reports whether the silent voters of vouch, with the yes
	// answers of its group in count, make a quorum.
	vouched := func(count map[string]int) bool {
		if vouch == nil || count[vouch.group] == 0 {
			return false
		}
		extra := 0
		for i := range n {
			switch {
			case vouch.conns[i] == 0:
			case st[i] == no, st[i] == yes && groups[i] != vouch.group:
				return false // a voter says it no longer holds the grant
			case st[i] == open && !failed[i] && e.vouches(vouch, i):
				extra++
			}
		}
		return count[vouch.group]+extra >= e.quorum
	}
	decide := func() verdict {
		count := map[string]int{}
		best, definite := 0, 0
		for i := range n {
			switch st[i] {
			case yes:
				count[groups[i]]++
				best = max(best, count[groups[i]])
				definite++
			case no:
				definite++
			}
		}
		switch {
		case best >= e.quorum, vouched(count):
			return decidedYes
		case best+(n-definite) < e.quorum:
			return decidedNo
		}
		return undecided
	}
	cur, resent := r, false
	asked := make([]bool, n)
	for i := range asked {
		asked[i] = true
	}
	// The answers the first count read already (they are not sent on
	// r.in again).
	for i := range n {
		if r.answered(i) {
			read(r, false, i, asked)
		}
	}
	// Masters known to hold it since (an extension's re-enrolment), in
	// their group.
	for i, g := range seed {
		st[i], groups[i] = yes, g
	}
	// What the first count read may decide with the grant's note.
	if v := decide(); v != undecided {
		return v == decidedYes, nil
	}
	for {
		// Every answer of this round, as it arrives; the round's timer
		// answers for the silent ones at its deadline.
	wait:
		for {
			select {
			case i := <-cur.in:
				read(cur, resent, i, asked)
			case <-cur.all:
				for i := range n {
					read(cur, resent, i, asked)
				}
				break wait
			}
			absorbLate()
			if decide() != undecided {
				break wait
			}
		}
		absorbLate()
		v := decide()
		if v == decidedYes || v == decidedNo {
			return v == decidedYes, nil
		}
		again := slices.Index(st, open) >= 0
		left := e.until(until)
		if !again || left <= 0 || ctx.Err() != nil {
			break
		}
		// A master that failed at once (down) is not asked in a tight
		// loop.
		t := e.clock.NewTimer(min(e.retryDelay(), left))
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
		asked = make([]bool, n)
		for i := range n {
			asked[i] = st[i] == open
		}
		skip := answer{}
		prevAsked := asked
		cur = e.follow(ctx, cur, cur.op, nil, func(i int) (answer, bool) { return skip, !prevAsked[i] })
		rounds = append(rounds, cur)
		resent = true
	}
	absorbLate()
	if v := decide(); v != undecided {
		return v == decidedYes, nil
	}
	got, held, notHeld, agree, unsureN := 0, 0, 0, 0, 0
	same := map[string]int{}
	for i := range n {
		switch st[i] {
		case unsure:
			unsureN++
		case yes:
			got++
			held++
			same[groups[i]]++
			agree = max(agree, same[groups[i]])
		case no:
			got++
			notHeld++
		}
	}
	return false, &QuorumError{Op: opName, Got: got, Need: e.quorum, Total: n, Yes: held, No: notHeld, Agree: agree, Unsure: unsureN, Errs: errs}
}

// lockGroup is the group of a lock, read lock or multi-resource lock
// extension answer (a release's, through releaseGroup): held when it
// counts every key (want).
func lockGroup(want int64) func(int, any) (string, bool) {
	return func(_ int, v any) (string, bool) { return "", v == want }
}

// semGroup is the group of a semaphore extension answer ("<slots>/<limit>")
// or, through releaseGroup, of a release's (the slot list): what the token
// held there ("" or none: not held).
func semGroup(_ int, v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && s != ""
}

// retryReleases reports whether a release undecided at MasterTimeout is
// asked again (confirm).
func (e *Engine) retryReleases() bool { return e.opts.ReleaseRetry > 0 }

// extendUntil is how long an extension undecided at MasterTimeout keeps
// asking: ReleaseRetry after it began, and never past the validity it
// would report.
func (e *Engine) extendUntil(t0 time.Time, ttl time.Duration) time.Time {
	v := ttl - (time.Duration(float64(ttl)*e.opts.DriftFactor) + 2*time.Millisecond) // validity at t0
	return t0.Add(min(e.opts.ReleaseRetry, v))
}

// releaseReply reads a release script's answer {held, ms left} (or
// lock_release's {held, 0, expiry}): held is what says whether it
// released (a count of keys, 1 or 0, a semaphore's record), left how long
// what it released still had to live there, at (lock_release) when it
// would have expired, in ms on the master's clock (0: not given).
func releaseReply(v any) (held any, left time.Duration, at int64) {
	a, ok := v.([]any)
	if !ok || len(a) < 2 || len(a) > 3 {
		return nil, 0, 0
	}
	ms, _ := a[1].(int64)
	if len(a) == 3 {
		at, _ = a[2].(int64)
	}
	return a[0], time.Duration(ms) * time.Millisecond, at
}

// releaseGroup is group for a release's answers ({held, ms left}).
func releaseGroup(group func(int, any) (string, bool)) func(int, any) (string, bool) {
	return func(i int, v any) (string, bool) {
		h, _, _ := releaseReply(v)
		return group(i, h)
	}
}

// releaseUntil is how long a release whose first answers decided nothing
// asks again (confirm): until the validity of what it releases ends, as
// far as it can tell, and at least ReleaseRetry after it began (t0). The
// validity is the lease's, when its holder knows it (known), or the
// longest ttl that a master which released it said it had left, less the
// drift (the masters that stayed silent hold it about as long). A master
// that said when it would have expired instead (lock_release: its expiry
// on the master's clock) is asked how long that is (time_left, waiting
// at most MasterTimeout; only on this path, which a release that decides
// at once never takes).
func (e *Engine) releaseUntil(ctx context.Context, t0 time.Time, r *round, held func(any) bool, known time.Time) time.Time {
	until := t0.Add(e.opts.ReleaseRetry)
	if known.After(until) {
		until = known
	}
	type clock struct {
		i  int
		at int64
	}
	var ask []clock
	now := e.now()
	extend := func(left time.Duration, from time.Time) {
		end := from.Add(left - (time.Duration(float64(left)*e.opts.DriftFactor) + 2*time.Millisecond))
		if end.After(until) {
			until = end
		}
	}
	for i := range r.ans {
		if !r.answered(i) || r.ans[i].err != nil {
			continue
		}
		h, left, at := releaseReply(r.ans[i].val)
		switch {
		case !held(h):
		case at > 0:
			ask = append(ask, clock{i, at})
		case left > 0:
			extend(left, now)
		}
	}
	if len(ask) == 0 {
		return until
	}
	type reading struct {
		left time.Duration
		when time.Time // when the answer came
		err  error
	}
	got := make(chan reading, len(ask))
	for _, c := range ask {
		e.sendNode(c.i, scripts.TimeLeft, nil, []string{strconv.FormatInt(c.at, 10)}, func(v any, err error) {
			ms, ok := v.(int64)
			if err == nil && !ok {
				err = fmt.Errorf("quorum: time_left answered %v", v)
			}
			got <- reading{time.Duration(ms) * time.Millisecond, e.now(), err}
		})
	}
	t := e.clock.NewTimer(e.opts.MasterTimeout)
	defer t.Stop()
	for range ask {
		select {
		case rd := <-got:
			if rd.err != nil {
				continue
			}
			// Each master's expiry against its own clock: the masters'
			// clocks may differ.
			extend(rd.left, rd.when)
		case <-t.C():
			return until
		case <-ctx.Done():
			return until
		}
	}
	return until
}
