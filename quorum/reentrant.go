package quorum

import (
	"context"
	"strconv"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// reentrantHold is a re-entrant lock's try (RLOCK ... REENTRANT): it takes
// one hold of the token's lock (lock_hold). The hold id tells this try's
// hold apart from the token's others: its rollback takes away only it,
// and no vote is ambiguous (no taint).
type reentrantHold struct{}

func (reentrantHold) shape(e *Engine, ls *lockSet, acq *op, token string) try {
	hold := e.rnd.token()
	n := ls.n
	acq.script = scripts.LockHold
	acq.keys = append(ls.acquireKeys[:2*n+3:2*n+3], e.holdsKey(ls.given[0]))
	acq.args = append(acq.args, hold, strconv.FormatInt(e.now().UnixMicro(), 10), strconv.Itoa(e.opts.MaxHolds))
	return try{hold: hold, distinct: true, undo: func() *op { return e.unhold(ls, token, hold, false) }}
}

// unhold is lock_unhold: it takes the re-entrant hold away from ls (one
// resource) held with token; last releases the lock whatever holds are
// left, with its announcement (see docs/design/reentrant.md).
func (e *Engine) unhold(ls *lockSet, token, hold string, last bool) *op {
	args := []string{token, hold, "0"}
	if last {
		args = []string{token, hold, "1", ls.channels[0]}
	}
	return &op{name: "unlock", script: scripts.LockUnhold, keys: []string{ls.keys[0], ls.keys[1], ls.keys[2], e.holdsKey(ls.given[0]), e.rwKeys(ls.given[0]).readers}, args: args}
}

// holdsOf is the holds in a release's answer from a master where the
// token holds a re-entrant lock ({-1, ms left, hold id, order, ...}): each
// hold id's order; nil for any other answer.
func holdsOf(v any) map[string]string {
	a, ok := v.([]any)
	if !ok || len(a) < 2 || a[0] != int64(-1) {
		return nil
	}
	out := make(map[string]string, (len(a)-2)/2)
	for j := 2; j+1 < len(a); j += 2 {
		id, _ := a[j].(string)
		order, _ := a[j+1].(string)
		out[id] = order
	}
	return out
}

// heldHolds reads the re-entrant holds of ls's one resource from the
// masters that answered the extension r as holding it with token, and
// returns those that a quorum of masters record, each id then its order.
// known is false when some of them record holds but fewer than a quorum
// answered the read as holding it with token: then which holds a quorum
// records is not known. When those that answered record none, the lock
// is a plain one (every master that takes a re-entrant lock takes a hold
// with it): known, with no holds. The masters
// asked hold the lock and answered just now: the read waits for them
// only, never for a master that is down.
func (e *Engine) heldHolds(ctx context.Context, ls *lockSet, token string, r *round) (holds []string, known bool) {
	holders := make([]bool, len(e.nodes))
	n := 0
	for i := range e.nodes {
		if r.answered(i) && r.ans[i].err == nil && r.ans[i].val == int64(1) {
			holders[i], n = true, n+1
		}
	}
	if n == 0 {
		return nil, false
	}
	k := e.rwKeys(ls.given[0])
	notAsked := answer{err: errSkippedDown}
	q := e.follow(ctx, nil, &op{name: "extend", script: scripts.LockInfo, keys: []string{ls.keys[0], ls.keys[1], k.readers, e.holdsKey(ls.given[0])}}, nil,
		func(i int) (answer, bool) { return notAsked, !holders[i] })
	<-q.all
	count := map[[2]string]int{}
	read := 0
	for i := range e.nodes {
		arr, ok := q.ans[i].val.([]any)
		if !holders[i] || q.ans[i].err != nil || !ok || len(arr) < 3 || arr[0] != token {
			continue
		}
		read++
		for j := 3; j+1 < len(arr); j += 2 {
			id, ok1 := arr[j].(string)
			order, ok2 := arr[j+1].(string)
			if ok1 && ok2 {
				count[[2]string{id, order}]++
			}
		}
	}
	if read == 0 || read < e.quorum && len(count) > 0 {
		return nil, false
	}
	for h, c := range count {
		if c >= e.quorum {
			holds = append(holds, h[0], h[1])
		}
	}
	return holds, true
}
