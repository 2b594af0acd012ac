package quorum

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// fairQueue is one fair-lock call's place in its resource's queue. Every
// request of the call follows the one before it on each master (last), so
// that a try, its rollback and the final dequeue land in order.
type fairQueue struct {
	// acquireKeys are lock_acquire_fair's keys: those of a writer that
	// waits (lockSet.waitKeys) with the queue and the deadlines appended.
	acquireKeys []string
	// queue and deadlines are the queue's keys: tokens by ticket, and by
	// the master's time after which the waiter counts as gone.
	queue, deadlines string
	// seq is the fence sequence the tickets come from (that of the
	// queue's slot with the slotted layout).
	seq     string
	channel string
	stale   time.Duration
	// id is the waiter's member in the queue, one per call: the caller's
	// token if it chose one, else random (the lock token is then fresh for
	// every try).
	id string
	// sent: a ticket was asked for, so the id may be queued somewhere.
	sent bool
	// ticket is the waiter's place: a fair lock's is its proxy's clock
	// when it took the command (µs), a semaphore waiter's is agreed by a
	// quorum (enqueue); 0 until it is to be queued.
	ticket uint64
	last   *round
	// placed is the round that wrote the ticket (enqueue's second), nil
	// before it. A semaphore's tries do not follow it (a fair lock's
	// do, through last): on a master known down, its ticket waits for
	// the enqueue's answer while a try skips the master, so the
	// waiter's departure, which follows its latest try, may reach the
	// master first, and the ticket then queues a waiter that left.
	// Leaving therefore follows this round too (semAcquire).
	placed *round
	// name is the operation its rounds report: "fairlock", or
	// "sem_acquire" for a semaphore's waiter (which queues the same way).
	name string
}

// fairKeys names a resource's queue and its deadlines.
func (e *Engine) fairKeys(resource string) [2]string {
	return [2]string{e.resMeta(resource, "fairq:"+resource), e.resMeta(resource, "fairq-dl:"+resource)}
}

// fairLock is a fair lock's try (lock_acquire_fair): it keeps its place
// in the resource's queue, and follows the call's previous request there
// on each master. mark is the call's writer-waiting mark ("" when it does
// not wait).
type fairLock struct {
	fq   *fairQueue
	mark string
}

func (f fairLock) shape(e *Engine, _ *lockSet, acq *op, _ string) try {
	fq := f.fq
	acq.script, acq.keys = scripts.LockAcquireFair, fq.acquireKeys
	acq.args = append(acq.args, e.markTTL(f.mark), f.mark, ms(fq.stale), strconv.FormatUint(fq.ticket, 10), fq.id)
	return try{after: fq}
}

// fairAcquire acquires a lock on one resource like Lock, but waiters are
// granted in the order they queued, across every proxy in front of the
// same masters. A try is refused while others queue ahead; a caller with
// a Wait is queued by its first try at the ticket of when the proxy took
// its command (see docs/design/fair-locks.md), and leaves the queue when
// it returns, granted or not. The lease is
// released with Unlock and extended with Extend, like Lock's.
func (e *Engine) fairAcquire(ctx context.Context, req Request) (lease *Lease, err error) {
	t0 := e.now()
	ls, err := e.requestSet(req, "a fair lock")
	if err != nil {
		return nil, err
	}
	fk := e.fairKeys(ls.given[0])
	// The caller's token, if it chose one, is also its id in the queue.
	fq := &fairQueue{queue: fk[0], deadlines: fk[1], seq: ls.keys[3], channel: ls.channels[0], stale: e.opts.WaiterLife, id: cmp.Or(req.Token, e.rnd.token()), name: "fairlock"}
	fl := fairLock{fq: fq}
	if req.Wait > 0 {
		fl.mark = fq.id
		// A waiter's place is when its proxy took the command: its ticket
		// is this proxy's clock then, in microseconds, the same on every
		// master, placed there by each of its tries (the first one
		// included) until it is granted or leaves; ties go by id, alike
		// on every master (docs/design/fair-locks.md).
		fq.ticket, fq.sent = uint64(t0.UnixMicro()), true
	}
	ls.waitKeys(e) // lock_acquire_fair reads the marks whether or not it waits
	fq.acquireKeys = append(append(make([]string, 0, len(ls.acquireKeys)+2), ls.acquireKeys...), fk[0], fk[1])
	// gaveBack: a grant raced the caller's exit and was rolled back, so
	// the lock is free and the new head must hear of it.
	gaveBack := false
	defer func() {
		if !fq.sent && !gaveBack {
			return // never queued: nothing to leave
		}
		mode := "1" // gave up: hand off if we were the head
		switch {
		case lease != nil:
			mode = "0" // granted: we hold the lock, nobody to wake
		case gaveBack:
			mode = "2"
		}
		o := &op{name: "fairlock", script: scripts.FairDequeue, keys: []string{fq.queue, fq.deadlines},
			args: []string{fq.id, fq.channel, mode}, timeout: e.releaseTimeout()}
		e.follow(ctx, fq.last, o, nil, nil)
	}()
	w := waiting{channels: ls.channels, fair: fq.id,
		// The caller left while we were granting: the lock is free
		// again and the next waiter must know at once.
		gaveBack: func() { gaveBack = true }}
	return e.acquireLoop(ctx, req, w, func(token string, tainted *taints, fixed bool) (*Lease, func(), error) {
		return e.attempt(ctx, ls, fl, token, req.TTL, tainted, fixed)
	})
}

// fairAbandon releases a fair lease the caller will not use (its client
// left before the reply), in the background, and tells the head of the
// queue at once.
func (e *Engine) fairAbandon(ctx context.Context, l *Lease) {
	ls, err := e.lockSet(l.Resources)
	if err != nil || ls.n != 1 {
		return
	}
	e.awaitForRelease(l.Token)
	fk := e.fairKeys(ls.given[0])
	r := e.send(ctx, &op{name: "unlock", script: scripts.LockRelease, keys: ls.unlockKeys(e), args: []string{l.Token},
		timeout: e.releaseTimeout()}, nil)
	e.follow(ctx, r, &op{name: "fairlock", script: scripts.FairDequeue, keys: fk[:],
		args: []string{"", ls.channels[0], "2"}, timeout: e.releaseTimeout()}, nil, nil)
}

// enqueue gives a fair waiter its ticket: it asks every master for one
// (max(proposal, the master's sequence + 1), or the token's ticket if it
// is queued there already), takes the highest of a quorum's answers, and
// writes it back to every master, returning once a quorum holds it. From
// then on the waiter's tries keep it queued at that ticket.
func (e *Engine) enqueue(ctx context.Context, fq *fairQueue) error {
	fq.sent = true
	keys := []string{fq.queue, fq.deadlines, fq.seq}
	r := e.follow(ctx, fq.last, &op{name: fq.name, script: scripts.FairEnqueue, keys: keys,
		args: []string{fq.id, strconv.FormatUint(e.fences.next(), 10), ms(fq.stale)}}, nil, nil)
	fq.last = r
	var ticket uint64
	t := r.count(grantRule, func(_ int, v any) bool {
		arr, ok := v.([]any)
		if !ok || len(arr) != 2 {
			return false
		}
		tk, ok1 := arr[0].(int64)
		seq, ok2 := arr[1].(int64)
		if !ok1 || !ok2 || tk <= 0 {
			return false
		}
		e.fences.learn(uint64(seq))
		ticket = max(ticket, uint64(tk))
		return true
	})
	if t.verdict != decidedYes {
		return t.err(e, fq.name)
	}
	e.fences.learn(ticket)
	wr := e.follow(ctx, r, &op{name: fq.name, script: scripts.FairTicket, keys: keys,
		args: []string{fq.id, strconv.FormatUint(ticket, 10), ms(fq.stale)}}, nil, nil)
	fq.last, fq.placed = wr, wr
	wt := wr.count(grantRule, func(_ int, v any) bool { return v == int64(1) })
	if wt.verdict != decidedYes {
		return wt.err(e, fq.name)
	}
	fq.ticket = ticket
	return nil
}
