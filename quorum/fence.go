package quorum

import (
	"context"
	"sync/atomic"
)

// proposals hands out fence proposals, each greater than every earlier
// one and than every fence or master sequence this engine has seen. A
// master gives an acquisition the proposal unless its own state demands a
// higher value, so that masters agree on the fence in the usual case and
// a grant takes one round (see docs/design/fencing.md).
type proposals struct{ last atomic.Uint64 }

// next returns a fresh proposal.
func (p *proposals) next() uint64 { return p.last.Add(1) }

// learn makes every later proposal greater than v.
func (p *proposals) learn(v uint64) {
	for {
		cur := p.last.Load()
		if v <= cur || p.last.CompareAndSwap(cur, v) {
			return
		}
	}
}

// high is at least every fence this engine issued or saw.
func (p *proposals) high() uint64 { return p.last.Load() }

// spread makes a value chosen from round r's answers (a fence: the highest
// that any acquiring master gave) held by a quorum of masters, for
// primitives whose safety needs that value on a quorum.
//
//   - holds(i) reports whether master i's answer in r already was the
//     value, written in the same atomic step as the acquisition;
//   - mayHold(i) whether master i may hold the acquisition (it did not
//     answer "taken");
//   - trusted(i) whether master i's vote may count at all (not tainted);
//   - wb is the write-back, a script answering 1 when it wrote the value
//     while the acquisition still held.
//
// Masters that counted in r and hold the value are not asked again. Every
// other master that may hold the acquisition, stragglers included, gets
// wb once its request in r returned: the more masters hold the value, the
// better it survives restarts. The write-backs outlive the call. The tally
// decides with the grant rule: a quorum of holders, or refused. The
// write-back round is returned too, for a request that must follow it.
func (e *Engine) spread(ctx context.Context, r *round, counted []bool, holds, mayHold, trusted func(i int) bool, wb *op) (*tally, *round) {
	yes, no := answer{val: int64(1)}, answer{val: int64(0)}
	fr := e.follow(ctx, r, wb, nil, func(i int) (answer, bool) {
		switch {
		case counted[i] && holds(i):
			return yes, true
		case !mayHold(i):
			return no, true // it answered: taken
		case holds(i) && trusted(i):
			return yes, true // a straggler that holds it
		}
		return answer{}, false
	})
	return fr.count(grantRule, func(i int, v any) bool { return v == int64(1) && trusted(i) }), fr
}
