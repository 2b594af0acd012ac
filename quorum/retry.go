package quorum

import (
	"context"
	"errors"
	"time"
)

// step is what a try of a blocking primitive tells retry.
type step int

const (
	// stepFinal: retrying cannot change the outcome (granted, bad request,
	// the caller left).
	stepFinal step = iota
	// stepWait: held by others, or no quorum; wait for a release or the
	// retry delay.
	stepWait
	// stepSplit: refused by a quorum while some masters granted (a split
	// vote: contenders' tries met each other, and each rolls back what it
	// holds). Nobody may hold the lock now and no release will announce
	// it, so the next try comes after a short random delay (splitDelay),
	// not the retry delay; at most maxSplitRetries in a row.
	stepSplit
)

// maxSplitRetries is how many split votes in a row retry after
// splitDelay; the next one waits the retry delay, so that contenders
// that keep splitting do not flood the masters.
const maxSplitRetries = 3

// retry runs try until it reports a final outcome or wait runs out, and
// returns the last outcome. Between tries it sleeps for the retry delay
// (RetryDelay +- RetryJitter), or splitDelay after a split vote
// (stepSplit), woken early by a release notification on any of channels
// through any proxy. Every blocking primitive waits through it.
//
// A try that is not final and runs out of wait is returned as it is (not
// granted, or no quorum on the last try). Tries are never more than
// maxSleep apart (plus a round), whatever the retry delay: they renew
// what the call keeps on the masters while it waits.
//
// fair, if not "", makes the waiter a fair-lock waiter queued with that
// token: a hand-off wakes it only when it is the head of the queue, and it
// retries at once, without jitter. rank, if not nil, is read after every
// try and orders the waiters a counted release wakes (Notify).
func retry[T any](e *Engine, ctx context.Context, wait time.Duration, channels []string, fair string, rank func() uint64, try func() (T, step, error)) (T, error) {
	deadline := e.now().Add(wait)
	var w *watch
	var counted *waitCount
	defer func() {
		if w != nil {
			w.close()
		}
		if counted != nil {
			counted.leave(ctx)
		}
	}()
	splits := 0
	for {
		v, st, err := try()
		if st == stepFinal {
			return v, err
		}
		if cerr := ctx.Err(); cerr != nil {
			var zero T
			return zero, cerr
		}
		if !e.now().Before(deadline) {
			return v, err
		}
		if w == nil {
			// Subscribe before the next try, so that a release between the
			// failed try and the subscription is not missed: the next try
			// runs at once and sees it.
			w = e.wake.watch(channels, e.nodes, fair, e.quorum, e.clock)
			if rank != nil {
				w.setRank(rank())
			}
			w.ready(ctx, e.opts.MasterTimeout, e.quorum)
			// Register in the waiting sets too, before the next try on
			// each master's ordered connection: a release publishes only
			// where a waiting set exists, so a release that the next try
			// finds still held will find the registration
			// (docs/design/fencing.md, "Waiters never miss the release
			// they wait for").
			counted = e.countWait(ctx, channels, deadline)
			continue
		}
		if rank != nil {
			w.setRank(rank())
		}
		delay := e.retryDelay()
		if st == stepSplit && splits < maxSplitRetries {
			splits++
			delay = e.splitDelay()
		} else {
			splits = 0
		}
		if err := w.sleep(ctx, min(delay, e.maxSleep(), e.until(deadline))); err != nil {
			var zero T
			return zero, err
		}
		counted.refresh(ctx)
	}
}

// attemptFunc is one try of an acquisition with token: the grant and its
// rollback (for a caller that left meanwhile), or nil with why not (nil:
// refused by a quorum). tainted and fixed are as in attempt.
type attemptFunc func(token string, tainted *taints, fixed bool) (*Lease, func(), error)

// waiting is what a primitive adds to the acquire loop: its wake-up
// channels, a fair waiter's id, a semaphore waiter's rank among the
// local waiters (its ticket), and hooks run when a try is refused (the
// queue takes a place) or a grant is given back because the caller left.
type waiting struct {
	channels []string
	fair     string
	rank     func() uint64
	refused  func(err error) error
	gaveBack func()
}

// acquireLoop is the one acquire loop of every primitive: it tries with
// the caller's token, or a fresh one per try; a grant is final, given back
// if the caller left meanwhile; a bad request or any error but no quorum
// is final; a refusal or no quorum waits in retry (release notification
// or jittered timer, hang-up, WAIT deadline) and tries again. The votes of
// masters whose rollback of an earlier try with the same token was not
// acknowledged yet never count (tainted).
func (e *Engine) acquireLoop(ctx context.Context, req Request, w waiting, try attemptFunc) (*Lease, error) {
	fixed := req.Token != ""
	tainted := newTaints(len(e.nodes))
	if fixed {
		e.inheritTaints(req.Token, tainted)
		defer e.leaveTaints(req.Token, tainted)
	}
	return retry(e, ctx, req.Wait, w.channels, w.fair, w.rank, func() (*Lease, step, error) {
		token := req.Token
		if !fixed {
			token = e.rnd.token()
		}
		tainted.refresh()
		lease, rb, err := try(token, tainted, fixed)
		switch {
		case lease != nil && ctx.Err() != nil:
			// The caller left while we were granting: hold nothing.
			rb()
			if w.gaveBack != nil {
				w.gaveBack()
			}
			return nil, stepFinal, ctx.Err()
		case errors.Is(err, errSplitVote):
			if w.refused != nil {
				if err := w.refused(nil); err != nil {
					return nil, stepWait, err
				}
			}
			return nil, stepSplit, nil
		case lease != nil, err != nil && !errors.Is(err, ErrNoQuorum):
			return lease, stepFinal, err
		}
		if w.refused != nil {
			err = w.refused(err)
		}
		return nil, stepWait, err
	})
}
