package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// SemaphoreOptions are a semaphore's own request options.
type SemaphoreOptions struct {
	// Limit is the number of permits, 1..MaxSemaphoreLimit; every user
	// of a semaphore must pass the same, or 0 for the limit a quorum of
	// masters store (in use, or set by Semaphores().Set).
	Limit int
	// Count is how many permits the request takes, 1..Limit.
	Count int
}

// For implements PrimitiveOptions.
func (SemaphoreOptions) For() Primitive { return Semaphore }

// Semaphores holds the semaphore's own verb, beside the lease verbs every
// primitive has: setting a semaphore's limit.
type Semaphores struct{ e *Engine }

// Semaphores returns the semaphore's own verb.
func (e *Engine) Semaphores() Semaphores { return Semaphores{e} }

// MaxSemaphoreLimit is the largest semaphore limit: every operation reads
// all of a semaphore's slots on each master.
const MaxSemaphoreLimit = 1000

// DefaultSemKeep is how long a limit that Semaphores().Set stores outlives the
// semaphore's last grant when the caller gives no keep.
const DefaultSemKeep = 24 * time.Hour

// CountError reports a semaphore request for more permits than the
// semaphore's stored limit.
type CountError struct {
	Limit int
}

// Error implements error.
func (e *CountError) Error() string {
	return fmt.Sprintf("quorum: count above the semaphore's limit %d", e.Limit)
}

// LimitError reports that a semaphore is in use with another limit.
type LimitError struct {
	Name  string
	Limit int
}

// Error implements error.
func (e *LimitError) Error() string {
	return fmt.Sprintf("quorum: semaphore %q has limit %d", e.Name, e.Limit)
}

// semKeys names a semaphore's keys. The name is length-prefixed so that no
// semaphore's key is another's slot or record key.
type semKeys struct {
	name    string
	base    string // the limit key; slots are base:s:<i>, records base:t:<token>
	channel string
	lease   string // the master's lease high-water mark
	// queue and deadlines are the waiters' queue: "<count>:<id>" by
	// ticket, and by the master's time after which the waiter is gone
	// (see docs/design/semaphores.md).
	queue, deadlines string
}

func (e *Engine) semKeys(name string) (semKeys, error) {
	if name == "" {
		return semKeys{}, fmt.Errorf("%w: empty semaphore name", ErrBadRequest)
	}
	enc := strconv.Itoa(len(name)) + ":" + name
	// Every key of a semaphore, its slots and records too (named by the
	// scripts after base), lives in the slot of its channel.
	ch := e.opts.MetaPrefix + "semreleased:" + enc
	return semKeys{
		name:    name,
		base:    e.meta(ch, "sem:"+enc),
		channel: ch,
		lease:   e.leaseKey(ch),
		// Beside the limit key, under names no slot or record takes.
		queue:     e.meta(ch, "sem:"+enc+":q"),
		deadlines: e.meta(ch, "sem:"+enc+":d"),
	}, nil
}

func (k semKeys) keys(token string) []string {
	return []string{k.base, k.base + ":t:" + token, k.lease}
}

// grantMark is the key sem_acquire marks a queued waiter's grant with
// until the waiter leaves the queue: its member id there, and it holds the
// grant's record key (see sem_acquire.lua).
func grantMark(queue, id string) string { return queue + ":g:" + id }

// releaseKeys are sem_release's keys: keys without the lease mark.
func (k semKeys) releaseKeys(token string) []string { return k.keys(token)[:2] }

// semReply is one master's answer to sem_acquire.
type semReply struct {
	status int64  // 1 holds the set, 0 refused, -1 other limit
	states string // per slot: m (the token's), f (free), x (taken)
	limit  int    // with status -1
}

func decodeSem(v any) (semReply, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return semReply{}, false
	}
	st, ok1 := arr[0].(int64)
	s, ok2 := arr[1].(string)
	if !ok1 || !ok2 {
		return semReply{}, false
	}
	r := semReply{status: st, states: s}
	if st == -1 {
		n, err := strconv.Atoi(s)
		if err != nil {
			return semReply{}, false
		}
		r.limit = n
	}
	return r, true
}

// mine lists the slots the token holds according to states.
func (r semReply) mine() []int {
	var out []int
	for i := range len(r.states) {
		if r.states[i] == 'm' {
			out = append(out, i)
		}
	}
	return out
}

// semAcquire takes the request's Count permits. It returns (lease, nil) when granted,
// (nil, nil) when a quorum answered but too few permits were free (after
// Wait ran out), a *LimitError when the semaphore is in use with another
// limit, and a *QuorumError when fewer than a quorum answered on the last
// try. A caller that cannot deliver the lease gives it back with
// SemAbandon. A caller that waits and is refused queues once, and its
// tries are granted before those of requests queued after it or not at
// all ("Waiters first" in docs/design/semaphores.md); it leaves the queue when it
// returns.
func (e *Engine) semAcquire(ctx context.Context, req Request) (lease *Lease, err error) {
	t0 := e.now()
	so := req.semOptions()
	k, err := e.semKeys(req.resource())
	if err != nil {
		return nil, err
	}
	// stored: the caller gave no limit; the masters' stored one is used,
	// read again before a try when the last one met another.
	stored := so.Limit == 0
	if stored && req.TTL > 0 && so.Count >= 1 {
		if so.Limit, err = e.semLimit(ctx, k); err != nil {
			return nil, err
		}
		if so.Count > so.Limit {
			return nil, &CountError{Limit: so.Limit}
		}
	}
	if so.Limit < 1 || so.Limit > MaxSemaphoreLimit || so.Count < 1 || so.Count > so.Limit || req.TTL <= 0 {
		return nil, fmt.Errorf("%w: limit, count or ttl out of range", ErrBadRequest)
	}
	_, seq := e.fenceKeys(k.channel)
	// The call's member in the queue: its count, and an id that is the
	// caller's token or random (the token is fresh for every try).
	q := &fairQueue{queue: k.queue, deadlines: k.deadlines, seq: seq, channel: k.channel, stale: e.writerMark(),
		id: strconv.Itoa(so.Count) + ":" + cmp.Or(req.Token, e.rnd.token()), name: "sem_acquire"}
	gaveBack := false
	defer func() {
		if !q.sent {
			return // never queued: nothing to leave
		}
		mode := "1" // gave up: if we were the head, the next may try
		switch {
		case lease != nil:
			mode = "0"
		case gaveBack:
			mode = "2" // our grant was rolled back: permits are free
		}
		leave := func(after *round) {
			e.follow(ctx, after, &op{name: "sem_acquire", script: scripts.FairDequeue, keys: []string{q.queue, q.deadlines, grantMark(q.queue, q.id)},
				args: []string{q.id, q.channel, mode}, timeout: e.releaseTimeout()}, nil, nil)
		}
		leave(q.last)
		if q.placed != nil && q.placed != q.last {
			// Also after the ticket on every master (fairQueue.placed).
			// Where it landed before the latest try, this finds the
			// waiter gone.
			leave(q.placed)
		}
	}()
	w := waiting{channels: []string{k.channel},
		// A release wakes this proxy's waiters in their order on the
		// masters; one not queued (no ticket yet) comes last.
		rank: func() uint64 {
			if q.ticket == 0 {
				return math.MaxUint64
			}
			return q.ticket
		},
		gaveBack: func() { gaveBack = true },
		refused: func(err error) error {
			if err == nil && q.ticket == 0 && req.Wait > 0 && e.since(t0) < req.Wait {
				// Refused: take a place among the waiters before waiting.
				return e.enqueue(ctx, q)
			}
			return err
		}}
	return e.acquireLoop(ctx, req, w, func(token string, tainted *taints, fixed bool) (*Lease, func(), error) {
		var le *LimitError
		l, undo, err := e.semAttempt(ctx, k, q, req, so, token, tainted, fixed)
		if !stored || !errors.As(err, &le) {
			return l, undo, err
		}
		// Masters store another limit than the one read: an RSEMSET came
		// meanwhile (one that raised it woke this waiter). Read it again
		// and try once more at once, as the acquire loop's next try would:
		// a fresh token unless the caller chose one, whose votes then
		// wait for the rollbacks (taints).
		if so.Limit, err = e.semLimit(ctx, k); errors.Is(err, ErrNoSemLimit) {
			return nil, nil, nil // refused: they may agree by the next try
		} else if err != nil {
			return nil, nil, err
		}
		if so.Count > so.Limit {
			return nil, nil, &CountError{Limit: so.Limit}
		}
		if !fixed {
			token = e.rnd.token()
		}
		tainted.refresh()
		if l, undo, err = e.semAttempt(ctx, k, q, req, so, token, tainted, fixed); errors.As(err, &le) {
			return nil, nil, nil
		}
		return l, undo, err
	})
}

// semLimit reads the limit a quorum of masters store for the semaphore
// (in use, or set by Semaphores().Set): ErrNoSemLimit when no quorum agrees on one.
// It decides as soon as a quorum name one limit, or none can.
func (e *Engine) semLimit(ctx context.Context, k semKeys) (int, error) {
	r := e.send(ctx, &op{name: "sem_count", script: scripts.SemCount, keys: []string{k.base}}, nil)
	t, best, top := e.recordCount(r, func(_ int, v any) (string, bool) {
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return "", ok // not in use here: answers, names no limit
		}
		l, ok := arr[0].(int64)
		return strconv.FormatInt(l, 10), ok
	})
	if t.verdict == noQuorum && t.answered() < e.quorum {
		return 0, t.err(e, "sem_count")
	}
	if l, err := strconv.Atoi(top); err == nil && best >= e.quorum && l >= 1 && l <= MaxSemaphoreLimit {
		return l, nil
	}
	return 0, ErrNoSemLimit
}

// semSetRepairFor bounds how long Semaphores().Set goes on sending the limit to the
// masters that did not store it (down, paused) after it returned.
const semSetRepairFor = time.Minute

// Set stores limit (1..MaxSemaphoreLimit) as the limit of the
// semaphore name on the masters, for as long as it is in use and keep
// after its last grant (DefaultSemKeep when keep is 0). Requests may then
// give no limit (SemaphoreOptions.Limit 0); one that gives another is a
// *LimitError. Lowering the limit revokes no permit: no permit is granted
// while those held above the new limit are, and the permits held never
// exceed the new limit through a grant made after Semaphores().Set returned.
// Raising it wakes waiters on every proxy. It returns once a quorum of
// masters store it, and goes on sending it to the others in the
// background (for up to a minute, until the engine closes), so that a
// master that missed it does not keep the old limit. Fewer than a quorum
// is a *QuorumError; the limit is then stored on the masters that
// answered, and requests that give none are refused until a Set
// reaches a quorum (docs/design/semaphores.md).
func (s Semaphores) Set(ctx context.Context, name string, limit int, keep time.Duration) (err error) {
	e := s.e
	defer e.observe("sem_set", e.now(), func() bool { return err == nil }, &err)
	k, err := e.semKeys(name)
	if err != nil {
		return err
	}
	if keep == 0 {
		keep = DefaultSemKeep
	}
	if limit < 1 || limit > MaxSemaphoreLimit || keep < time.Millisecond {
		return fmt.Errorf("%w: limit or keep out of range", ErrBadRequest)
	}
	// Later calls propose higher versions (ms, then a random tie-break,
	// well within a Lua number's exact integers); a master that stores a
	// higher one (another proxy's clock ahead) refuses, and the next
	// proposal goes above what it stores.
	version := uint64(e.now().UnixMilli())*1000 + uint64(e.rnd.int64N(1000))
	for range 3 {
		o := &op{name: "sem_set", script: scripts.SemSet, keys: []string{k.base},
			args: []string{strconv.Itoa(limit), ms(keep), strconv.FormatUint(version, 10), k.channel, e.rnd.token()}, timeout: e.releaseTimeout()}
		r := e.send(ctx, o, nil)
		var above uint64
		set := func(v any) bool {
			arr, ok := v.([]any)
			if ok && len(arr) == 3 {
				if s, ok := arr[2].(int64); ok && uint64(s) > above {
					above = uint64(s)
				}
			}
			return ok && len(arr) >= 2 && arr[0] == int64(1)
		}
		t := r.count(strictRule, func(_ int, v any) bool { return set(v) })
		if t.verdict == decidedYes {
			e.semSetRepair(r, o)
			return nil
		}
		if err := t.err(e, "sem_set"); err != nil {
			return err
		}
		<-r.all
		for i := range r.ans {
			if r.answered(i) && r.ans[i].err == nil {
				set(r.ans[i].val) // every stored version, late ones too
			}
		}
		if above < version {
			break // refused for another reason: not sem_set's answers
		}
		version = above + 1
	}
	return fmt.Errorf("quorum: sem_set: the masters did not store the limit (a later RSEMSET's version, or answers that are not sem_set's)")
}

// semSetRepair sends o again to the masters whose answer in r did not
// store it (an error, a timeout), in the background, every few master
// timeouts, until each has answered (stored, or a later version there) or
// semSetRepairFor passed or the engine closed.
func (e *Engine) semSetRepair(r *round, o *op) {
	e.goBackground(func() {
		<-r.all
		done := make([]bool, len(e.nodes))
		left := 0
		for i := range done {
			_, isArr := r.ans[i].val.([]any)
			done[i] = r.ans[i].err == nil && isArr
			if !done[i] {
				left++
			}
		}
		tick := e.clock.NewTimer(4 * e.opts.MasterTimeout)
		defer tick.Stop()
		for end := e.now().Add(semSetRepairFor); left > 0 && e.now().Before(end); {
			select {
			case <-e.life.Done():
				return
			case <-tick.C():
				tick.Reset(4 * e.opts.MasterTimeout)
			}
			r2 := e.follow(e.life, nil, o, nil, func(i int) (answer, bool) { return answer{err: errSkippedDown}, done[i] })
			<-r2.all
			for i := range done {
				if _, isArr := r2.ans[i].val.([]any); !done[i] && r2.ans[i].err == nil && isArr {
					done[i] = true
					left--
				}
			}
		}
		if left > 0 && e.life.Err() == nil {
			e.log.Warn("RSEMSET did not reach every master: run it again once they are back, or a master that restarts empty may let the old limit be used",
				"masters_missed", left)
		}
	})
}

// semAttempt is one try. Round 1 asks every master for Count slots,
// searching from one random slot for this try, so that masters in the same
// state give the same slots. If a quorum of them hold the same slots, that
// is the grant. If they differ (they saw concurrent tries in different
// orders), round 2 asks every master for exactly the Count slots that the
// most masters can give (already the token's, or free); a quorum holding
// them is the grant. Anything else is rolled back.
func (e *Engine) semAttempt(ctx context.Context, k semKeys, q *fairQueue, req Request, so SemaphoreOptions, token string, tainted *taints, fixed bool) (*Lease, func(), error) {
	start := e.now()
	keys := append(k.keys(token), k.queue, k.deadlines)
	// Only a queued call names itself (and re-places itself at its
	// ticket, and marks its grant); any other has every waiter ahead of
	// it.
	id := ""
	if q.ticket > 0 {
		id = q.id
		keys = append(keys, grantMark(k.queue, id))
	}
	base := []string{token, ms(req.TTL), strconv.Itoa(so.Limit), strconv.Itoa(so.Count), strconv.FormatInt(e.rnd.int64N(int64(so.Limit)), 10),
		ms(q.stale), strconv.FormatUint(q.ticket, 10), id}
	r := e.send(ctx, &op{name: "sem_acquire", script: scripts.SemAcquire, keys: keys, args: base, fresh: true}, e.track(token))
	last := r
	q.last = r
	trusted := func(i int) bool { return !tainted.has(i) }
	// sent: the try reached master i (not skipped as down); read once
	// r's answer there is in (the rollback and the follow-up follow r).
	sent := func(i int) bool { return !errors.Is(r.ans[i].err, errSkippedDown) }
	rollback := func() {
		// Announced as a release is, with an id of its own: where it frees
		// slots (a split try: some masters granted it), the waiters they
		// refused meanwhile try at once, not after their retry delay (at
		// a pause of masters, every try in flight held its slots on the
		// live ones for master_timeout). Counted, it wakes only as many
		// waiters as it freed permits.
		rel := &op{name: "sem_release", script: scripts.SemRelease, keys: keys[:2], args: []string{token, k.channel, e.rnd.token()}}
		e.undo(ctx, last, rel, sent, fixed, tainted)
	}
	reply := func(r *round, i int) (semReply, bool) {
		if r.ans[i].err != nil {
			return semReply{}, false
		}
		return decodeSem(r.ans[i].val)
	}
	holds := func(r *round) func(i int, _ any) bool {
		return func(i int, _ any) bool {
			a, ok := reply(r, i)
			return ok && a.status == 1 && trusted(i)
		}
	}
	t := r.count(grantRule, holds(r))
	// A master that stores another limit refuses; once a quorum that store
	// the limit used granted, it does not matter (docs/design/semaphores.md,
	// Resizing).
	if le := limitError(r, k.name, reply); le != nil && t.verdict != decidedYes {
		rollback()
		return nil, nil, le
	}
	if t.verdict != decidedYes {
		rollback()
		return nil, nil, t.refusal(e, "sem_acquire")
	}
	// The slots each held by the token on a quorum of the counted masters.
	votes := make([]int, so.Limit)
	for i, c := range t.counted {
		if c {
			a, _ := reply(r, i)
			for _, s := range a.mine() {
				votes[s]++
			}
		}
	}
	var slots []int
	for s, v := range votes {
		if v >= e.quorum {
			slots = append(slots, s)
		}
	}
	if e.off.slots {
		for i, c := range t.counted {
			if a, _ := reply(r, i); c && len(a.mine()) == so.Count {
				slots = a.mine()
				break
			}
		}
	}
	counted := t.counted // the grant's, in last
	if len(slots) != so.Count {
		// Round 2: the Count slots that the most answering masters can
		// give, ties to the lower slot.
		score := make([]int, so.Limit)
		for i := range e.nodes {
			if !r.answered(i) {
				continue
			}
			if a, ok := reply(r, i); ok && a.status >= 0 && len(a.states) == so.Limit {
				for s := range so.Limit {
					if a.states[s] != 'x' {
						score[s]++
					}
				}
			}
		}
		order := make([]int, so.Limit)
		for s := range order {
			order[s] = s
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(score[b], score[a]) })
		slots = slices.Clone(order[:so.Count])
		slices.Sort(slots)
		args := slices.Clone(base)
		for _, s := range slots {
			args = append(args, strconv.Itoa(s))
		}
		// Tracked, so that a release through this proxy comes after it on
		// every master, stragglers included.
		r2 := e.follow(ctx, r, &op{name: "sem_acquire", script: scripts.SemAcquire, keys: keys, args: args}, e.track(token),
			func(i int) (answer, bool) { return answer{err: errSkippedDown}, !sent(i) })
		last = r2
		q.last = r2
		t2 := r2.count(grantRule, holds(r2))
		counted = t2.counted
		if le := limitError(r2, k.name, reply); le != nil && t2.verdict != decidedYes {
			rollback()
			return nil, nil, le
		}
		if t2.verdict != decidedYes {
			rollback()
			return nil, nil, t2.refusal(e, "sem_acquire")
		}
	}
	decided := e.now()
	validity := e.validity(req.TTL, start, decided)
	if validity <= 0 {
		rollback()
		return nil, nil, nil
	}
	if last == r {
		e.semConverge(ctx, r, keys, base, slots, reply)
	}
	// The voters are the counted masters that hold exactly the slots
	// granted (their record names them).
	exact := func(i int) bool { a, ok := reply(last, i); return ok && slices.Equal(a.mine(), slots) }
	return &Lease{Primitive: Semaphore, Resources: []string{k.name}, Count: so.Count, Token: token, Slots: slots, Validity: validity, Start: start, Decided: decided,
		voters: voters(last, counted, exact)}, rollback, nil
}

// semConverge makes the masters that gave the token other slots in round
// r (late ones included) hold exactly the granted slots, or nothing, so
// that they neither block other tries with a stray slot until its ttl nor
// answer a release or extension with another slot list. It does not wait
// for them.
func (e *Engine) semConverge(ctx context.Context, r *round, keys, base []string, slots []int, reply func(*round, int) (semReply, bool)) {
	args := slices.Clone(base)
	for _, s := range slots {
		args = append(args, strconv.Itoa(s))
	}
	skip := answer{}
	// Tracked like an acquire (under the token, base[0]): a release or an
	// extension through this proxy is queued behind it on every master,
	// and a release drops the ones not sent yet (a master slower than
	// the release's wait would otherwise take the slots after it).
	fl := e.track(base[0])
	e.follow(ctx, r, &op{name: "sem_acquire", script: scripts.SemAcquire, keys: keys, args: args, timeout: e.releaseTimeout()}, fl,
		func(i int) (answer, bool) {
			if fl.isReleased() || errors.Is(r.ans[i].err, errSkippedDown) {
				return skip, true
			}
			a, ok := reply(r, i)
			if !ok {
				return skip, r.ans[i].err == nil // an answer we cannot read: leave it
			}
			mine := a.mine()
			return skip, slices.Equal(mine, slots) || (a.status != 1 && len(mine) == 0)
		})
}

// limitError is a *LimitError if a master that answered in r holds the
// semaphore with another limit.
func limitError(r *round, name string, reply func(*round, int) (semReply, bool)) error {
	for i := range r.ans {
		if !r.answered(i) {
			continue
		}
		if a, ok := reply(r, i); ok && a.status == -1 {
			return &LimitError{Name: name, Limit: a.limit}
		}
	}
	return nil
}

// semAbandon releases a lease the caller will not use, in the background.
func (e *Engine) semAbandon(ctx context.Context, l *Lease) {
	k, err := e.semKeys(l.resource())
	if err != nil {
		return
	}
	e.awaitForRelease(l.Token)
	e.send(ctx, &op{name: "sem_release", script: scripts.SemRelease, keys: k.releaseKeys(l.Token), args: []string{l.Token},
		timeout: e.releaseTimeout()}, nil)
}

// recordRound counts a semaphore release's answers: a master answers with
// the token's slot list (its record) where it held every slot of it, and
// the ms they had left ({record, ms}), else {0, 0}. The permits were held
// only if a quorum of masters name the same slots: masters that hold
// other slots for the token (a try they saw differently) do not make a
// grant. They were not held only when no slot list can reach a quorum
// whatever the masters still silent or failed say; otherwise the answers
// decide nothing and it is a *QuorumError. (Extensions count with
// recordCount, their answers being "<slots>/<limit>".)
//
// With until set, a round the answers within MasterTimeout left undecided
// asks again (confirm) until until() then, counting note's silent voters
// (nil: none).
func (e *Engine) recordRound(ctx context.Context, r *round, opName string, until func() time.Time, note *grantNote) (bool, error) {
	group := semGroup
	if opName == "sem_release" {
		group = releaseGroup(semGroup)
	}
	t, _, _ := e.recordCount(r, group)
	if t.verdict == noQuorum && until != nil && e.retryReleases() {
		return e.confirm(ctx, r, group, opName == "sem_release", opName, until(), nil, note)
	}
	return t.verdict == decidedYes, t.err(e, opName)
}

// recordCount is recordRound's count, reading each answer's slot list
// with group: the tally, how many masters name the most named slot list,
// and that list.
func (e *Engine) recordCount(r *round, group func(int, any) (string, bool)) (t *tally, best int, top string) {
	groups := map[string]int{}
	yes := func(i int, v any) bool {
		s, ok := group(i, v)
		if !ok {
			return false
		}
		groups[s]++
		if groups[s] > best {
			best, top = groups[s], s
		}
		return true
	}
	// Not held only when the masters that could still name the most
	// named list (every one that answered neither yes nor no: pending,
	// failed, or timed out at the round's deadline) cannot make it a
	// quorum. Pending and failed alone are not enough: a round's
	// deadline zeroes pending, and with two masters paused a release
	// that found its permits on the one other master of its quorum would
	// answer 0.
	rule := func(q, n int, t *tally, final bool) verdict {
		switch {
		case best >= q:
			return decidedYes
		case best+(n-t.yes-t.no) < q:
			return decidedNo
		case final:
			return noQuorum
		}
		return undecided
	}
	return r.count(rule, yes), best, top
}

// semRelease releases the permits held with token. It reports true when
// they were held on a quorum up to the release, false when at least
// N - quorum + 1 masters said they were not, and a *QuorumError when the
// answers that came in time decide neither. Each proxy wakes as many of
// its waiters as permits were freed.
func (e *Engine) semRelease(ctx context.Context, name, token string) (held bool, err error) {
	return e.semReleaseUntil(ctx, name, token, time.Time{}, nil)
}

// semReleaseUntil is semRelease of a lease whose holder knows its
// validity ends at known (zero: unknown), counting note's silent voters
// (nil: none); see releaseUntil and confirm.
func (e *Engine) semReleaseUntil(ctx context.Context, name, token string, known time.Time, note *grantNote) (held bool, err error) {
	t0 := e.now()
	k, err := e.semKeys(name)
	if err != nil {
		return false, err
	}
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	e.awaitForRelease(token)
	r := e.send(ctx, &op{name: "sem_release", script: scripts.SemRelease, keys: k.releaseKeys(token),
		args: []string{token, k.channel, e.rnd.token()}, timeout: e.releaseTimeout(), keepLate: true}, nil)
	hasRecord := func(h any) bool { s, ok := h.(string); return ok && s != "" }
	return e.recordRound(ctx, r, "sem_release", func() time.Time { return e.releaseUntil(ctx, t0, r, hasRecord, known) }, note)
}

// semExtend resets the ttl of the permits of lease l; see Extend. Its
// masters answer "<slots>/<limit>" where they held every slot of the
// token's record; the masters that answered "not held" are re-enrolled
// with exactly the slots a quorum named (docs/design/leases.md).
func (e *Engine) semExtend(ctx context.Context, l *Lease, ttl time.Duration) (validity time.Duration, err error) {
	t0 := e.now()
	token := l.Token
	k, err := e.semKeys(l.resource())
	if err != nil {
		return 0, err
	}
	if ttl <= 0 || token == "" {
		return 0, fmt.Errorf("%w: ttl and token are required", ErrBadRequest)
	}
	e.awaitAcquires(token)
	// top: the slot list the most masters named, and limit the limit
	// most of those masters store (set by the count, read by the take).
	// The answers count by their slots only: masters may disagree on the
	// limit while an RSEMSET reaches them.
	var top, limit string
	re := e.track4reenrol(&reenrolment{
		token: token,
		group: func() string { return top },
		held:  func(i int, v any) bool { _, ok := semSlots(i, v); return ok },
		take: func(*round) *op {
			slots := top
			if slots == "" || limit == "" {
				return nil
			}
			list := strings.Split(slots, ",")
			// sem_acquire for exactly these slots (its search arguments
			// unused).
			args := append([]string{token, ms(ttl), limit, strconv.Itoa(len(list)), "0", "0", "0", ""}, list...)
			return &op{name: "sem_extend", script: scripts.SemAcquire, keys: append(k.keys(token), k.queue, k.deadlines), args: args}
		},
		taken: func(v any) bool { a, ok := decodeSem(v); return ok && a.status == 1 },
	})
	r := e.send(ctx, &op{name: "sem_extend", script: scripts.SemExtend, keys: k.keys(token), args: []string{token, ms(ttl)}, keepLate: true}, nil)
	t, best, named := e.recordCount(r, semSlots)
	top = named
	limits := map[string]int{}
	for i := range r.ans {
		if !r.answered(i) || r.ans[i].err != nil {
			continue
		}
		if s, ok := r.ans[i].val.(string); ok {
			if slots, lim, ok := strings.Cut(s, "/"); ok && slots == top {
				if limits[lim]++; limits[lim] > limits[limit] {
					limit = lim
				}
			}
		}
	}
	return e.extendVerdict(ctx, r, t, best, re, l.knownEnd(), t0, ttl, semSlots, "sem_extend")
}

// semSlots is the group of a semaphore extension's answer
// ("<slots>/<limit>"): the slots the token held there.
func semSlots(i int, v any) (string, bool) {
	s, ok := semGroup(i, v)
	slots, _, _ := strings.Cut(s, "/")
	return slots, ok && slots != ""
}

// semCount returns how many permits of the semaphore have a live grant as
// the masters that answer see them: a slot counts when a quorum of masters
// name the same token for it. Fewer than a quorum of answers is a
// *QuorumError.
func (e *Engine) semCount(ctx context.Context, name string) (n int, err error) {
	k, err := e.semKeys(name)
	if err != nil {
		return 0, err
	}
	r := e.send(ctx, &op{name: "sem_count", script: scripts.SemCount, keys: []string{k.base}}, nil)
	// Every answer counts; wait (briefly) for all of them, as a slot held
	// by exactly a quorum is seen only if all of its holders answer.
	t := r.count(everyAnswer, func(i int, v any) bool { _, ok := v.([]any); return ok })
	if t.verdict != decidedYes {
		return 0, t.err(e, "sem_count")
	}
	holders := map[string]int{} // "slot token" -> masters
	for i, c := range t.counted {
		if !c {
			continue
		}
		arr := r.ans[i].val.([]any)
		for s, v := range arr[min(1, len(arr)):] {
			if tok, ok := v.(string); ok && tok != "" {
				holders[strconv.Itoa(s)+" "+tok]++
			}
		}
	}
	for _, c := range holders {
		if c >= e.quorum {
			n++
		}
	}
	return n, nil
}
