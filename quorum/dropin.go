package quorum

import (
	"context"
	"slices"
	"time"
)

// DeleteHeld removes exactly the grant that a quorum of masters holds on
// resource (drop-in mode's DEL, DELIFEQ and release scripts), in two
// rounds: it asks every master who holds the lock key (its value and the
// owner nonce an Exclusive acquire put beside it), and then deletes, on
// each master, only a key that still holds that value with one of the
// owner nonces seen with it.
//
// Why two rounds: one Redis runs "SET lock 1 NX" and "DEL lock" one after
// the other, but a delete sent to N masters may land on one of them late,
// after the lock was released and taken again, with the same value when
// clients lock with a constant. An unconditional or value-checked delete
// would then remove the new holder's key there, and a few such stragglers
// leave it on fewer than a quorum while it believes it holds the lock. The
// owner nonce is unique per grant, so a late delete changes nothing.
//
// value "" deletes whatever value a quorum holds (DEL); otherwise only that
// value (a compare-and-delete). A grant that a quorum does not hold is not
// touched: its keys may be an acquire still in progress, which a delete
// must not cut to fewer than a quorum after it was granted; remnants
// expire with their ttl.
//
// It reports true when a quorum held the grant and deleted it, false when
// no quorum held it (or enough masters answered that they no longer did),
// and a *QuorumError when the answers decide neither.
func (e *Engine) DeleteHeld(ctx context.Context, resource, value string) (held bool, err error) {
	t0 := time.Now()
	defer func() { e.observe("delete", t0, held, err) }()
	ls, err := e.lockSet([]string{resource})
	if err != nil {
		return false, err
	}
	owner := ls.ownerKeys(e)[0]
	r := e.send(ctx, &op{name: "delete", script: "lock_owner", keys: []string{ls.keys[0], owner}}, nil)
	t := r.count(func(q, _ int, t *tally, final bool) verdict {
		switch {
		case final && t.yes >= q:
			return decidedYes
		case final:
			return noQuorum
		}
		return undecided
	}, func(_ int, v any) bool { arr, ok := v.([]any); return ok && len(arr) == 2 }, -1)
	if t.verdict != decidedYes {
		return false, t.err(e, "delete")
	}
	type holding struct {
		masters int
		owners  []string
	}
	seen := map[string]*holding{}
	for i, c := range t.counted {
		if !c {
			continue
		}
		arr := r.ans[i].val.([]any)
		v, ok := arr[0].(string)
		if !ok || (value != "" && v != value) {
			continue
		}
		o, _ := arr[1].(string)
		h := seen[v]
		if h == nil {
			h = &holding{}
			seen[v] = h
		}
		h.masters++
		if !slices.Contains(h.owners, o) {
			h.owners = append(h.owners, o)
		}
	}
	var v string
	var h *holding
	for val, x := range seen {
		if x.masters >= e.quorum {
			v, h = val, x
		}
	}
	if h == nil || v == "" {
		// Not held on a quorum (or held by readers, which a delete of the
		// lock key does not end).
		return false, nil
	}
	args := append([]string{v, ls.channels[0]}, h.owners...)
	keys := []string{ls.keys[0], ls.keys[1], ls.keys[2], owner}
	d := e.send(ctx, &op{name: "delete", script: "lock_delete_exact", keys: keys, args: args, timeout: e.releaseTimeout()}, nil)
	dt := d.count(strictRule, func(_ int, v any) bool { return v == int64(1) }, e.straggleGrace())
	if dt.verdict == decidedYes {
		return true, nil
	}
	return false, dt.err(e, "delete")
}
