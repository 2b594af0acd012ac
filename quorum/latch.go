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

// LatchCountError reports that a latch exists with another count.
type LatchCountError struct {
	Name  string
	Count int
}

// Error implements error.
func (e *LatchCountError) Error() string {
	return fmt.Sprintf("quorum: latch %q has count %d", e.Name, e.Count)
}

// latchKeys names a latch's keys; the name is length-prefixed, as a
// semaphore's, so that no latch's key is another's arrivals key.
type latchKeys struct {
	count, arrivals, channel string
}

func (e *Engine) latchKeys(name string) (latchKeys, error) {
	if name == "" {
		return latchKeys{}, fmt.Errorf("%w: empty latch name", ErrBadRequest)
	}
	enc := strconv.Itoa(len(name)) + ":" + name
	// Both keys live in the slot of the latch's channel.
	ch := e.opts.MetaPrefix + "latch-open:" + enc
	base := e.meta(ch, "latch:"+enc)
	return latchKeys{count: base, arrivals: base + ":a", channel: ch}, nil
}

// latchCreate creates the latch name waiting for count arrivals and living
// ttl. It reports true when it created it, false when a quorum of masters
// had it already with that count. A latch that exists with another count
// on any master that answers is a *LatchCountError (the masters where
// this call created it keep it until its ttl).
func (e *Engine) latchCreate(ctx context.Context, name string, count int, ttl time.Duration) (created bool, err error) {
	k, err := e.latchKeys(name)
	if err != nil {
		return false, err
	}
	if count < 1 || ttl <= 0 {
		return false, fmt.Errorf("%w: count and ttl must be positive", ErrBadRequest)
	}
	r := e.send(ctx, &op{name: "latch_create", script: scripts.LatchCreate, keys: []string{k.count, k.arrivals},
		args: []string{strconv.Itoa(count), ms(ttl)}}, nil)
	existed, other := 0, 0
	// Every answer counts (at most MasterTimeout): "created" means that
	// no quorum had it already, which the first quorum of answers alone
	// cannot tell.
	all := func(q, _ int, t *tally, final bool) verdict {
		switch {
		case final && t.yes >= q:
			return decidedYes
		case final && t.answered() >= q:
			return decidedNo
		case final:
			return noQuorum
		}
		return undecided
	}
	t := r.count(all, func(_ int, v any) bool {
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return false
		}
		st, _ := arr[0].(int64)
		c, _ := arr[1].(int64)
		switch st {
		case 0:
			existed++
		case -1:
			other = int(c)
			return false
		}
		return true
	})
	if other > 0 {
		return false, &LatchCountError{Name: name, Count: other}
	}
	if t.verdict != decidedYes {
		if err := t.err(e, "latch_create"); err != nil {
			return false, err
		}
		return false, fmt.Errorf("%w: unexpected latch_create answers", ErrNoQuorum)
	}
	return existed < e.quorum, nil
}

// latchRound counts a latch_down or latch_count round: the arrivals still
// missing as a quorum of masters sees them (the quorum-th smallest of the
// answers: a quorum of masters miss at most that many), ErrNoLatch when
// at least N - quorum + 1 masters do not have the latch, else a
// *QuorumError.
func (e *Engine) latchRound(r *round, opName string) (int, error) {
	var left []int
	missing := 0
	rule := func(q, n int, t *tally, final bool) verdict {
		switch {
		case t.yes >= q:
			return decidedYes
		case missing >= n-q+1:
			return decidedNo
		case final:
			return noQuorum
		}
		return undecided
	}
	t := r.count(rule, func(_ int, v any) bool {
		n, ok := v.(int64)
		switch {
		case !ok:
			return false
		case n < 0:
			missing++
			return false
		}
		left = append(left, int(n))
		return true
	})
	switch t.verdict {
	case decidedYes:
		slices.Sort(left)
		return left[e.quorum-1], nil
	case decidedNo:
		return 0, ErrNoLatch
	}
	return 0, t.err(e, opName)
}

// latchDown records one arrival, identified by token: the same token
// counts once, however often it is sent and through whichever proxy. It
// returns the arrivals still missing as a quorum sees them (0: open). The
// arrival that opens the latch wakes every LatchWait on any proxy.
func (e *Engine) latchDown(ctx context.Context, name, token string) (left int, err error) {
	k, err := e.latchKeys(name)
	if err != nil {
		return 0, err
	}
	if token == "" {
		return 0, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	r := e.send(ctx, &op{name: "latch_down", script: scripts.LatchDown, keys: []string{k.count, k.arrivals},
		args: []string{token, k.channel}}, nil)
	return e.latchRound(r, "latch_down")
}

// latchLeft returns the arrivals the latch still misses as a quorum
// sees them.
func (e *Engine) latchLeft(ctx context.Context, name string) (left int, err error) {
	k, err := e.latchKeys(name)
	if err != nil {
		return 0, err
	}
	return e.latchCount(ctx, k)
}

func (e *Engine) latchCount(ctx context.Context, k latchKeys) (int, error) {
	r := e.send(ctx, &op{name: "latch_count", script: scripts.LatchCount, keys: []string{k.count, k.arrivals}}, nil)
	return e.latchRound(r, "latch_count")
}

// latchWait waits up to wait until the latch is open on a quorum of
// masters: true when open, false when the wait ran out. A latch that does
// not exist (yet, or any more) is waited for like a closed one, so that a
// worker that starts before its coordinator created the latch waits for
// it; only with wait 0 (a check, not a wait) is it ErrNoLatch. Creating a
// latch never opens it (its count is at least 1), so the waiter needs no
// wake-up at creation: its tries, every retry delay, find the latch, and
// the arrival that opens it wakes the waiter as usual.
func (e *Engine) latchWait(ctx context.Context, name string, wait time.Duration) (open bool, err error) {
	k, err := e.latchKeys(name)
	if err != nil {
		return false, err
	}
	return retry(e, ctx, wait, []string{k.channel}, "", nil, func() (bool, step, error) {
		left, err := e.latchCount(ctx, k)
		switch {
		case err == nil && left == 0:
			return true, stepFinal, nil
		case errors.Is(err, ErrNoLatch) && wait <= 0:
			return false, stepFinal, err
		case errors.Is(err, ErrNoLatch):
			// Not created yet, or expired: wait for it as for a closed
			// latch; if the wait runs out it answers "not open".
			return false, stepWait, nil
		}
		return false, stepWait, err
	})
}
