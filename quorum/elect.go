package quorum

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// ElectionOptions are an election's own request options.
type ElectionOptions struct {
	// Value is what the leader advertises, at most MaxElectValue bytes.
	Value string
}

// For implements PrimitiveOptions.
func (ElectionOptions) For() Primitive { return Election }

// Elections holds the election's own verbs, beside the lease verbs every
// primitive has: a leader's proclamation and an observer's watch.
type Elections struct{ e *Engine }

// Elections returns the election's own verbs.
func (e *Engine) Elections() Elections { return Elections{e} }

// MaxElectValue is the longest value a leader may advertise, in bytes.
const MaxElectValue = 4096

// electSet names an election's keys: a lock set of one resource whose lock
// and fence keys live under the meta prefix (an election never meets a
// lock of the same name), its advertisement, and its change channel,
// where resignations, won campaigns and proclamations are announced (see
// docs/design/election.md).
// electKeys are an election's keys: its lock's, and its advertisement,
// which a campaign sets to (token, value) with the lock.
type electKeys struct {
	*lockSet
	advert string
}

// campaign is an election's try: the lock, advertising value.
type campaign struct {
	ek    *electKeys
	value string
}

func (c campaign) shape(_ *Engine, ls *lockSet, acq *op, token string) try {
	acq.script = scripts.ElectCampaign
	acq.keys = append(ls.acquireKeys[:len(ls.acquireKeys):len(ls.acquireKeys)], c.ek.advert)
	acq.args = append(acq.args, c.value)
	return try{undo: func() *op { return c.ek.resign(token, false) }}
}

func (e *Engine) electSet(name string) (*electKeys, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty election name", ErrBadRequest)
	}
	// Every key of an election lives in the slot of its channel.
	ch := e.opts.MetaPrefix + "elect-changed:" + name
	ls := &lockSet{given: []string{name}, pos: []int{0}, n: 1,
		keys:     []string{e.meta(ch, "elect:"+name), e.meta(ch, "elect-fence:"+name), "", ""},
		channels: []string{ch},
		lease:    e.leaseKey(ch),
	}
	ls.keys[2], ls.keys[3] = e.fenceKeys(ch)
	ls.acquireKeys = append(append(make([]string, 0, 5), ls.keys...), ls.lease)
	return &electKeys{lockSet: ls, advert: e.meta(ch, "elect-value:"+name)}, nil
}

// resign is elect_resign for token; announce says whether the release is
// announced on the change channel (a resignation, not a rollback).
func (ls *electKeys) resign(token string, announce bool) *op {
	args := []string{token}
	if announce {
		args = append(args, ls.channels...)
	}
	keys := append(append(make([]string, 0, 4), ls.releaseKeys()...), ls.advert)
	return &op{name: "resign", script: scripts.ElectResign, keys: keys, args: args}
}

// electAcquire is a campaign: the election's lock, advertising req.electOptions().Value,
// through the one acquire loop (woken by resignations on any proxy). A
// won campaign is announced, so that observers on every proxy read the
// new leader at once.
func (e *Engine) electAcquire(ctx context.Context, req Request) (*Lease, error) {
	ls, err := e.electSet(req.resource())
	if err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	if len(req.electOptions().Value) > MaxElectValue {
		return nil, fmt.Errorf("%w: value longer than %d bytes", ErrBadRequest, MaxElectValue)
	}
	fl := campaign{ek: ls, value: req.electOptions().Value}
	lease, err := e.acquireLoop(ctx, req, waiting{channels: ls.channels}, func(token string, tainted *taints, fixed bool) (*Lease, func(), error) {
		l, rollback, err := e.attempt(ctx, ls.lockSet, fl, token, req.TTL, tainted, fixed)
		if l == nil {
			return l, rollback, err
		}
		// The term is the lease's fence; masters may hold other fences
		// (a straggler's own), so the term itself is recorded in the
		// advertisement, on a quorum, before the campaign is won: every
		// reader then reports this very term.
		r := e.send(ctx, &op{name: "campaign", script: scripts.ElectTerm, keys: []string{ls.keys[0], ls.advert},
			args: []string{token, strconv.FormatUint(l.Fences[0], 10)}}, nil)
		t := r.count(strictRule, func(_ int, v any) bool { return v == int64(1) })
		if t.verdict != decidedYes {
			rollback()
			return nil, nil, t.err(e, "campaign")
		}
		l.Validity = e.validity(req.TTL, l.Start, e.now())
		l.Decided = e.now()
		if l.Validity <= 0 {
			rollback()
			return nil, nil, nil
		}
		return l, rollback, nil
	})
	if lease != nil {
		e.announce(ctx, ls)
	}
	return lease, err
}

// announce tells every master's subscribers of the election's change
// channel that it changed; nobody waits for the answers. The message "0:"
// wakes no campaigner (Wakeups.Notify), only observers.
func (e *Engine) announce(ctx context.Context, ls *electKeys) {
	e.send(ctx, &op{name: "announce", script: scripts.BusPublish, args: []string{ls.channels[0], "0:" + e.rnd.token()}}, nil)
}

// electRelease resigns: the lock's release rule (1 held on a quorum up to
// the release, 0 not held on N - quorum + 1, else no quorum, asked again
// as releases are), announced to campaigners and observers.
func (e *Engine) electRelease(ctx context.Context, l *Lease) (bool, error) {
	t0 := e.now()
	ls, err := e.electSet(l.resource())
	if err != nil {
		return false, err
	}
	if l.Token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	e.awaitForRelease(l.Token)
	o := ls.resign(l.Token, true)
	o.timeout, o.keepLate = e.releaseTimeout(), true
	r := e.send(ctx, o, nil)
	t := r.count(strictRule, func(_ int, v any) bool { return v == int64(1) })
	if t.verdict == noQuorum && e.retryReleases() {
		return e.confirm(ctx, r, lockGroup(1), true, "resign", t0.Add(e.opts.ReleaseRetry), nil, nil)
	}
	return t.verdict == decidedYes, t.err(e, "resign")
}

// electExtend extends a leadership and its advertisement where the token
// holds the lock key (the lock's extension rule).
func (e *Engine) electExtend(ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
	ls, err := e.electSet(l.resource())
	if err != nil {
		return 0, err
	}
	keys := []string{ls.keys[0], ls.keys[1], ls.lease, ls.advert}
	return e.extendWith(ctx, ls.lockSet, l.Token, ttl, scripts.ElectExtend, keys, nil, time.Time{})
}

// electAbandon gives back a leadership nobody saw, unannounced.
func (e *Engine) electAbandon(ctx context.Context, l *Lease) {
	ls, err := e.electSet(l.resource())
	if err != nil {
		return
	}
	e.awaitForRelease(l.Token)
	u := ls.resign(l.Token, false)
	u.timeout = e.releaseTimeout()
	e.send(ctx, u, nil)
}

// electLeader reads the election as a quorum agrees: the first leader
// (token, term, value) that a quorum of answers share, or "nobody leads"
// when a quorum say the lock key is free; it decides as soon as one does,
// so that a slow master does not hold it up. Neither within the round is
// a *QuorumError. Info.Holder is the leader's token, Fence its term,
// Value its value and TTL the shortest remaining ttl of that quorum.
func (e *Engine) electLeader(ctx context.Context, name string) (*Info, error) {
	return e.readLeader(ctx, name, -1)
}

// readLeader is electLeader; with patience >= 0 it gives up (no quorum)
// once a quorum answered without agreeing and patience passed since, not
// waiting out a silent master's timeout: an observer reads again at once
// instead, so that a change in flight while a master is paused does not
// hold its next read up for master_timeout.
func (e *Engine) readLeader(ctx context.Context, name string, patience time.Duration) (*Info, error) {
	ls, err := e.electSet(name)
	if err != nil {
		return nil, err
	}
	r := e.send(ctx, &op{name: "leader", script: scripts.ElectLeader, keys: []string{ls.keys[0], ls.advert}}, nil)
	type view struct {
		n     int
		ttl   time.Duration
		fence uint64
	}
	views := map[[3]string]*view{}
	var agreed *[3]string
	yes := func(_ int, v any) bool {
		arr, ok := v.([]any)
		if !ok || len(arr) != 4 {
			return false
		}
		holder, held := arr[0].(string)
		value, _ := arr[3].(string)
		term, _ := arr[2].(int64)
		if !held {
			value = ""
		} else if _, ok := arr[3].(string); !ok || term <= 0 {
			// Held, but the advertisement is missing, another
			// token's, or without its term yet: this master's view is
			// no leader's whole.
			value = "\x00"
		}
		k := [3]string{holder, value, strconv.FormatInt(term, 10)}
		vw := views[k]
		if vw == nil {
			vw = &view{ttl: -1}
			views[k] = vw
		}
		vw.n++
		if held {
			pttl, _ := arr[1].(int64)
			d := time.Duration(pttl) * time.Millisecond
			if vw.ttl < 0 || d < vw.ttl {
				vw.ttl = d
			}
			vw.fence = uint64(term)
		}
		if vw.n >= e.quorum && agreed == nil && (!held || value != "\x00") {
			agreed = &k
		}
		return true
	}
	rule := func(_, _ int, _ *tally, final bool) verdict {
		switch {
		case agreed != nil:
			return decidedYes
		case final:
			return noQuorum
		}
		return undecided
	}
	var t *tally
	if patience < 0 {
		t = r.count(rule, yes)
	} else {
		t = r.countPatient(rule, yes, patience)
	}
	if t.verdict != decidedYes {
		if t.answered() >= e.quorum {
			// Enough answers, no quorum of them agree: Got is the
			// largest group that does.
			most := 0
			for _, vw := range views {
				most = max(most, vw.n)
			}
			return nil, &QuorumError{Op: "leader", Got: most, Need: e.quorum, Total: len(e.nodes), Errs: append(t.errs, fmt.Errorf("%d masters answered, at most %d of them agree", t.answered(), most))}
		}
		return nil, t.err(e, "leader")
	}
	k := *agreed
	if k[0] == "" && views[k].ttl < 0 {
		return &Info{TTL: -1}, nil
	}
	vw := views[k]
	return &Info{Held: true, Holder: k[0], Value: k[1], Fence: vw.fence, TTL: vw.ttl}, nil
}

// Proclaim sets the value that the leader holding token advertises for
// election: true when the token holds the election on a quorum and the
// value is set there, false when at least N - quorum + 1 masters say it
// does not lead, a *QuorumError when the answers decide neither. A
// proclamation is announced to the observers on every proxy.
func (el Elections) Proclaim(ctx context.Context, election, token, value string) (ok bool, err error) {
	e := el.e
	defer e.observe("proclaim", e.now(), func() bool { return ok }, &err)
	ls, err := e.electSet(election)
	if err != nil {
		return false, err
	}
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	if len(value) > MaxElectValue {
		return false, fmt.Errorf("%w: value longer than %d bytes", ErrBadRequest, MaxElectValue)
	}
	e.awaitAcquires(token)
	r := e.send(ctx, &op{name: "proclaim", script: scripts.ElectProclaim, keys: []string{ls.keys[0], ls.advert}, args: []string{token, value}}, nil)
	t := r.count(strictRule, func(_ int, v any) bool { return v == int64(1) })
	if t.verdict == decidedYes {
		e.announce(ctx, ls)
	}
	return t.verdict == decidedYes, t.err(e, "proclaim")
}

// Watch reads election as a quorum agrees (as Info does) and
// calls f with it (Held false: nobody leads), at once and again whenever
// a change is announced through any proxy (a campaign won, a
// proclamation, a resignation), when the leader's ttl runs out, and at
// least every second; it returns when f returns true, or with ctx's
// error. A read without a quorum is given to f as its error (info nil)
// and retried after the retry delay. f runs on the watching goroutine.
func (el Elections) Watch(ctx context.Context, election string, f func(*Info, error) bool) error {
	e := el.e
	ls, err := e.electSet(election)
	if err != nil {
		return err
	}
	wt := e.wake.watchAll(ls.channels, e.nodes, e.clock)
	defer wt.close()
	wt.ready(ctx, e.opts.MasterTimeout, 0)
	timer := e.clock.NewTimer(0)
	defer timer.Stop()
	<-timer.C()
	for {
		info, err := e.readLeader(ctx, election, max(e.opts.MasterTimeout/5, time.Millisecond))
		if ctx.Err() == nil && f(info, err) {
			return nil
		}
		// A read without a quorum of agreeing answers is usually a change
		// in flight (a proclamation half applied, keys expiring one
		// master after another): read again soon.
		next := max(e.opts.MasterTimeout/5, time.Millisecond)
		if err == nil {
			next = time.Second
			if info.Held {
				next = min(next, info.TTL+time.Millisecond)
			}
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		timer.Reset(next)
		select {
		case <-wt.c:
			timer.Stop()
		case <-timer.C():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// countPatient is count (no settling) for a read that gives up early: once
// a quorum answered and the rule has not decided, it waits at most
// patience more for the other answers, then decides as at the deadline.
func (r *round) countPatient(rl rule, yes func(i int, v any) bool, patience time.Duration) *tally {
	e := r.e
	n := len(e.nodes)
	t := &tally{pending: n, counted: make([]bool, n)}
	deadline := e.clock.NewTimer(e.opts.MasterTimeout + roundGrace)
	defer deadline.Stop()
	impatient := false
	for t.pending > 0 {
		var i int
		select {
		case i = <-r.in:
		case <-deadline.C():
			t.errs = append(t.errs, timedOut(t.pending))
			t.pending = 0
			continue
		}
		t.pending--
		switch a := r.ans[i]; {
		case a.err != nil:
			t.failed++
			t.errs = append(t.errs, fmt.Errorf("%s: %w", e.nodes[i].Addr(), a.err))
		case yes(i, a.val):
			t.yes++
			t.counted[i] = true
		default:
			t.no++
		}
		if t.verdict = rl(e.quorum, n, t, false); t.verdict != undecided {
			return t
		}
		if !impatient && t.answered() >= e.quorum {
			impatient = true
			deadline.Reset(patience)
		}
	}
	t.verdict = rl(e.quorum, n, t, true)
	return t
}
