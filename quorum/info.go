package quorum

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// Info is what a quorum of masters say about a resource (Engine.Info).
type Info struct {
	// Count is a semaphore's permits with a live grant, or a latch's
	// arrivals still missing; 0 for locks.
	Count int
	// Held: a quorum of masters hold the lock key with the same holder (a
	// writer's token, or readers).
	Held bool
	// Readers is set when readers hold it: the tokens that a quorum of
	// masters record as live readers.
	Readers []string
	// Holder is the writer's token (empty for readers or when not held).
	Holder string
	// TTL is how long a quorum still holds it: the quorum-th longest
	// remaining ttl among the masters that hold it.
	TTL time.Duration
	// Fence is the highest fence the holding masters record for the
	// resource (0 when unknown, e.g. readers); an election's term.
	Fence uint64
	// Value is an election's advertised value.
	Value string
	// Holds is how many holds a writer's lock counts: the re-entrant
	// holds a quorum of masters record, 1 for a lock taken without
	// REENTRANT; 0 when not held by a writer.
	Holds int
}

// Mine reports whether token holds the resource: as its writer, or as one
// of its readers.
func (li *Info) Mine(token string) bool {
	return li.Held && token != "" && (li.Holder == token || slices.Contains(li.Readers, token))
}

// lockInfo asks every master what it holds for resource and reports what
// a quorum agrees on. Fewer than a quorum of answers is a *QuorumError.
func (e *Engine) lockInfo(ctx context.Context, resource string) (info *Info, err error) {
	ls, err := e.lockSet([]string{resource})
	if err != nil {
		return nil, err
	}
	k := e.rwKeys(resource)
	r := e.send(ctx, &op{name: "lock_info", script: scripts.LockInfo, keys: []string{ls.keys[0], ls.keys[1], k.readers, e.holdsKey(resource)}}, nil)
	// Every answer counts: wait (at most MasterTimeout) for all of them.
	t := r.count(everyAnswer, func(_ int, v any) bool { arr, ok := v.([]any); return ok && len(arr) >= 3 })
	if t.verdict != decidedYes {
		return nil, t.err(e, "lock_info")
	}
	type holding struct {
		ttls   []time.Duration
		fence  uint64
		counts map[string]int // readers, or a writer's "id order" holds
	}
	holders := map[string]*holding{}
	for i, c := range t.counted {
		if !c {
			continue
		}
		arr := r.ans[i].val.([]any)
		v, ok := arr[0].(string)
		if !ok {
			continue // free on this master
		}
		h := holders[v]
		if h == nil {
			h = &holding{counts: map[string]int{}}
			holders[v] = h
		}
		pttl, _ := arr[1].(int64)
		h.ttls = append(h.ttls, time.Duration(pttl)*time.Millisecond)
		if f, ok := arr[2].(int64); ok {
			h.fence = max(h.fence, uint64(f))
		}
		if v == "" {
			for _, rd := range arr[3:] {
				if tok, ok := rd.(string); ok {
					h.counts[tok]++
				}
			}
			continue
		}
		for j := 3; j+1 < len(arr); j += 2 {
			id, ok1 := arr[j].(string)
			order, ok2 := arr[j+1].(string)
			if ok1 && ok2 {
				h.counts[id+" "+order]++
			}
		}
	}
	info = &Info{TTL: -1}
	for v, h := range holders {
		if len(h.ttls) < e.quorum {
			continue
		}
		slices.Sort(h.ttls)
		info.Held = true
		info.TTL = h.ttls[len(h.ttls)-e.quorum]
		if v == "" {
			info.Readers = []string{}
			for tok, n := range h.counts {
				if n >= e.quorum {
					info.Readers = append(info.Readers, tok)
				}
			}
			slices.Sort(info.Readers)
			continue
		}
		info.Holder = v
		info.Fence = h.fence
		info.Holds = 0
		for _, c := range h.counts { // "id order" (see lock_info)
			if c >= e.quorum {
				info.Holds++
			}
		}
		info.Holds = max(info.Holds, 1)
	}
	return info, nil
}

// String is for logs and tests.
func (li *Info) String() string {
	return fmt.Sprintf("held=%v holder=%q readers=%v ttl=%v fence=%d", li.Held, li.Holder, li.Readers, li.TTL, li.Fence)
}

// Break deletes the lock on resource on every master whatever holds it
// (RLOCKBREAK: an operator's, by names who for the log): a writer's grant
// or the readers, with the release announcement. The fence goes on from
// above the broken grant's, so its fence is stale to any fenced store;
// the broken lease is never taken again by its own extensions (a break
// mark lists its token for Options.MaxTTL, or as long as the grant had
// left if longer: lock_reenrol, rw_reenrol),
// so an extension finds it lost: a connection that keeps it alive
// (AUTOEXTEND) is told at its next extension. It reports true when a
// quorum of masters held a lock there; fewer than a quorum of answers is
// a *QuorumError (the break then stands where it landed: repeat it).
func (o Operator) Break(ctx context.Context, resource, by string) (held bool, err error) {
	e := o.e
	defer e.observe("lock_break", e.now(), func() bool { return held }, &err)
	ls, err := e.lockSet([]string{resource})
	if err != nil {
		return false, err
	}
	k := e.rwKeys(resource)
	// The mark outlives every lease the break may have broken: its own
	// ttl, and the longest any lease may have (the last extension before
	// the break may have set its validity that far), with the drift.
	life := e.opts.MaxTTL + time.Duration(float64(e.opts.MaxTTL)*e.opts.DriftFactor) + time.Second
	r := e.send(ctx, &op{name: "lock_break", script: scripts.LockBreak,
		keys: []string{ls.keys[0], ls.keys[1], k.readers, k.owner, ls.keys[2], e.brokenKey(resource), e.holdsKey(resource)}, args: []string{ls.channels[0], ms(life)},
		timeout: e.releaseTimeout()}, nil)
	holders := map[string]int{}
	t := r.count(everyAnswer, func(_ int, v any) bool {
		arr, ok := v.([]any)
		if ok && len(arr) == 2 && arr[0] == int64(1) {
			h, _ := arr[1].(string)
			holders[h]++
		}
		return ok
	})
	if t.verdict != decidedYes {
		return false, t.err(e, "lock_break")
	}
	for h, n := range holders {
		if n >= e.quorum {
			held = true
			kind := "a writer" // its token is a secret: not logged
			if h == "" {
				kind = "readers"
			}
			e.log.Warn("LOCK BROKEN BY AN OPERATOR: its holder is told at its next extension or release; its fence is stale",
				"resource", resource, "holder", kind, "by", by)
		}
	}
	if !held {
		e.log.Info("lock break: no lock held on a quorum", "resource", resource, "by", by)
	}
	return held, nil
}

// Delete removes the lock keys of resources whatever token holds them
// (drop-in mode's DEL and UNLINK), on every master, with the release
// announcement. It returns how many of them a quorum of masters held;
// fewer than a quorum of answers is a *QuorumError.
func (o Operator) Delete(ctx context.Context, resources []string) (n int, err error) {
	e := o.e
	defer e.observe("delete", e.now(), func() bool { return err == nil }, &err)
	if len(resources) == 0 {
		return 0, fmt.Errorf("%w: no resources", ErrBadRequest)
	}
	counts := make([]int, len(resources))
	// One key at a time: the answers are per resource, in the given order.
	rounds := make([]*round, len(resources))
	for j, r := range resources {
		ls, err := e.lockSet([]string{r})
		if err != nil {
			return 0, err
		}
		rounds[j] = e.send(ctx, &op{name: "delete", script: scripts.LockDelete, keys: ls.releaseKeys(), args: ls.channels,
			timeout: e.releaseTimeout()}, nil)
	}
	for j, r := range rounds {
		t := r.count(func(q, _ int, t *tally, final bool) verdict {
			switch {
			case final && t.answered() >= q:
				return decidedYes
			case final:
				return noQuorum
			}
			return undecided
		}, func(_ int, v any) bool {
			arr, ok := v.([]any)
			if ok && len(arr) == 1 && arr[0] == int64(1) {
				counts[j]++
			}
			return ok
		})
		if t.verdict != decidedYes {
			return 0, t.err(e, "delete")
		}
	}
	for _, c := range counts {
		if c >= e.quorum {
			n++
		}
	}
	return n, nil
}
