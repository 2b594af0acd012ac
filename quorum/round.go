package quorum

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// op is one request that a round sends to the masters: a script, its keys
// and arguments, and how long each master may take.
type op struct {
	// name is the operation, for errors and metrics ("lock", "unlock").
	name string
	// script names the script (quorum/redisnode/scripts/<script>.lua).
	script     string
	keys, args []string
	// timeout bounds each master's request; 0 means MasterTimeout.
	timeout time.Duration
}

// answer is one master's reply in a round.
type answer struct {
	val any
	err error
}

// round is one op in flight on the masters. Every request runs on its
// master's worker pool, on a context the caller's end does not cancel (a
// grant decided at quorum still reaches the other masters; a caller that
// left is rolled back afterwards), bounded by the op's timeout.
type round struct {
	e  *Engine
	op *op
	// ans[i] is set before done[i] is closed; done[i] closes when master
	// i's request returned (or was skipped).
	ans  []answer
	done []chan struct{}
	// in receives the index of each master as its request returns; it is
	// buffered for every master, so a reader may stop early.
	in chan int
}

func (e *Engine) newRound(o *op) *round {
	n := len(e.nodes)
	r := &round{e: e, op: o, ans: make([]answer, n), done: make([]chan struct{}, n), in: make(chan int, n)}
	for i := range n {
		r.done[i] = make(chan struct{})
	}
	return r
}

// send starts o on every master and returns at once. fl, if not nil, is
// told when every request was issued and when every one returned.
//
// It is event-driven: each request is handed to its master's connection
// with a completion, which records the answer when the reply arrives (on
// the connection's reader); one timer per round answers for the masters
// still silent when the op's timeout passes. No goroutine runs per master
// call.
func (e *Engine) send(ctx context.Context, o *op, fl *flight) *round {
	r := e.newRound(o)
	n := len(e.nodes)
	timeout := o.timeout
	if timeout <= 0 {
		timeout = e.opts.MasterTimeout
	}
	claimed := make([]atomic.Bool, n)
	var left atomic.Int32
	left.Store(int32(n))
	// timer is stored after it is made; an answer that completes the
	// round before that leaves it to fire and find nothing to do.
	var timer atomic.Pointer[time.Timer]
	// settle records master i's answer, once: from its reply or from the
	// timer, whichever comes first.
	settle := func(i int, a answer) {
		r.ans[i] = a
		close(r.done[i])
		r.in <- i
		if left.Add(-1) == 0 {
			if t := timer.Load(); t != nil {
				t.Stop()
			}
			if fl != nil {
				close(fl.returned)
				e.inflight.CompareAndDelete(fl.token, fl)
			}
		}
		e.bg.Done()
	}
	t0 := time.Now()
	e.bg.Add(n)
	timer.Store(time.AfterFunc(timeout, func() {
		for i := range n {
			if claimed[i].CompareAndSwap(false, true) {
				err := fmt.Errorf("no answer in %v: %w", timeout, context.DeadlineExceeded)
				e.record(i, timeout, err)
				settle(i, answer{err: err})
			}
		}
	}))
	for i := range n {
		e.nodes[i].Send(o.script, o.keys, o.args, func(v any, err error) {
			if !claimed[i].CompareAndSwap(false, true) {
				return // the round's timer answered for it
			}
			e.record(i, time.Since(t0), err)
			if err == nil && !e.votes(i) {
				err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
			}
			settle(i, answer{val: v, err: err})
		})
	}
	if fl != nil {
		close(fl.issued)
	}
	return r
}

// follow sends o to each master once that master's request in prev
// returned (prev nil: at once, by send), so that the follow-up can never
// overtake the request it follows on the master's ordered connection. For
// a master where pre returns ok, nothing is sent and the round records
// pre's answer instead (pre runs after prev's request returned). fl, if
// not nil, is told when every request was issued and when every one
// returned. Follow-ups (rollbacks, undo, fair-queue steps) are off the
// fast path: each runs on a worker of its master's pool, bounded by its
// own timeout from when it can be sent.
//
// The answer of a master whose vote does not count (see votes) is an
// ErrQuarantined error: every master call passes through send or follow,
// which check after the answer, so that a restart is seen before the first
// answer on a new connection is counted.
func (e *Engine) follow(ctx context.Context, prev *round, o *op, fl *flight, pre func(i int) (answer, bool)) *round {
	if prev == nil && pre == nil {
		return e.send(ctx, o, fl)
	}
	r := e.newRound(o)
	n := len(e.nodes)
	timeout := o.timeout
	if timeout <= 0 {
		timeout = e.opts.MasterTimeout
	}
	var left, unissued atomic.Int32
	left.Store(int32(n))
	unissued.Store(int32(n))
	issued := func() {
		if unissued.Add(-1) == 0 && fl != nil {
			close(fl.issued)
		}
	}
	finished := func() {
		if left.Add(-1) == 0 && fl != nil {
			close(fl.returned)
			e.inflight.CompareAndDelete(fl.token, fl)
		}
	}
	base := context.WithoutCancel(ctx)
	e.bg.Add(n)
	for i := range n {
		e.pools[i].run(func() {
			defer e.bg.Done()
			defer finished()
			if prev != nil {
				<-prev.done[i]
			}
			if pre != nil {
				if a, ok := pre(i); ok {
					issued()
					r.ans[i] = a
					close(r.done[i])
					r.in <- i
					return
				}
			}
			// A follow-up's clock starts when it can be sent.
			cctx, cancel := context.WithTimeout(base, timeout)
			defer cancel()
			issued()
			v, err := e.call(cctx, i, o)
			if err == nil && !e.votes(i) {
				err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
			}
			r.ans[i] = answer{val: v, err: err}
			close(r.done[i])
			r.in <- i
		})
	}
	return r
}

// wait blocks until every master's request in the round returned.
func (r *round) wait() {
	for _, d := range r.done {
		<-d
	}
}

// call makes one request to node i, bounded by ctx, and records its
// latency and error.
func (e *Engine) call(ctx context.Context, i int, o *op) (any, error) {
	t0 := time.Now()
	v, err := e.nodes[i].Eval(ctx, o.script, o.keys, o.args)
	e.record(i, time.Since(t0), err)
	return v, err
}

// record notes one request to master i for its health and the observer.
func (e *Engine) record(i int, d time.Duration, err error) {
	e.health[i].record(d, err)
	if e.opts.Observer != nil {
		e.opts.Observer.MasterCall(e.nodes[i].Addr(), d, err)
	}
}

// verdict is what a round decided.
type verdict int8

const (
	undecided verdict = iota
	decidedYes
	decidedNo
	noQuorum
)

// tally is a round's count of answers.
type tally struct {
	yes, no, failed, pending int
	// counted[i] is true when master i's answer counted as yes.
	counted []bool
	errs    []error
	verdict verdict
}

// answered is how many masters answered (yes or no, not failed).
func (t *tally) answered() int { return t.yes + t.no }

// rule decides a round from its tally; final is true once no more answers
// will be read, and then the rule must not answer undecided.
type rule func(q, n int, t *tally, final bool) verdict

// grantRule decides an acquisition: granted with a quorum of yes; refused
// when a quorum answered and the yes can no longer reach quorum; with fewer
// than a quorum of answers, no quorum. While fewer than a quorum answered
// it waits for every master (each bounded by its timeout), so that the
// NOQUORUM error reports exactly how many answered.
func grantRule(q, _ int, t *tally, final bool) verdict {
	switch {
	case t.yes >= q:
		return decidedYes
	case t.answered() >= q && (final || t.yes+t.pending < q):
		return decidedNo
	case final:
		return noQuorum
	}
	return undecided
}

// strictRule decides a release or an extension: yes with a quorum of yes;
// no only when at least N - quorum + 1 masters answered no (the yes can no
// longer reach quorum whatever the silent masters did); otherwise, once
// the answers are in, no quorum: a slow master is not evidence of a loss.
func strictRule(q, n int, t *tally, final bool) verdict {
	switch {
	case t.yes >= q:
		return decidedYes
	case t.no >= n-q+1:
		return decidedNo
	case final:
		return noQuorum
	}
	return undecided
}

// count reads the round's answers until rule decides or the round's
// deadline (MasterTimeout + roundGrace) passes; yes says whether an answer
// counts for the operation. With settle >= 0 it then waits up to settle
// more for the other answers (a release that should reach every master),
// which do not change the verdict.
func (r *round) count(rl rule, yes func(i int, v any) bool, settle time.Duration) *tally {
	e := r.e
	n := len(e.nodes)
	t := &tally{pending: n, counted: make([]bool, n)}
	deadline := time.NewTimer(e.opts.MasterTimeout + roundGrace)
	defer deadline.Stop()
	for t.pending > 0 {
		var i int
		select {
		case i = <-r.in:
		case <-deadline.C:
			if t.verdict == undecided {
				t.errs = append(t.errs, timedOut(t.pending))
			}
			t.pending = 0
			continue
		}
		t.pending--
		a := r.ans[i]
		switch {
		case a.err != nil:
			t.failed++
			if t.verdict == undecided {
				t.errs = append(t.errs, fmt.Errorf("%s: %w", e.nodes[i].Addr(), a.err))
			}
		case yes(i, a.val):
			t.yes++
			t.counted[i] = true
		default:
			t.no++
		}
		if t.verdict != undecided {
			continue // settling: the verdict stands
		}
		if t.verdict = rl(e.quorum, n, t, false); t.verdict != undecided {
			if settle < 0 {
				return t
			}
			deadline.Reset(settle)
		}
	}
	if t.verdict == undecided {
		t.verdict = rl(e.quorum, n, t, true)
	}
	return t
}

// err is the tally's error: a *QuorumError when the verdict is noQuorum.
func (t *tally) err(e *Engine, opName string) error {
	if t.verdict != noQuorum {
		return nil
	}
	return &QuorumError{Op: opName, Got: t.answered(), Need: e.quorum, Total: len(e.nodes), Errs: slices.Clone(t.errs)}
}

// roundGrace is how long after MasterTimeout a round still waits for
// answers before it counts the silent masters as timed out itself.
const roundGrace = 5 * time.Millisecond

func timedOut(n int) error {
	return fmt.Errorf("%d masters did not answer in time: %w", n, context.DeadlineExceeded)
}

// undo sends the undo op u to every master that may hold what round r
// did (mayHold runs once r's request to that master returned), each only
// after r's request returned, so that the undo cannot be overtaken by it.
// It runs on a context the caller cannot cancel.
//
// With fixed (a caller-chosen token shared by every try of a call) it
// waits for the answers and taints the masters that did not acknowledge,
// so that their votes are not counted in a later try of the same call: a
// late undo could delete what that try set.
func (e *Engine) undo(ctx context.Context, r *round, u *op, mayHold func(i int) bool, fixed bool, tainted []bool) {
	if fixed {
		u.timeout = e.opts.MasterTimeout
	} else if u.timeout <= 0 {
		u.timeout = e.releaseTimeout()
	}
	skip := answer{}
	ur := e.follow(ctx, r, u, nil, func(i int) (answer, bool) { return skip, !mayHold(i) })
	if !fixed {
		return
	}
	ur.wait()
	for i, a := range ur.ans {
		if a.err != nil {
			tainted[i] = true
		}
	}
}

// flight tracks the acquires of a try: issued closes once every one was
// handed to its master's client, returned once every one came back.
type flight struct {
	token            string
	issued, returned chan struct{}
	// released is set by a release with the token: follow-ups of the
	// flight not yet sent (see semConverge) are then not sent at all.
	released atomic.Bool
}

// track registers a flight as the latest acquire with token, until its
// requests returned.
func (e *Engine) track(token string) *flight {
	fl := &flight{token: token, issued: make(chan struct{}), returned: make(chan struct{})}
	e.inflight.Store(token, fl)
	return fl
}

// releaseFlight marks the latest flight with token as released, so that
// its follow-ups not yet sent are dropped rather than land after the
// release.
func (e *Engine) releaseFlight(token string) {
	if v, ok := e.inflight.Load(token); ok {
		v.(*flight).released.Store(true)
	}
}

// awaitAcquires makes a release or extension through this engine come
// after the acquires of the latest try with the same token: it waits until
// they were all issued (at most MasterTimeout), then until they returned,
// but only for the straggle grace. On a healthy master the acquire has
// returned by then; a slow master's acquire was issued long before, on the
// same pipelined connection, so the release queues behind it.
func (e *Engine) awaitAcquires(token string) {
	v, ok := e.inflight.Load(token)
	if !ok {
		return
	}
	fl := v.(*flight)
	t := time.NewTimer(e.opts.MasterTimeout)
	defer t.Stop()
	select {
	case <-fl.issued:
	case <-t.C:
		return
	}
	t.Reset(e.straggleGrace())
	select {
	case <-fl.returned:
	case <-t.C:
	}
}
