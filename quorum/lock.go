package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// LockOptions are a lock's own request options.
type LockOptions struct {
	// Reentrant makes a grant with Request.Token one more hold of that
	// token's lock (see docs/design/reentrant.md): one
	// resource, at most MaxHolds holds; each Release takes one away.
	Reentrant bool
}

// For implements PrimitiveOptions.
func (LockOptions) For() Primitive { return Lock }

// ValidityAt is the validity left at now: Validity less the time since it
// was computed. A caller about to reply calls it again, so that every step
// after the quorum counts.
func (l *Lease) ValidityAt(now time.Time) time.Duration {
	return l.Validity - now.Sub(l.Decided)
}

// lockSet is a lock request's resources, deduplicated and put in one
// canonical (sorted) order, with their keys on every master.
type lockSet struct {
	given []string // distinct, in the order first given
	pos   []int    // pos[i] is the index in the sorted order of given[i]
	n     int      // len(given)
	// keys are the lock keys, the fence keys (both sorted by resource),
	// then the master's lagging fence bound and its fence sequence.
	keys []string
	// acquireKeys are keys then the master's lease high-water mark: the
	// plain lock_acquire's keys. A writer that waits, and a fair lock,
	// append the resources' writer-waiting marks, readers next and readers
	// after (see waitKeys).
	acquireKeys []string
	channels    []string // release channels, parallel to the lock keys
	// lease is the master's lease high-water mark (that of the first
	// resource's slot with the slotted layout).
	lease string
}

func (ls *lockSet) locksAndFences() []string { return ls.keys[:2*ls.n] }

// waitKeys makes acquireKeys those of a writer that waits
// (lock_acquire_wait, lock_acquire_fair): each resource's writer-waiting
// mark, then its readers next, then its readers after (each group
// parallel to the lock keys) follow the lease mark, so that a refused
// writer marks the resource and readers who waited go first (see
// docs/design/rwlock.md). Writers that do not wait never read them.
func (ls *lockSet) waitKeys(e *Engine) {
	n := ls.n
	keys := make([]string, 2*n+3+3*n)
	copy(keys, ls.acquireKeys[:2*n+3])
	for i, k := range ls.keys[:n] {
		rk := e.rwKeys(strings.TrimPrefix(k, e.opts.KeyPrefix))
		keys[2*n+3+i], keys[3*n+3+i], keys[4*n+3+i] = rk.mark, rk.next, rk.after
	}
	ls.acquireKeys = keys
}

func (ls *lockSet) releaseKeys() []string { return ls.keys[:2*ls.n+1] }

// withReaders is the lock keys and fence keys, then each resource's
// readers (parallel to the lock keys: a writer that downgraded leaves its
// key to them, see docs/design/rwlock.md), then its re-entrant holds
// (see docs/design/reentrant.md), then tail.
func (ls *lockSet) withReaders(e *Engine, tail ...string) []string {
	n := ls.n
	keys := make([]string, 0, 4*n+len(tail)+1)
	keys = append(keys, ls.keys[:2*n]...)
	for _, k := range ls.keys[:n] {
		keys = append(keys, e.rwKeys(strings.TrimPrefix(k, e.opts.KeyPrefix)).readers)
	}
	for _, k := range ls.keys[:n] {
		keys = append(keys, e.holdsKey(strings.TrimPrefix(k, e.opts.KeyPrefix)))
	}
	return append(keys, tail...)
}

// holdsKey is resource's re-entrant holds: the hold ids of the token that
// holds its lock, by order (see docs/design/reentrant.md).
func (e *Engine) holdsKey(resource string) string { return e.resMeta(resource, "holds:"+resource) }

// unlockKeys are lock_release's keys (without the optional fair queue):
// the lock keys, their waiting sets, readers and re-entrant holds.
func (ls *lockSet) unlockKeys(e *Engine) []string {
	n := ls.n
	keys := make([]string, 0, 4*n+2)
	keys = append(keys, ls.keys[:n]...)
	for _, c := range ls.channels {
		keys = append(keys, e.waitingKey(c))
	}
	for _, k := range ls.keys[:n] {
		keys = append(keys, e.rwKeys(strings.TrimPrefix(k, e.opts.KeyPrefix)).readers)
	}
	for _, k := range ls.keys[:n] {
		keys = append(keys, e.holdsKey(strings.TrimPrefix(k, e.opts.KeyPrefix)))
	}
	return keys
}

// lockSet validates resources and names their keys.
func (e *Engine) lockSet(rs []string) (*lockSet, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no resources", ErrBadRequest)
	}
	given := make([]string, 0, len(rs))
	for _, r := range rs {
		if r == "" {
			return nil, fmt.Errorf("%w: empty resource", ErrBadRequest)
		}
		if strings.HasPrefix(e.opts.KeyPrefix+r, e.opts.MetaPrefix) {
			return nil, ErrReservedResource
		}
		if !slices.Contains(given, r) {
			given = append(given, r)
		}
	}
	sorted := given
	if len(given) > 1 {
		sorted = slices.Clone(given)
		slices.Sort(sorted)
	}
	n := len(sorted)
	ls := &lockSet{given: given, n: n, pos: make([]int, n), keys: make([]string, 2*n+2), channels: make([]string, n)}
	for i, r := range sorted {
		ls.keys[i] = e.opts.KeyPrefix + r
		ls.keys[n+i] = e.resMeta(r, "fence:"+r)
		ls.channels[i] = e.opts.MetaPrefix + "released:" + r
	}
	// The master-wide keys are those of the first resource's slot (one
	// set per master with single-server masters; see Options.Slotted).
	ls.keys[2*n], ls.keys[2*n+1] = e.fenceKeys(ls.keys[0])
	ls.lease = e.leaseKey(ls.keys[0])
	ls.acquireKeys = append(make([]string, 0, 2*n+3), ls.keys...)
	ls.acquireKeys = append(ls.acquireKeys, ls.lease)
	for i, r := range given {
		ls.pos[i], _ = slices.BinarySearch(sorted, r)
	}
	return ls, nil
}

// requestSet validates a lock, fair lock or read lock request (its
// resources, only one unless what is "", and a positive ttl) and names
// its keys.
func (e *Engine) requestSet(req Request, what string) (*lockSet, error) {
	if what != "" && len(req.Resources) != 1 {
		return nil, fmt.Errorf("%w: %s has one resource", ErrBadRequest, what)
	}
	ls, err := e.lockSet(req.Resources)
	if err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	return ls, nil
}

// leaseKey is the master-wide lease high-water mark: when the
// longest-lived grant the master holds expires (see
// docs/design/restarts.md).
// With the slotted layout there is one per hash slot: that of anchor.
func (e *Engine) leaseKey(anchor string) string { return e.meta(anchor, "lease-hwm") }

// brokenKey is resource's break mark: what RLOCKBREAK broke, living as
// long as that grant had left (see Break).
func (e *Engine) brokenKey(resource string) string { return e.resMeta(resource, "broken:"+resource) }

// fenceKeys are the master-wide lagging fence bound and fence sequence.
// With the slotted layout there is one pair per hash slot: that of
// anchor.
func (e *Engine) fenceKeys(anchor string) (lag, seq string) {
	return e.meta(anchor, "fence-lag"), e.meta(anchor, "fence-hwm")
}

// markTTL is how long the writer-waiting marks of a call that waits live
// ("0": the call does not wait, mark "").
func (e *Engine) markTTL(mark string) string {
	if mark == "" {
		return "0"
	}
	return ms(e.writerMark())
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// acquireReply is one master's answer to lock_acquire.
type acquireReply struct {
	ok   bool
	full bool // a re-entrant hold refused: the lock counts MaxHolds
	// partial: refused, but holding some of the keys (a cluster master
	// that ran the call slot by slot; see docs/design/cluster.md): rolled back
	// as a grant is.
	partial bool
	seq     uint64   // the master's fence sequence after the script
	fences  []uint64 // one per lock key, in canonical order; set when ok
}

func decodeAcquire(v any, n int) (acquireReply, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return acquireReply{}, false
	}
	flag, ok1 := arr[0].(int64)
	seq, ok2 := arr[1].(int64)
	if !ok1 || !ok2 {
		return acquireReply{}, false
	}
	r := acquireReply{ok: flag == 1, full: flag == -1, seq: uint64(seq)}
	if !r.ok {
		r.partial = len(arr) == 3 && arr[2] == int64(1)
		return r, true
	}
	if len(arr) != n+2 {
		return acquireReply{}, false
	}
	r.fences = make([]uint64, n)
	for j := range n {
		f, ok := arr[j+2].(int64)
		if !ok {
			return acquireReply{}, false
		}
		r.fences[j] = uint64(f)
	}
	return r, true
}

// lockAcquire acquires a lease. It returns (lease, nil) when granted, (nil, nil)
// when a quorum answered but the resources are held (after Wait ran out),
// and a *QuorumError when fewer than a quorum answered on the last try.
// If ctx ends while waiting, it returns ctx's error and holds nothing.
//
// A caller that cannot deliver the lease (its validity ran out before the
// reply, see Lease.ValidityAt) must give it back with Abandon.
func (e *Engine) lockAcquire(ctx context.Context, req Request) (lease *Lease, err error) {
	ls, err := e.requestSet(req, "")
	if err != nil {
		return nil, err
	}
	var fl flavour = plainLock{}
	switch {
	case req.Primitive == SetNX:
		fl = setNX{}
	case req.lockOptions().Reentrant:
		if req.Primitive != Lock && req.Primitive != "" || req.Token == "" || ls.n != 1 {
			return nil, fmt.Errorf("%w: a re-entrant hold is a lock of one resource with a token", ErrBadRequest)
		}
		// A re-entrant waiter marks nothing: readers may go first.
		fl = reentrantHold{}
	case req.Wait > 0:
		fl = waitingLock{mark: e.rnd.token()}
		ls.waitKeys(e)
	}
	return e.acquireLoop(ctx, req, waiting{channels: ls.channels}, func(token string, tainted *taints, fixed bool) (*Lease, func(), error) {
		return e.attempt(ctx, ls, fl, token, req.TTL, tainted, fixed)
	})
}

// flavour is what a lock-like primitive gives the one try (attempt): how
// its acquire differs from the plain lock_acquire, and what undoes it.
// Each primitive's flavour lives in its own file.
type flavour interface {
	// shape makes a try's acquire from the plain one (acq: lock_acquire
	// on ls.acquireKeys with the token, ttl, fence proposal and lag) and
	// says how the try is undone.
	shape(e *Engine, ls *lockSet, acq *op, token string) try
}

// try is one try's shape, as its flavour made it.
type try struct {
	// undo is the try's rollback (and Abandon's request); nil is the
	// plain lock_release.
	undo func() *op
	// distinct: the keys the try sets are told apart from another try's
	// with the same token (an owner nonce, a hold id), so no master's vote
	// is ambiguous and no taint is needed.
	distinct bool
	// after, if set, is the queue whose previous request the acquire
	// follows on each master (a fair lock's tries keep their order).
	after *fairQueue
	// owner and hold are kept in the lease (see Lease).
	owner, hold string
}

// plainLock is RLOCK's try without WAIT (and RMULTILOCK's).
type plainLock struct{}

func (plainLock) shape(*Engine, *lockSet, *op, string) try { return try{} }

// waitingLock is the try of a writer that waits: it marks the resources
// that refuse it (lock_acquire_wait, see docs/design/rwlock.md).
type waitingLock struct{ mark string }

func (w waitingLock) shape(e *Engine, _ *lockSet, acq *op, _ string) try {
	acq.script = scripts.LockAcquireWait
	acq.args = append(acq.args, e.markTTL(w.mark), w.mark)
	return try{}
}

// attempt is one Redlock try: acquire on a quorum, make the fences held by
// a quorum, check validity. On failure it has rolled back before it
// returns; on success it returns the rollback, for a caller that left.
func (e *Engine) attempt(ctx context.Context, ls *lockSet, fl flavour, token string, ttl time.Duration, tainted *taints, fixed bool) (*Lease, func(), error) {
	start := e.now()
	n := ls.n
	lag := ms(e.opts.FenceLag)
	proposal := strconv.FormatUint(e.fences.next(), 10)
	acq := &op{name: "lock", script: scripts.LockAcquire, keys: ls.acquireKeys,
		args: []string{token, ms(ttl), proposal, lag}}
	tr := fl.shape(e, ls, acq, token)
	if tr.distinct {
		fixed = false
	}
	acq.fresh = true
	var r *round
	if fq := tr.after; fq != nil {
		r = e.follow(ctx, fq.last, acq, e.track(token), nil)
		fq.last = r
	} else {
		r = e.send(ctx, acq, e.track(token))
	}
	// reply decodes master i's answer; valid once it is recorded.
	reply := func(i int) (acquireReply, bool) {
		if r.ans[i].err != nil {
			return acquireReply{}, false
		}
		a, ok := decodeAcquire(r.ans[i].val, n)
		if ok {
			e.fences.learn(a.seq)
		}
		return a, ok
	}
	mayHold := func(i int) bool {
		if errors.Is(r.ans[i].err, errSkippedDown) {
			return false // never sent
		}
		a, ok := reply(i)
		return r.ans[i].err != nil || !ok || a.ok || a.partial || fixed
	}
	trusted := func(i int) bool { return !tainted.has(i) }
	undo := func(announce bool) {
		rel := ls.giveBack(e, token, announce)
		if tr.undo != nil {
			rel = tr.undo()
		}
		e.undo(ctx, r, rel, mayHold, fixed, tainted)
	}
	rollback := func() { undo(false) }
	t := r.count(grantRule, func(i int, _ any) bool {
		a, ok := reply(i)
		return ok && a.ok && trusted(i)
	})
	if t.verdict != decidedYes {
		rollback()
		full := 0
		for i := range e.nodes {
			if !r.answered(i) {
				continue
			}
			if a, ok := reply(i); ok && a.full {
				full++
			}
		}
		if full >= e.quorum {
			return nil, nil, ErrTooManyHolds
		}
		return nil, nil, t.refusal(e, "lock")
	}

	// Each acquiring master gave every resource a fence; the lease's fence
	// is the highest. Masters that gave exactly that already hold it.
	fences := make([]uint64, n)
	for i, c := range t.counted {
		if c {
			a, _ := reply(i)
			for j, f := range a.fences {
				fences[j] = max(fences[j], f)
			}
		}
	}
	holds := func(i int) bool {
		a, ok := reply(i)
		return ok && a.ok && slices.Equal(a.fences, fences)
	}
	holders := 0
	for i, c := range t.counted {
		if c && holds(i) {
			holders++
		}
	}
	// With a quorum of holders nothing is written back: the others answered
	// less because they ran other tries first (or missed some), and most
	// of the time a write-back would find their sequence past the fence
	// already (about half of all grants at 64 clients). A master that
	// missed tries catches up at the next write-back a grant needs, which
	// goes to every master that did not answer that grant's fence.
	if holders < e.quorum && !e.off.writeBack {
		wbArgs := make([]string, 0, 1+n)
		wbArgs = append(wbArgs, token)
		for _, f := range fences {
			wbArgs = append(wbArgs, strconv.FormatUint(f, 10))
		}
		// lock_fence's keys: the lock keys, the fence sequence.
		wbKeys := append(ls.keys[:n:n], ls.keys[2*n+1])
		wb := &op{name: "lock", script: scripts.LockFence, keys: wbKeys, args: wbArgs}
		// Write back to the others, stragglers included, and wait until a
		// quorum holds the fences.
		// The taints as this try saw them: the write-back's choices run
		// on the masters' readers, possibly after the call returned, while
		// the call's goroutine refreshes its taints (a data race, found in
		// CI, when read live).
		seen := make([]bool, len(e.nodes))
		for i := range seen {
			seen[i] = trusted(i)
		}
		ft, _ := e.spread(ctx, r, t.counted, holds, mayHold, func(i int) bool { return seen[i] }, wb)
		if ft.verdict != decidedYes {
			rollback()
			return nil, nil, ft.err(e, "lock")
		}
	}
	for _, f := range fences {
		e.fences.learn(f)
	}

	decided := e.now()
	validity := e.validity(ttl, start, decided)
	if validity <= 0 {
		rollback()
		return nil, nil, nil
	}
	lease := &Lease{
		Resources: ls.given,
		Token:     token,
		Fences:    make([]uint64, len(ls.given)),
		Validity:  validity,
		Start:     start,
		Decided:   decided,
		owner:     tr.owner,
		hold:      tr.hold,
		voters:    voters(r, t.counted, nil),
	}
	for i, p := range ls.pos {
		lease.Fences[i] = fences[p]
	}
	// A grant whose caller left is given back announced, as a release
	// is: the waiters it refused meanwhile sleep until told.
	return lease, func() { undo(true) }, nil
}

// giveBack is the plain lock_release of token, the rollback of a try
// and the release of a lease nobody will use. announce adds the release
// channels: only for a grant (given back because its caller left), which
// may have refused waiters that now sleep until a release announces
// itself; a failed try's rollback is not announced, so that contenders
// that keep colliding do not wake every waiter, over and over (their
// split votes retry soon, see retry).
func (ls *lockSet) giveBack(e *Engine, token string, announce bool) *op {
	args, keys := []string{token}, ls.unlockKeys(e)
	if announce {
		args = append(args, ls.channels...)
		if ls.n == 1 {
			// As a release: the head of a fair queue is the one to wake.
			keys = append(keys, e.fairKeys(ls.given[0])[0])
		}
	}
	return &op{name: "lock", script: scripts.LockRelease, keys: keys, args: args}
}

// lockAbandon releases a lease the caller will not use, in the background and
// whatever happens to ctx.
func (e *Engine) lockAbandon(ctx context.Context, l *Lease) {
	ls, err := e.lockSet(l.Resources)
	if err != nil {
		return
	}
	e.awaitForRelease(l.Token)
	// Announced, as a release is: nobody saw this grant, but the waiters
	// it refused sleep until told (or for their retry delay, a gap in
	// which nobody holds the lock).
	u := ls.giveBack(e, l.Token, true)
	u.name = "unlock"
	if l.owner != "" {
		u = ls.unacquireNX(e, l.Token, l.owner)
	}
	if l.hold != "" {
		u = e.unhold(ls, l.Token, l.hold, false)
	}
	u.timeout = e.releaseTimeout()
	e.send(ctx, u, nil)
}

// nxKeys are lock_acquire_nx's keys: the acquire keys up to the lease
// high-water mark, then the owner keys.
func (ls *lockSet) nxKeys(e *Engine) []string {
	keys := append(make([]string, 0, 3*ls.n+3), ls.acquireKeys[:2*ls.n+3]...)
	return append(keys, ls.ownerKeys(e)...)
}

// ownerKeys name, for each lock key, the owner nonce of the Exclusive
// attempt that set it.
func (ls *lockSet) ownerKeys(e *Engine) []string {
	out := make([]string, ls.n)
	for i, k := range ls.keys[:ls.n] {
		r := strings.TrimPrefix(k, e.opts.KeyPrefix)
		out[i] = e.resMeta(r, "owner:"+r)
	}
	return out
}

// unacquireNX is the rollback of an Exclusive attempt: only the keys whose
// owner key holds its nonce.
func (ls *lockSet) unacquireNX(e *Engine, token, owner string) *op {
	keys := append(make([]string, 0, 3*ls.n+1), ls.releaseKeys()...)
	keys = append(keys, ls.ownerKeys(e)...)
	return &op{name: "lock", script: scripts.LockUnacquireNX, keys: keys, args: []string{token, owner}}
}

// lockRelease releases the resources held with token wherever they are held. It
// reports true when they were held on a quorum up to the release, false
// when at least N - quorum + 1 masters said they were not held, and a
// *QuorumError when the answers that came in time decide neither. Releases
// still in flight when it returns carry on, whatever happens to ctx.
func (e *Engine) lockRelease(ctx context.Context, resources []string, token string) (held bool, err error) {
	return e.lockReleaseUntil(ctx, resources, token, time.Time{}, nil)
}

// lockReleaseUntil is lockRelease of a lease whose holder knows its
// validity ends at known (zero: unknown); an undecided release asks the
// silent masters again until then (releaseUntil), and counts the silent
// voters of note (nil: none) as holding it (confirm).
func (e *Engine) lockReleaseUntil(ctx context.Context, resources []string, token string, known time.Time, note *grantNote) (held bool, err error) {
	t0 := e.now()
	ls, err := e.lockSet(resources)
	if err != nil {
		return false, err
	}
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	e.awaitForRelease(token)
	args := make([]string, 0, 1+ls.n)
	args = append(args, token)
	args = append(args, ls.channels...)
	// The answers count only within MasterTimeout (the round's deadline),
	// but the releases themselves may take releaseTimeout to be sent and
	// answered.
	keys := ls.unlockKeys(e)
	if ls.n == 1 {
		// The resource may have fair waiters: the release hands off to
		// the head of their queue.
		keys = append(keys[:len(keys):len(keys)], e.fairKeys(ls.given[0])[0])
	}
	r := e.send(ctx, &op{name: "unlock", script: scripts.LockRelease, keys: keys, args: args, timeout: e.releaseTimeout(), keepLate: true}, nil)
	// It answers once decided: a lock sent through this proxy after the
	// answer follows the release on every master's connection, and one
	// through another proxy needs only the quorum that released.
	all := func(h any) bool { return h == int64(ls.n) }
	t := r.count(strictRule, func(_ int, v any) bool { h, _, _ := releaseReply(v); return all(h) || holdsOf(v) != nil })
	for i, c := range t.counted {
		if c && holdsOf(r.ans[i].val) != nil {
			// Re-entrant: nothing was released where holds are recorded.
			if t.verdict != decidedYes {
				return false, t.err(e, "unlock")
			}
			return e.releaseHold(ctx, ls, token, r)
		}
	}
	if t.verdict == noQuorum && e.retryReleases() {
		// A master that answers with holds (in time or late) holds the
		// lock re-entrantly: this release released nothing there, and
		// which hold to release is decided from answers in time only (as
		// above). Such an answer is "held", never "not held", and the
		// release is then undecided: the caller asks again.
		var reentrant atomic.Bool
		plain := releaseGroup(lockGroup(int64(ls.n)))
		group := func(i int, v any) (string, bool) {
			if holdsOf(v) != nil {
				reentrant.Store(true)
				return "holds", true
			}
			return plain(i, v)
		}
		held, err := e.confirm(ctx, r, group, true, "unlock", e.releaseUntil(ctx, t0, r, all, known), nil, note)
		if reentrant.Load() {
			return false, t.err(e, "unlock")
		}
		return held, err
	}
	return t.verdict == decidedYes, t.err(e, "unlock")
}

// extend resets the ttl of the resources of lease l, held with its
// token. It returns the new validity; 0 when the lease is known not to be
// extended on a quorum (at least N - quorum + 1 masters said so: it is
// lost); a *QuorumError when the answers that came in time decide
// neither. owned (drop-in mode's locks) also keeps the owner nonces of an
// Exclusive grant alive with its keys, so that deleteHeld can tell the
// grant from a later one with the same value however long it is
// extended. Other locks re-enrol the masters that lost them
// (docs/design/leases.md).
func (e *Engine) extend(ctx context.Context, l *Lease, ttl time.Duration, owned bool) (validity time.Duration, err error) {
	ls, err := e.lockSet(l.Resources)
	if err != nil {
		return 0, err
	}
	token := l.Token
	if ttl <= 0 || token == "" {
		return 0, fmt.Errorf("%w: ttl and token are required", ErrBadRequest)
	}
	keys := ls.withReaders(e, ls.lease)
	script := scripts.LockExtend
	var re *reenrolment
	if owned {
		script = scripts.LockExtendOwned
		keys = append(append(ls.locksAndFences()[:2*ls.n:2*ls.n], ls.lease), ls.ownerKeys(e)...)
	} else {
		re = &reenrolment{
			token: token,
			group: func() string { return "" },
			held:  func(_ int, v any) bool { return v == int64(ls.n) },
			take: func(r *round) *op {
				// As a TOKEN retry of the grant: the fences the lease
				// holds (when known) are the least each taken key gets.
				p := e.fences.next()
				for _, f := range l.Fences {
					p = max(p, f)
				}
				keys := slices.Clone(ls.acquireKeys)
				for _, k := range ls.keys[:ls.n] {
					keys = append(keys, e.brokenKey(strings.TrimPrefix(k, e.opts.KeyPrefix)))
				}
				args := []string{token, ms(ttl), strconv.FormatUint(p, 10), ms(e.opts.FenceLag)}
				if ls.n == 1 {
					// A re-entrant lock takes its holds with it, as a
					// quorum records them (docs/design/reentrant.md): one
					// more read, of the masters that hold it, only when
					// a master lost the lock.
					holds, known := e.heldHolds(ctx, ls, token, r)
					if !known {
						return nil // taken without its holds, one release would free it there
					}
					if len(holds) > 0 {
						keys = append(keys, e.holdsKey(ls.given[0]))
						args = append(args, holds...)
					}
				}
				return &op{name: "extend", script: scripts.LockReenrol, keys: keys, args: args}
			},
			taken: func(v any) bool {
				a, ok := decodeAcquire(v, ls.n)
				if ok {
					e.fences.learn(a.seq)
				}
				return ok && a.ok
			},
		}
	}
	return e.extendWith(ctx, ls, token, ttl, script, keys, re, l.knownEnd())
}

// extendWith runs an extension of the lock set ls with token: script (a
// lock_extend variant, answering how many lock keys it extended) on keys,
// counted by the extension's rule. With re it re-enrols the masters that
// answered "not held": after the reply when a quorum held it, or before
// the verdict when the lease is known valid until end (not zero).
func (e *Engine) extendWith(ctx context.Context, ls *lockSet, token string, ttl time.Duration, script *scripts.Script, keys []string, re *reenrolment, end time.Time) (validity time.Duration, err error) {
	t0 := e.now()
	if ttl <= 0 || token == "" {
		return 0, fmt.Errorf("%w: ttl and token are required", ErrBadRequest)
	}
	e.awaitAcquires(token)
	re = e.track4reenrol(re)
	r := e.send(ctx, &op{name: "extend", script: script, keys: keys,
		args: []string{token, ms(ttl), ms(e.opts.FenceLag)}, keepLate: true}, nil)
	t := r.count(strictRule, func(_ int, v any) bool { return v == int64(ls.n) })
	return e.extendVerdict(ctx, r, t, t.yes, re, end, t0, ttl, lockGroup(int64(ls.n)), "extend")
}

// extendVerdict finishes an extension whose first round r was counted
// (t; yes the masters that held it, of one group), re-enrolling with re
// (when not nil) and confirming an undecided round (group as confirm's)
// until the validity it would report ends.
func (e *Engine) extendVerdict(ctx context.Context, r *round, t *tally, yes int, re *reenrolment, end, t0 time.Time, ttl time.Duration, group func(int, any) (string, bool), opName string) (time.Duration, error) {
	valid := func() time.Duration { return max(e.validity(ttl, t0, e.now()), 0) }
	switch {
	case t.verdict == decidedYes:
		v := valid()
		if re != nil {
			e.reenrolLater(ctx, r, re, e.now().Add(v))
		}
		return v, nil
	case t.verdict == decidedNo:
		e.endReenrol(re)
		return 0, nil
	}
	// The masters that took the lease join the holders, for the count
	// and for confirm's.
	var seed map[int]string
	if re != nil && !end.IsZero() && e.now().Before(end) {
		took := e.reenrolNow(ctx, r, re, end)
		for i, ok := range took {
			if ok {
				if seed == nil {
					seed = map[int]string{}
				}
				seed[i] = re.group()
			}
		}
		if yes+len(seed) >= e.quorum {
			return valid(), nil
		}
	} else {
		e.endReenrol(re)
	}
	if !e.retryReleases() {
		return 0, t.err(e, opName)
	}
	if ok, err := e.confirm(ctx, r, group, false, opName, e.extendUntil(t0, ttl), seed, nil); !ok {
		return 0, err
	}
	return valid(), nil
}

// releaseHold is RUNLOCK of a re-entrant lock, whose release round r
// (a quorum held it) found holds: it takes away the last
// hold that a quorum of masters may record (the same hold id on every
// master, so a repeated RUNLOCK after a partial one takes the same away
// again, never a second), or, when at most one may be left, releases the
// lock on every master whatever holds a minority records. It reports
// true when a quorum held the lock up to the release (see
// docs/design/reentrant.md).
func (e *Engine) releaseHold(ctx context.Context, ls *lockSet, token string, r *round) (bool, error) {
	type holdAt struct {
		id    string
		order float64
	}
	// The count decided at a quorum; the holds are read from every
	// master that answers within the straggle grace, since a master not
	// heard from counts as holding every hold (below): deciding on the
	// first quorum alone would keep a hold only a slow master still
	// records, and the last RUNLOCK would leave the lock held.
	e.awaitRound(r, e.straggleGrace())
	count := map[holdAt]int{}
	missing := 0
	for i := range e.nodes {
		if !r.answered(i) || r.ans[i].err != nil {
			missing++
			continue
		}
		for id, o := range holdsOf(r.ans[i].val) {
			f, _ := strconv.ParseFloat(o, 64)
			count[holdAt{id, f}]++
		}
	}
	// A hold a quorum records is on masters that answered holding it or
	// did not answer (one that answered otherwise holds no lock): with
	// some masters silent, a hold seen on fewer than a quorum may still
	// be on one, and counts as held. Releasing the lock while a second
	// hold may be held would take the lock from under its holder.
	var agreed []holdAt
	for h, c := range count {
		if c+missing >= e.quorum {
			agreed = append(agreed, h)
		}
	}
	// The last hold by order (its id breaks ties), whichever masters
	// answered.
	slices.SortFunc(agreed, func(a, b holdAt) int {
		return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.id, b.id))
	})
	last := len(agreed) <= 1
	hold := ""
	if len(agreed) > 0 {
		hold = agreed[len(agreed)-1].id
	}
	u := e.unhold(ls, token, hold, last)
	u.timeout = e.releaseTimeout()
	ur := e.follow(ctx, r, u, nil, nil)
	ut := ur.count(strictRule, func(_ int, v any) bool { h, _, _ := releaseReply(v); return h == int64(1) })
	if ut.verdict == noQuorum {
		return false, ut.err(e, "unlock")
	}
	return ut.verdict == decidedYes, nil
}
