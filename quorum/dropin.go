package quorum

import (
	"context"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// setNX is a drop-in SET NX's try: the keys it set are told apart from
// another caller's with the same value by an owner nonce.
type setNX struct{}

func (setNX) shape(e *Engine, ls *lockSet, acq *op, token string) try {
	owner := e.rnd.token()
	acq.script, acq.keys = scripts.LockAcquireNX, ls.nxKeys(e)
	acq.args = append(acq.args, owner)
	return try{owner: owner, distinct: true, undo: func() *op { return ls.unacquireNX(e, token, owner) }}
}

// deleteHeld removes exactly the grant that a quorum of masters holds on
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
func (e *Engine) deleteHeld(ctx context.Context, resource, value string) (held bool, err error) {
	t0 := e.now()
	ls, err := e.lockSet([]string{resource})
	if err != nil {
		return false, err
	}
	owner := ls.ownerKeys(e)[0]
	// A master that answers late (a busy machine, a paused master) is not
	// evidence either way: while the answers leave it open whether a
	// quorum holds the grant, or whether a quorum deleted it, the silent
	// masters are asked again, until releaseTimeout. Both scripts are
	// read-only or owner-checked, so asking again is safe.
	deadline := t0.Add(e.releaseTimeout())
	var v string
	var owners []string
	for {
		seen, silent, err := e.owners(ctx, ls, owner, value)
		if err != nil {
			return false, err
		}
		// The grant is one (value, owner nonce) pair: an Exclusive
		// acquire puts one nonce beside every key it sets, and keeps it as
		// long as the keys (Extend of a SetNX lease); other grants have none (""). An
		// attempt in progress with the same value has a nonce of its own
		// and is never taken for the grant, nor deleted with it.
		best := 0
		v, owners = "", nil
		for p, h := range seen {
			if h.masters > best {
				best, v, owners = h.masters, p.value, []string{p.owner}
			}
		}
		switch {
		case best >= e.quorum && v != "":
			// Held (by a writer: readers, "", are not a lock key's holder
			// that a delete ends).
		case best >= e.quorum || best+silent < e.quorum:
			return false, nil // not held on a quorum, whatever the silent say
		case e.now().Before(deadline) && e.pause(ctx):
			continue
		default:
			return false, &QuorumError{Op: "delete", Got: len(e.nodes) - silent, Need: e.quorum, Total: len(e.nodes)}
		}
		break
	}
	args := append([]string{v, ls.channels[0]}, owners...)
	keys := []string{ls.keys[0], ls.keys[1], ls.keys[2], owner, e.holdsKey(resource)}
	// deleted[i]: master i deleted the grant (any round's answer 1);
	// gone[i]: master i answered the first round that it did not hold it.
	// Only a first answer proves "not held": a resend finds nothing to
	// delete where the first request deleted the grant and its answer is
	// still on its way (a stalled proxy reads it after its count gave
	// up), so a resent 0 is no evidence either way (as in confirm).
	n := len(e.nodes)
	deleted, gone := make([]bool, n), make([]bool, n)
	var sent []*round
	read := func(k int, i int, v any) {
		switch {
		case v == int64(1):
			deleted[i] = true
		case k == 0:
			gone[i] = true
		}
	}
	for {
		d := e.send(ctx, &op{name: "delete", script: scripts.LockDeleteExact, keys: keys, args: args, timeout: e.releaseTimeout()}, nil)
		k := len(sent)
		sent = append(sent, d)
		// The answers are read in count's callback while the round goes
		// on, and once settled (answered) for earlier rounds' late ones.
		d.count(strictRule, func(i int, v any) bool {
			read(k, i, v)
			return v == int64(1)
		})
		for k, r := range sent {
			for i := range n {
				if r.answered(i) && r.ans[i].err == nil {
					read(k, i, r.ans[i].val)
				}
			}
		}
		yes, no := 0, 0
		for i := range n {
			switch {
			case deleted[i]:
				yes++
			case gone[i]:
				no++
			}
		}
		switch {
		case yes >= e.quorum:
			return true, nil
		case no >= n-e.quorum+1:
			return false, nil
		case e.now().Before(deadline) && e.pause(ctx):
			continue
		}
		return false, &QuorumError{Op: "delete", Got: yes + no, Need: e.quorum, Total: n}
	}
}

// grantID is one grant at a lock key: its value and owner nonce ("" for
// none).
type grantID struct{ value, owner string }

// holding is how many masters hold one grant.
type holding struct{ masters int }

// owners reads every master's value and owner nonce at a lock key (only
// value, when value is not ""), and how many masters did not answer.
func (e *Engine) owners(ctx context.Context, ls *lockSet, owner, value string) (map[grantID]*holding, int, error) {
	r := e.send(ctx, &op{name: "delete", script: scripts.LockOwner, keys: []string{ls.keys[0], owner}}, nil)
	t := r.count(func(q, _ int, t *tally, final bool) verdict {
		if final {
			return decidedYes
		}
		return undecided
	}, func(_ int, v any) bool { arr, ok := v.([]any); return ok && len(arr) == 2 })
	seen := map[grantID]*holding{}
	silent := 0
	for i, c := range t.counted {
		if !c {
			silent++
			continue
		}
		arr := r.ans[i].val.([]any)
		v, ok := arr[0].(string)
		if !ok || (value != "" && v != value) {
			continue
		}
		o, _ := arr[1].(string)
		id := grantID{v, o}
		h := seen[id]
		if h == nil {
			h = &holding{}
			seen[id] = h
		}
		h.masters++
	}
	return seen, silent, nil
}

// pause waits a little before asking silent masters again (a master that
// is down fails at once: no tight loop), and reports whether ctx lives.
func (e *Engine) pause(ctx context.Context) bool {
	t := e.clock.NewTimer(e.opts.MasterTimeout / 4)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
