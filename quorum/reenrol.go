package quorum

import (
	"context"
	"time"
)

// reenrolment is the second step of an extension
// (docs/design/leases.md): the lease is taken again on the masters that
// answered its first round "not held", as an acquisition with its token
// would take it there.
type reenrolment struct {
	token string
	// fl is the takes' flight, registered before the extension's first
	// round is sent (track), so that a release with the token that comes
	// any time after it stops the takes: a take after the release would
	// leave keys behind. Ended exactly once (end) when no take is sent.
	fl    *flight
	ended bool
	// group is the group (as confirm's) that a master which took the
	// lease joins.
	group func() string
	// held says whether a first-round answer found the lease.
	held func(i int, v any) bool
	// take is the op that takes the lease on a master, given the first
	// round's answers (a semaphore learns its slots from them); nil when
	// there is nothing to take it with.
	take func(r *round) *op
	// taken says whether an answer of take took it.
	taken func(v any) bool
}

// absent lists the masters whose answer in r (all in) was a definite "not
// held": neither an error (a timeout, a quarantined master) nor held.
func (re *reenrolment) absent(r *round) (out []bool, any bool) {
	out = make([]bool, len(r.ans))
	for i := range r.ans {
		if r.answered(i) && r.ans[i].err == nil && !re.held(i, r.ans[i].val) {
			out[i], any = true, true
		}
	}
	return out, any
}

// track registers re's flight; nil (no re-enrolment) when an
// acquisition with the token is in flight.
func (e *Engine) track4reenrol(re *reenrolment) *reenrolment {
	if re == nil {
		return nil
	}
	if re.fl = e.trackIdle(re.token); re.fl == nil {
		return nil
	}
	return re
}

// end ends re's flight when no take was sent.
func (e *Engine) endReenrol(re *reenrolment) {
	if re != nil && !re.ended {
		re.ended = true
		e.untrack(re.fl)
	}
}

// reenrolSend waits for r's answers and sends the take to the masters
// that said "not held", as re's flight: a release with the token that
// came first stops it being sent. It returns nil, and ends the flight,
// when none did, there is nothing to take with, or a release came.
func (e *Engine) reenrolSend(ctx context.Context, r *round, re *reenrolment) (*round, []bool) {
	<-r.all
	absent, any := re.absent(r)
	var u *op
	if any && !re.fl.isReleased() {
		u = re.take(r)
	}
	if u == nil {
		e.endReenrol(re)
		return nil, nil
	}
	re.ended = true // the take's round ends the flight
	skip := answer{}
	return e.follow(ctx, r, u, re.fl, func(i int) (answer, bool) { return skip, !absent[i] }), absent
}

// trackIdle registers a flight with token, as track does, unless one is
// in flight already (then nil: an acquisition with the token is still
// going on, and the extension does not re-enrol).
func (e *Engine) trackIdle(token string) *flight {
	fl := &flight{token: token, issued: make(chan struct{}), returned: make(chan struct{})}
	if _, busy := e.inflight.LoadOrStore(token, fl); busy {
		return nil
	}
	return fl
}

// untrack ends a flight that sent nothing.
func (e *Engine) untrack(fl *flight) {
	close(fl.issued)
	close(fl.returned)
	e.inflight.CompareAndDelete(fl.token, fl)
}

// reenrolNow re-enrols before an extension's verdict, while the lease is
// known to be valid until end: it returns the masters that took the
// lease and said so before end (a later answer may come from a script
// that ran after the lease had lapsed, and does not count).
func (e *Engine) reenrolNow(ctx context.Context, r *round, re *reenrolment, end time.Time) []bool {
	u, asked := e.reenrolSend(ctx, r, re)
	if u == nil {
		return nil
	}
	took := make([]bool, len(asked))
	left := e.until(end)
	if left <= 0 {
		return took
	}
	stop := e.clock.NewTimer(left)
	defer stop.Stop()
	seen := make([]bool, len(asked))
	read := func(i int) {
		if asked[i] && !seen[i] {
			seen[i] = true
			took[i] = u.ans[i].err == nil && re.taken(u.ans[i].val) && e.now().Before(end)
		}
	}
	for {
		select {
		case i := <-u.in:
			read(i)
		case <-u.all:
			for i := range asked {
				read(i)
			}
			return took
		case <-stop.C():
			return took
		}
	}
}

// reenrolLater re-enrols after an extension that found the lease on a
// quorum, for the next extension: in the background, once the first
// round's answers are in, unless the validity left (until end) is too
// short for the take to run within it.
func (e *Engine) reenrolLater(ctx context.Context, r *round, re *reenrolment, end time.Time) {
	if e.until(end) <= 2*e.opts.MasterTimeout {
		e.endReenrol(re)
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		e.reenrolSend(ctx, r, re)
	}()
}

// knownEnd is when the lease's validity ends, as its holder knows it
// (Validity at Decided), or the zero time when it does not.
func (l *Lease) knownEnd() time.Time {
	if l.Decided.IsZero() || l.Validity <= 0 {
		return time.Time{}
	}
	return l.Decided.Add(l.Validity)
}
