package quorum

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// waitingKey names the set of calls waiting for what channel announces
// (see docs/design/waiters.md): one per resource, whatever the
// primitive, as each primitive has one release channel per resource.
func (e *Engine) waitingKey(channel string) string {
	rest := strings.TrimPrefix(channel, e.opts.MetaPrefix)
	anchor := channel
	if r, ok := strings.CutPrefix(rest, "released:"); ok {
		anchor = e.opts.KeyPrefix + r // a lock's: in its lock key's slot
	}
	return e.meta(anchor, "waiting:"+rest)
}

// waitCount is one waiting call's entry in the waiting sets of what it
// waits for (see docs/design/waiters.md).
type waitCount struct {
	e        *Engine
	keys     []string
	id       string
	deadline time.Time
	at       time.Time // when the entry was last written
	last     *round    // that write
}

// countWait counts a call that waits until deadline (retry calls it
// once the call's first try was refused, before it tries again) in the
// waiting sets of channels on every
// // master that is up, without waiting for the masters. The entry lives until
// the deadline or Options.WaiterLife, whichever comes first, so that a
// proxy that dies leaves nothing counted for longer than a fair waiter it
// had queued; refresh renews it, leave ends it.
func (e *Engine) countWait(ctx context.Context, channels []string, deadline time.Time) *waitCount {
	wc := &waitCount{e: e, keys: make([]string, len(channels)), id: e.rnd.token(), deadline: deadline}
	for i, c := range channels {
		wc.keys[i] = e.waitingKey(c)
	}
	wc.write(ctx)
	return wc
}

func (wc *waitCount) write(ctx context.Context) {
	life := min(wc.e.until(wc.deadline), wc.e.opts.WaiterLife)
	if life <= 0 || len(wc.keys) == 0 {
		return
	}
	wc.at = wc.e.now()
	wc.last = wc.e.follow(ctx, wc.last, &op{name: "wait_mark", script: scripts.WaitMark, keys: wc.keys, args: []string{wc.id, ms(life)}, report: true}, nil, nil)
}

// refresh renews the entry once half its life has passed.
func (wc *waitCount) refresh(ctx context.Context) {
	if wc.e.since(wc.at) > wc.e.opts.WaiterLife/2 {
		wc.write(ctx)
	}
}

// leave takes the entry out (after its writes, on each master's ordered
// connection).
func (wc *waitCount) leave(ctx context.Context) {
	if wc.last == nil {
		return // never written
	}
	wc.e.follow(ctx, wc.last, &op{name: "wait_mark", script: scripts.WaitMark, keys: wc.keys, args: []string{wc.id, "0"}, report: true}, nil, nil)
}

// waiters reads how many calls wait for what channel announces, and
// where the fair waiter id stands in queue (a fair lock's; id "" for
// none): the count a quorum of masters record at least, and the place
// (1 is the head; 0 when not queued on a quorum) counting only the
// waiters ahead that a quorum of masters queue.
func (e *Engine) waiters(ctx context.Context, channel string, queue [2]string, id string) (n, place int, err error) {
	keys := []string{e.waitingKey(channel)}
	if queue[0] != "" {
		keys = append(keys, queue[0], queue[1])
	}
	r := e.send(ctx, &op{name: "wait_info", script: scripts.WaitInfo, keys: keys, args: []string{id}}, nil)
	t := r.count(everyAnswer, func(_ int, v any) bool { arr, ok := v.([]any); return ok && len(arr) >= 2 })
	if t.verdict != decidedYes {
		return 0, 0, t.err(e, "wait_info")
	}
	var counts []int
	queued := 0
	ahead := map[string]int{}
	for i, c := range t.counted {
		if !c {
			continue
		}
		arr := r.ans[i].val.([]any)
		k, _ := arr[0].(int64)
		counts = append(counts, int(k))
		if q, _ := arr[1].(int64); q == 1 {
			queued++
		}
		for _, v := range arr[2:] {
			if s, ok := v.(string); ok {
				ahead[s]++
			}
		}
	}
	slices.Sort(counts)
	if len(counts) >= e.quorum {
		n = counts[len(counts)-e.quorum]
	}
	if queued >= e.quorum {
		place = 1
		for _, c := range ahead {
			if c >= e.quorum {
				place++
			}
		}
	}
	return n, place, nil
}

// Waiters reports how many calls wait for the resource name of primitive
// p, on any proxy (see docs/design/waiters.md), and, for a lock
// with token, where the fair-lock waiter queued with that token stands
// (1: next; 0: not queued). Fewer than a quorum of answers is a
// *QuorumError.
func (o Operator) Waiters(ctx context.Context, p Primitive, name, token string) (n, place int, err error) {
	e := o.e
	var channel string
	var queue [2]string
	switch p {
	case "", Lock, Fair, Read, SetNX:
		ls, err := e.lockSet([]string{name})
		if err != nil {
			return 0, 0, err
		}
		channel = ls.channels[0]
		if token != "" {
			queue = e.fairKeys(name)
		}
	case Semaphore:
		k, err := e.semKeys(name)
		if err != nil {
			return 0, 0, err
		}
		channel = k.channel
	case Latch:
		k, err := e.latchKeys(name)
		if err != nil {
			return 0, 0, err
		}
		channel = k.channel
	case Election:
		ls, err := e.electSet(name)
		if err != nil {
			return 0, 0, err
		}
		channel = ls.channels[0]
	default:
		return 0, 0, fmt.Errorf("%w: unknown primitive %q", ErrBadRequest, p)
	}
	return e.waiters(ctx, channel, queue, token)
}
