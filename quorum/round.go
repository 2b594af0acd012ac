package quorum

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// op is one request that a round sends to the masters: a script, its keys
// and arguments, and how long each master may take.
type op struct {
	// name is the operation, for errors and metrics ("lock", "unlock").
	name string
	// script is the script's descriptor (quorum/scripts): follow checks
	// keys and args against it before anything is sent.
	script     *scripts.Script
	keys, args []string
	// timeout bounds each master's request; 0 means MasterTimeout.
	timeout time.Duration
	// keepLate keeps the answers that arrive after the round's timer
	// answered for them (round.late), for a release that may ask again
	// (confirm).
	keepLate bool
	// fresh marks a new acquisition's first request: it is not sent to a
	// master that is down, except as a probe (see skipDown). Releases,
	// rollbacks and follow-ups are always sent: they clean up after
	// requests that were.
	fresh bool
	// report marks a write that only feeds a report (a waiter's count):
	// never sent to a master that is down, and never its probe, so that
	// a paused master's backlog holds no more than what it must run.
	report bool
}

// answer is one master's reply in a round.
type answer struct {
	val any
	err error
	// conn is the connection the answer came on (Identity.Conn), for a
	// grant's note (grantNote); 0 for an error.
	conn uint64
}

// round is one op in flight on the masters, on a context the caller's end
// does not cancel (a grant decided at quorum still reaches the other
// masters; a caller that left is rolled back afterwards), each request
// bounded by the op's timeout.
//
// Rounds are event-driven: each request is handed to its master's
// connection with a completion, which records the answer when the reply
// arrives (on the connection's reader); one timer per round answers for
// the masters still silent at the round's deadline. No goroutine runs per
// master call.
type round struct {
	e  *Engine
	op *op
	// ans[i] is set before master i is marked settled (answered(i)): when
	// its request returned, was skipped or timed out. all closes once
	// every master is.
	ans []answer
	all chan struct{}
	// in receives the index of each master as its request returns; it is
	// buffered for every master, so a reader may stop early.
	in chan int
	// deadline is when the last of the round's requests times out.
	deadline time.Time

	claimed []atomic.Bool // claimed[i]: master i's answer is being recorded
	left    atomic.Int32  // masters whose answer is not recorded yet
	// expiry is the round's deadline alarm (see arm): cancelled once every
	// master answered.
	expiry atomic.Pointer[alarm]
	fl     *flight
	// late[i] is master i's real answer when it came after the round's
	// timer answered for it (only with op.keepLate; nil otherwise).
	late []atomic.Pointer[answer]

	// mu guards settled, then (what runs once master i's answer is
	// recorded: follow-ups waiting for it) and ctr, the round's count
	// while it reads answers (see count): an answer recorded then is
	// counted on the goroutine that records it, not sent on in.
	mu      sync.Mutex
	settled []bool
	then    [][]func()
	ctr     *counter
}

func (e *Engine) newRound(o *op, fl *flight) *round {
	n := len(e.nodes)
	r := &round{e: e, op: o, ans: make([]answer, n), all: make(chan struct{}), in: make(chan int, n),
		claimed: make([]atomic.Bool, n), settled: make([]bool, n), fl: fl}
	r.left.Store(int32(n))
	if o.keepLate {
		r.late = make([]atomic.Pointer[answer], n)
	}
	return r
}

// settle records master i's answer. Whoever claimed i (its reply, the
// round's timer or a skip) calls it, once.
func (r *round) settle(i int, a answer) {
	r.ans[i] = a
	if r.left.Add(-1) == 0 {
		defer close(r.all)
		r.e.alarms.cancel(r.expiry.Load())
		if r.fl != nil {
			close(r.fl.returned)
			r.e.inflight.CompareAndDelete(r.fl.token, r.fl)
		}
	}
	r.mu.Lock()
	r.settled[i] = true
	if r.ctr != nil {
		r.ctr.add(i)
		if r.ctr.over() {
			r.ctr.finish()
			r.ctr = nil
		}
	} else {
		r.in <- i
	}
	var fs []func()
	if r.then != nil {
		fs, r.then[i] = r.then[i], nil
	}
	r.mu.Unlock()
	for _, f := range fs {
		f()
	}
	r.e.bg.Done()
}

// onSettled runs f once master i's answer is recorded: at once if it is.
func (r *round) onSettled(i int, f func()) {
	r.mu.Lock()
	if r.settled[i] {
		r.mu.Unlock()
		f()
		return
	}
	if r.then == nil {
		r.then = make([][]func(), len(r.ans))
	}
	r.then[i] = append(r.then[i], f)
	r.mu.Unlock()
}

// arm sets the round's deadline alarm: at the deadline it answers for
// every master still silent with a timeout. In a follow-up of prev, it
// answers for master i only once prev has answered there (prev's answer
// may be on its way, recorded on another goroutine), since whoever reads
// a follow-up's answer at i may read prev's (a rollback asks whether the
// try reached i).
func (r *round) arm(timeout time.Duration, prev *round) {
	e := r.e
	expire := func(i int) {
		if r.claimed[i].CompareAndSwap(false, true) {
			err := fmt.Errorf("no answer in %v: %w", timeout, context.DeadlineExceeded)
			e.record(i, timeout, err)
			r.settle(i, answer{err: err})
		}
	}
	r.expiry.Store(e.alarms.set(r.deadline, func() {
		for i := range r.claimed {
			if prev != nil {
				prev.onSettled(i, func() { expire(i) })
			} else {
				expire(i)
			}
		}
	}))
	// Every answer may be in already (inline answers, skips): then
	// settle found no alarm to cancel.
	if r.left.Load() == 0 {
		e.alarms.cancel(r.expiry.Load())
	}
}

// issue sends the round's op to master i. The answer of a master whose
// vote does not count (see votes) is an ErrQuarantined error: every master
// call passes through here, and it checks after the answer, so that a
// restart is seen before the first answer on a new connection is counted.
func (r *round) issue(i int) {
	e, o := r.e, r.op
	t0 := e.now()
	e.sendNode(i, o.script, o.keys, o.args, func(v any, err error) {
		if !r.claimed[i].CompareAndSwap(false, true) {
			// The round's timer answered for it.
			if r.late != nil {
				if err == nil && !e.votes(i) {
					err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
				}
				r.late[i].Store(&answer{val: v, err: err})
			}
			return
		}
		e.record(i, e.since(t0), err)
		if err == nil && !e.votes(i) {
			err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
		}
		var conn uint64
		if err == nil {
			// The connection the reply came on: a new one is made only
			// once this one's requests have failed.
			conn = e.nodes[i].Identity().Conn
		}
		r.settle(i, answer{val: v, err: err, conn: conn})
	})
}

func (e *Engine) timeout(o *op) time.Duration {
	if o.timeout > 0 {
		return o.timeout
	}
	return e.opts.MasterTimeout
}

// send starts o on every master and returns at once. fl, if not nil, is
// told when every request was issued and when every one returned.
func (e *Engine) send(ctx context.Context, o *op, fl *flight) *round {
	return e.follow(ctx, nil, o, fl, nil)
}

// follow sends o to each master once that master's request in prev
// returned (prev nil: at once), so that the follow-up can never overtake
// the request it follows on the master's ordered connection. For a master
// where pre returns ok, nothing is sent and the round records pre's answer
// instead (pre runs once prev's answer is in, on the goroutine that
// recorded it: it must not block). fl, if not nil, is told when every
// request was issued and when every one returned. Each follow-up has at
// least the op's timeout from when it could be sent: the round's deadline
// is prev's plus the timeout.
func (e *Engine) follow(ctx context.Context, prev *round, o *op, fl *flight, pre func(i int) (answer, bool)) *round {
	_ = ctx // rounds outlive their caller; ctx is kept for the call sites' clarity
	r := e.newRound(o, fl)
	n := len(e.nodes)
	timeout := e.timeout(o)
	start := e.now()
	if prev != nil && prev.deadline.After(start) {
		start = prev.deadline
	}
	r.deadline = start.Add(timeout)
	if prev != nil {
		r.arm(timeout, prev)
	}
	e.bg.Add(n)
	var unissued atomic.Int32
	unissued.Store(int32(n))
	issued := func() {
		if unissued.Add(-1) == 0 && fl != nil {
			close(fl.issued)
		}
	}
	// A request that does not fit its script's descriptor is never sent:
	// every master answers the mismatch (a bug in the caller).
	bad := o.script.Check(o.keys, o.args)
	// Decided once for the round, so that it asks at least a quorum.
	var skip []bool
	if o.fresh {
		skip = e.skipSet()
	}
	steps := make([]func(), n)
	for i := range n {
		steps[i] = func() {
			if bad != nil {
				issued()
				if r.claimed[i].CompareAndSwap(false, true) {
					r.settle(i, answer{err: bad})
				}
				return
			}
			if skip != nil && skip[i] || o.report && e.lateRunOf(i) >= skipAfter {
				issued()
				if r.claimed[i].CompareAndSwap(false, true) {
					r.settle(i, answer{err: errSkippedDown})
				}
				return
			}
			if pre != nil {
				if a, ok := pre(i); ok {
					issued()
					if r.claimed[i].CompareAndSwap(false, true) {
						r.settle(i, a)
					}
					return
				}
			}
			if fl != nil {
				// Under the flight's lock: a release with the token
				// either comes after this request on the master's
				// ordered connection, or stops it being sent.
				fl.mu.Lock()
				if fl.released {
					fl.mu.Unlock()
					issued()
					if r.claimed[i].CompareAndSwap(false, true) {
						r.settle(i, answer{err: errReleasedFirst})
					}
					return
				}
				r.issue(i)
				fl.mu.Unlock()
				issued()
				return
			}
			issued()
			r.issue(i)
		}
	}
	if prev != nil {
		for i, step := range steps {
			prev.onSettled(i, step)
		}
		return r
	}
	for _, step := range steps {
		step()
	}
	// The deadline counts from when the requests were handed to the
	// masters' connections: a proxy that stalled while it issued them
	// (starved of CPU) must not count its own delay as the masters'
	// (timeouts, late runs). Validity is measured from the attempt's
	// start, so a later deadline only waits longer.
	r.deadline = e.now().Add(timeout)
	r.arm(timeout, nil)
	return r
}

// answered reports whether master i's answer is recorded (r.ans[i] may be
// read).
func (r *round) answered(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settled[i]
}

// call makes one request to node i and waits for it, bounded by ctx, and
// records its latency and error (the health checks' synchronous calls).
func (e *Engine) call(ctx context.Context, i int, o *op) (any, error) {
	if err := o.script.Check(o.keys, o.args); err != nil {
		return nil, err
	}
	t0 := e.now()
	v, err := e.evalNode(ctx, i, o.script, o.keys, o.args)
	e.record(i, e.since(t0), err)
	return v, err
}

// record notes one request to master i for its health and the observer.
func (e *Engine) record(i int, d time.Duration, err error) {
	e.health[i].record(e.now(), d, err, d > e.opts.MasterTimeout, e.opts.MasterTimeout)
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
	// stalled is how many of the pending answers are from masters that
	// were down when the count began (their last request failed or timed
	// out: paused, cut off, too slow): a refusal need not wait for them.
	stalled int
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
//
// A refusal does not wait for masters that were down when the count began
// (stalled): with two of five paused, a split vote among the three live
// ones would otherwise keep its keys there for the whole master_timeout,
// waiting for answers that do not come, and every other try would
// collide with them. Refusing early is always safe: a grant still needs
// a quorum of yes, and the rollback reaches a stalled master after its
// acquire, on the same connection.
func grantRule(q, _ int, t *tally, final bool) verdict {
	switch {
	case t.yes >= q:
		return decidedYes
	case t.answered() >= q && (final || t.yes+t.pending-t.stalled < q):
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

// count reads the round's answers until rule decides or the count's
// deadline (MasterTimeout + roundGrace from now) passes; yes says whether
// an answer counts for the operation. The answers recorded before the
// call are read at once; each one after is counted on the goroutine that
// records it (a master's reader, or the round's deadline), which wakes the
// caller once, with the verdict: one wake-up per decision, not one per
// answer. So yes and rl run under the round's lock, on any goroutine,
// until the verdict: they may read r.ans, and must not block or call
// what takes the round's lock (answered, onSettled); after it,
// the answers still coming are not counted, and are left on r.in. A
// decided release returns at once: its other requests go on, recorded
// for health and metrics as they answer.
func (r *round) count(rl rule, yes func(i int, v any) bool) *tally {
	e := r.e
	n := len(e.nodes)
	t := &tally{pending: n, counted: make([]bool, n)}
	c := &counter{r: r, rl: rl, yes: yes, t: t, down: e.downAt(), done: make(chan struct{})}
	for _, d := range c.down {
		if d {
			t.stalled++
		}
	}
	r.mu.Lock()
	for !c.over() {
		select {
		case i := <-r.in:
			c.add(i)
			continue
		default:
		}
		break
	}
	if c.over() {
		r.mu.Unlock()
		c.finish()
		return t
	}
	r.ctr = c
	r.mu.Unlock()
	deadline := e.alarms.set(e.now().Add(e.opts.MasterTimeout+roundGrace), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ctr != c {
			return
		}
		t.errs = append(t.errs, timedOut(t.pending))
		t.pending, t.stalled = 0, 0
		c.finish()
		r.ctr = nil
	})
	<-c.done
	e.alarms.cancel(deadline)
	return t
}

// counter is a round's count in progress (see count).
type counter struct {
	r    *round
	rl   rule
	yes  func(i int, v any) bool
	t    *tally
	down []bool        // the masters down when the count began
	done chan struct{} // closed by finish
}

// add counts master i's recorded answer.
func (c *counter) add(i int) {
	t, r := c.t, c.r
	t.pending--
	if c.down[i] {
		t.stalled--
	}
	a := r.ans[i]
	switch {
	case a.err != nil:
		t.failed++
		t.errs = append(t.errs, fmt.Errorf("%s: %w", r.e.nodes[i].Addr(), a.err))
	case c.yes(i, a.val):
		t.yes++
		t.counted[i] = true
	default:
		t.no++
	}
	t.verdict = c.rl(r.e.quorum, len(r.e.nodes), t, false)
}

// over reports whether the count is over: decided, or every answer read.
func (c *counter) over() bool { return c.t.verdict != undecided || c.t.pending == 0 }

// finish ends the count: the final verdict if the rule has not decided,
// and the caller woken.
func (c *counter) finish() {
	if c.t.verdict == undecided {
		c.t.verdict = c.rl(c.r.e.quorum, len(c.r.e.nodes), c.t, true)
	}
	close(c.done)
}

// err is the tally's error: a *QuorumError when the verdict is noQuorum.
func (t *tally) err(e *Engine, opName string) error {
	if t.verdict != noQuorum {
		return nil
	}
	return &QuorumError{Op: opName, Got: t.answered(), Need: e.quorum, Total: len(e.nodes), Yes: t.yes, No: t.no, Errs: slices.Clone(t.errs)}
}

// refusal is the error of an acquisition's try whose tally did not
// grant: err's, or errSplitVote when a quorum refused while some masters
// granted (the try held there until its rollback; a contender's try may
// have met it and been refused the same way), so that the caller retries
// soon rather than after the retry delay.
func (t *tally) refusal(e *Engine, opName string) error {
	if t.verdict == decidedNo && t.yes > 0 {
		return errSplitVote
	}
	return t.err(e, opName)
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
func (e *Engine) undo(ctx context.Context, r *round, u *op, mayHold func(i int) bool, fixed bool, tainted *taints) {
	if fixed {
		// Its late acknowledgements lift the taints (taints.refresh).
		u.timeout, u.keepLate = e.opts.MasterTimeout, true
	} else if u.timeout <= 0 {
		u.timeout = e.releaseTimeout()
	}
	skip := answer{}
	ur := e.follow(ctx, r, u, nil, func(i int) (answer, bool) { return skip, !mayHold(i) })
	if !fixed || e.off.taint {
		return
	}
	// A master that is down now (its last request failed or timed out)
	// is tainted at once rather than waited for: its acknowledgement
	// could only come after the acquire's own deadline and the undo's,
	// and tainting is always safe (its votes just do not count in this
	// call's later tries). With two of five masters paused, waiting would
	// cost every refused try of a fixed token two master_timeouts.
	down := e.downAt()
	waited := make([]bool, len(e.nodes))
	settled := make(chan struct{}, len(e.nodes))
	// A master that is only slow is waited for: the caller may try again
	// with the same token in a new call as soon as this one fails (a
	// drop-in library's retry loop), and that call knows nothing of this
	// one's rollbacks. Tainting such masters at once (a straggle grace
	// after the count, say) would let a rollback land after the next
	// call's grant and delete it on a live master, under load.
	for i := range e.nodes {
		if down[i] {
			tainted.add(i, ur)
			continue
		}
		waited[i] = true
		ur.onSettled(i, func() { settled <- struct{}{} })
	}
	// A master found down while it is waited for (another request to it
	// timed out) is tainted then, as one down at the start: a master
	// paused just before the try is not down yet, and its rollback
	// follows the call's earlier requests there, each with its own
	// deadline; waiting for their sum would cost a fair waiter that has
	// just queued about 230 ms, and its hand-off.
	tick := e.clock.NewTimer(e.opts.MasterTimeout / 10)
	defer tick.Stop()
	for {
		down = e.downAt()
		pending := false
		for i := range e.nodes {
			if !waited[i] || ur.answered(i) {
				continue
			}
			if down[i] {
				waited[i] = false
				tainted.add(i, ur)
				continue
			}
			pending = true
		}
		if !pending {
			break
		}
		select {
		case <-settled:
		case <-tick.C():
			tick.Reset(e.opts.MasterTimeout / 10)
		}
	}
	for i := range e.nodes {
		if waited[i] && ur.ans[i].err != nil {
			tainted.add(i, ur)
		}
	}
}

// taints are the masters whose votes a call's next try must not count:
// an undo of an earlier try with the same (caller's) token was sent there,
// or is still to be sent, and was not acknowledged, and might still run
// after the next try's request and delete what it set.
//
// A master keeps every undo that tainted it until each is acknowledged,
// not only the latest: an undo is sent to a master only once the try's
// request there returned (at the try's deadline, for a paused master),
// so a later try that skipped that master (down) has an undo that sends
// nothing there and is acknowledged at once, while the earlier try's undo
// is not even sent yet. Were only the latest kept, that acknowledgement
// would lift the taint, and a try of the next call could count the
// master's vote before the earlier undo, sent after it, deletes its key
// there: a grant held on fewer masters than a quorum
// (TestTaintKeepsEveryUndo).
type taints struct {
	bad  []bool
	undo [][]*round // undo[i]: the undo rounds that taint master i
}

func newTaints(n int) *taints { return &taints{bad: make([]bool, n), undo: make([][]*round, n)} }

// has reports whether master i's vote must not count.
func (t *taints) has(i int) bool { return t.bad[i] }

// add taints master i until undo's acknowledgement from it arrives (and
// those of the undos that tainted it before).
func (t *taints) add(i int, undo *round) {
	t.bad[i] = true
	if !slices.Contains(t.undo[i], undo) {
		t.undo[i] = append(t.undo[i], undo)
	}
}

// refresh forgets each undo that has since been acknowledged (in time, or
// late): it ran there, so every request sent from now on comes after it;
// and lifts the taint of a master once every undo that tainted it is.
// Called before each try, on the call's goroutine. A paused master is
// tainted while it is paused, not for the rest of the call.
func (t *taints) refresh() {
	for i, us := range t.undo {
		t.undo[i] = slices.DeleteFunc(us, func(u *round) bool { return acknowledged(u, i) })
		t.bad[i] = len(t.undo[i]) > 0
	}
}

// acknowledged reports whether master i answered undo round u without an
// error, in time or late.
func acknowledged(u *round, i int) bool {
	if !u.answered(i) {
		return false
	}
	if u.ans[i].err == nil {
		return true
	}
	if u.late != nil {
		l := u.late[i].Load()
		return l != nil && l.err == nil
	}
	return false
}

// carried are the taints that calls with one fixed token left behind: a
// master whose undo of one of the token's tries was not acknowledged when
// the call returned (it was down, so the undo was not waited for). The
// token's next call starts from them: a library's retry loop makes a new
// call with the same token at once, and its acquire can reach that
// master before the undo, which is sent only once the earlier acquire's
// answer is in; counted, its vote makes a grant that the undo then
// deletes there. Kept until each undo is acknowledged, late or not, or
// for carryFor at most.
type carried struct {
	mu    sync.Mutex
	undo  [][]*round  // undo[i]: the unacknowledged undos that taint master i
	since []time.Time // since[i]: when the latest of undo[i] was carried
	// dead is set once c left the map: a call that finds it so stores
	// its taints in a new entry instead.
	dead bool
}

// inheritTaints adds to t the masters a call with token left tainted.
func (e *Engine) inheritTaints(token string, t *taints) {
	v, ok := e.carried.Load(token)
	if !ok {
		return
	}
	c := v.(*carried)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, us := range c.undo {
		for _, u := range us {
			t.add(i, u)
		}
	}
}

// leaveTaints keeps what is still tainted in t, as a call with token
// returns, for the token's next calls.
func (e *Engine) leaveTaints(token string, t *taints) {
	t.refresh()
	if !slices.Contains(t.bad, true) {
		if v, ok := e.carried.Load(token); ok {
			e.liftCarried(token, v.(*carried))
		}
		return
	}
	for {
		v, _ := e.carried.LoadOrStore(token, &carried{undo: make([][]*round, len(e.nodes)), since: make([]time.Time, len(e.nodes))})
		c := v.(*carried)
		c.mu.Lock()
		if c.dead {
			// Forgotten (by a sweep, or another call with the token)
			// between the load and the lock: store in a new entry.
			c.mu.Unlock()
			continue
		}
		for i, us := range t.undo {
			if !t.bad[i] {
				continue
			}
			// A taint the call inherited keeps its age; a new undo
			// starts it again: carryFor bounds how long the latest
			// undo of a master is waited for.
			for _, u := range us {
				if !slices.Contains(c.undo[i], u) {
					c.undo[i], c.since[i] = append(c.undo[i], u), e.now()
				}
			}
		}
		c.mu.Unlock()
		e.liftCarried(token, c)
		return
	}
}

// liftCarried forgets c's undos that were acknowledged, lifts the taints
// of masters with none left or carried for carryFor, and forgets c once
// none is left.
func (e *Engine) liftCarried(token string, c *carried) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, us := range c.undo {
		us = slices.DeleteFunc(us, func(u *round) bool { return acknowledged(u, i) })
		if len(us) == 0 || e.since(c.since[i]) > e.carryFor() {
			us = nil
		}
		c.undo[i] = us
	}
	if !slices.ContainsFunc(c.undo, func(us []*round) bool { return len(us) > 0 }) && !c.dead {
		c.dead = true
		e.carried.CompareAndDelete(token, c)
	}
}

// sweepCarried runs liftCarried on every token's carried taints, so that
// they are forgotten when no later call with the token comes.
func (e *Engine) sweepCarried() {
	e.carried.Range(func(k, v any) bool {
		e.liftCarried(k.(string), v.(*carried))
		return true
	})
}

// carryFor is how long a token's taints are carried at most: the longest
// ttl a grant may have (or has had). An undo still unacknowledged after
// that is on a master stopped for that long, whose connection was
// replaced meanwhile; what it could delete is a key of the same token
// that would have expired by then unless extended (and an extension
// re-enrols a master that lost it).
func (e *Engine) carryFor() time.Duration {
	return max(e.opts.MaxTTL, time.Duration(e.grantedTTL.Load()), 20*e.opts.MasterTimeout)
}

// flight tracks the acquires of a try: issued closes once every one was
// handed to its master's client, returned once every one came back.
type flight struct {
	token            string
	issued, returned chan struct{}
	// released is set by a release with the token: requests of the
	// flight not yet sent (a follow-up waiting for the request before it
	// on a slow master, see follow and semConverge) are then not sent at
	// all. Under mu, which also covers each request's send.
	mu       sync.Mutex
	released bool
}

// isReleased reports whether a release with the flight's token came.
func (fl *flight) isReleased() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.released
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
		fl := v.(*flight)
		fl.mu.Lock()
		fl.released = true
		fl.mu.Unlock()
	}
}

// awaitForRelease makes a release through this engine come after the
// acquires of the latest try with the same token on every master: the
// requests already sent are ahead of it on each master's ordered
// connection, and those not sent yet (a fair try following an earlier
// request on a paused master) never will be (releaseFlight). It then
// waits for them to return only for the straggle grace. Unlike
// awaitAcquires it never waits for a request to be sent: with two
// masters paused, such a wait would hold every release of a fair lock
// for master_timeout.
func (e *Engine) awaitForRelease(token string) {
	v, ok := e.inflight.Load(token)
	if !ok {
		return
	}
	e.releaseFlight(token)
	select {
	case <-v.(*flight).returned:
		return // the usual case: no timer
	default:
	}
	t := e.clock.NewTimer(e.straggleGrace())
	defer t.Stop()
	select {
	case <-v.(*flight).returned:
	case <-t.C():
	}
}

// awaitRound waits until every master answered in r, or for d at most.
func (e *Engine) awaitRound(r *round, d time.Duration) {
	select {
	case <-r.all:
		return
	default:
	}
	t := e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.all:
	case <-t.C():
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
	select {
	case <-fl.returned:
		return // the usual case: no timer
	default:
	}
	t := e.clock.NewTimer(e.opts.MasterTimeout)
	defer t.Stop()
	select {
	case <-fl.issued:
	case <-t.C():
		return
	}
	t.Reset(e.straggleGrace())
	select {
	case <-fl.returned:
	case <-t.C():
	}
}

// everyAnswer is the rule of reads (info, counts) where every answer
// counts: it waits for all of them (at most the round's deadline), then
// decides yes when a quorum of them are yes, else no quorum.
func everyAnswer(q, _ int, t *tally, final bool) verdict {
	switch {
	case final && t.yes >= q:
		return decidedYes
	case final:
		return noQuorum
	}
	return undecided
}
