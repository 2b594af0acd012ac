package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// Primitive names what a request asks for and what a lease is a grant
// of. Every primitive is acquired with Acquire; its lease is released,
// extended, abandoned and described with the same verbs, which dispatch
// on the lease's Primitive (see primitives).
type Primitive string

// The primitives.
const (
	// Lock is the exclusive lock over one resource or, all or nothing,
	// several (RLOCK, RMULTILOCK). It is also the writer of a read-write
	// lock: readers and plain lockers of a resource exclude each other.
	Lock Primitive = "lock"
	// Fair is the exclusive lock on one resource whose waiters are granted
	// in arrival order (RFAIRLOCK). A fair lease is released and extended
	// like a Lock lease.
	Fair Primitive = "fair"
	// Read is the shared lock on one resource (RRLOCK).
	Read Primitive = "read"
	// Semaphore is Count of a semaphore's Limit permits (RSEMACQUIRE);
	// Resources holds the semaphore's one name.
	Semaphore Primitive = "semaphore"
	// SetNX is drop-in mode's exclusive lock: SET NX's rule (a key that
	// exists is refused even when it holds the same value, so that two
	// callers that lock with one constant value never both win), with an
	// owner nonce beside each key so that a rollback, release or late
	// delete touches only this grant's keys. Its release deletes exactly
	// the grant a quorum holds (see deleteHeld); a Token of "" there
	// deletes whatever value a quorum holds (DEL).
	SetNX Primitive = "setnx"
	// Latch is a count-down latch (RLATCH): it is never acquired or
	// released, only driven with Engine.Latch and described with Info.
	Latch Primitive = "latch"
	// Election is a leader election (RELECT): a lock on the election
	// (Resources holds its one name) whose fence is the leader's term,
	// advertising the leader's Value. Info reads the leader as a quorum
	// agrees (Holder, Fence: the term, Value, TTL); Proclaim changes the
	// value and Elections().Watch follows the changes.
	Election Primitive = "election"
)

// Request asks for a lease.
type Request struct {
	// Primitive is what to acquire; "" is Lock.
	Primitive Primitive
	// Resources to lock, all or nothing (duplicates count once); one for
	// Fair, Read and Semaphore (the semaphore's name).
	Resources []string
	// TTL is the lifetime of the grant on the masters.
	TTL time.Duration
	// Wait is how long to keep retrying while the resources are held;
	// 0 tries once.
	Wait time.Duration
	// Token is the caller's token; "" means a fresh random token per try.
	Token string
	// Options are the primitive's own: SemaphoreOptions, ElectionOptions
	// or LockOptions, each defined with its primitive; nil for none.
	Options PrimitiveOptions
}

// PrimitiveOptions are one primitive's own request options.
type PrimitiveOptions interface {
	// For is the primitive they are options of.
	For() Primitive
}

// valueOptions is o as a value: a pointer to a primitive's options type
// also implements PrimitiveOptions, and is taken as what it points to (a
// nil one is a bad request).
func valueOptions(o PrimitiveOptions) (PrimitiveOptions, error) {
	var bad bool
	switch p := o.(type) {
	case *LockOptions:
		if bad = p == nil; !bad {
			return *p, nil
		}
	case *SemaphoreOptions:
		if bad = p == nil; !bad {
			return *p, nil
		}
	case *ElectionOptions:
		if bad = p == nil; !bad {
			return *p, nil
		}
	}
	if bad {
		return nil, fmt.Errorf("%w: nil options", ErrBadRequest)
	}
	return o, nil
}

// semOptions are req's semaphore options (zero if none).
func (r Request) semOptions() SemaphoreOptions {
	o, _ := r.Options.(SemaphoreOptions)
	return o
}

// lockOptions are req's lock options (zero if none).
func (r Request) lockOptions() LockOptions {
	o, _ := r.Options.(LockOptions)
	return o
}

// electOptions are req's election options (zero if none).
func (r Request) electOptions() ElectionOptions {
	o, _ := r.Options.(ElectionOptions)
	return o
}

// MaxHolds is how many re-entrant holds one lock may count.
const MaxHolds = 1000

// DefaultWaiterLife is Options.WaiterLife's default: a proxy that dies
// leaves its waiters' places and entries on the masters for at most this
// long.
const DefaultWaiterLife = time.Second

// resource is the one resource of a single-resource request ("" if it
// names several).
func (r Request) resource() string {
	if len(r.Resources) != 1 {
		return ""
	}
	return r.Resources[0]
}

// Lease is a grant of any primitive. It is a value: the engine keeps no
// copy. A caller may also build one from what a client sent (Primitive,
// Resources, Token) to release or extend a grant it did not acquire
// itself.
type Lease struct {
	// Primitive is what the lease is a grant of.
	Primitive Primitive
	// Resources are the distinct resources, in the order first given (a
	// semaphore's name).
	Resources []string
	// Token proves ownership; Release and Extend need it.
	Token string
	// Fences holds one fencing token per resource, parallel to Resources
	// (Lock, Fair and SetNX grants; an Election's term).
	Fences []uint64
	// Count is the number of permits of a Semaphore grant.
	Count int
	// Slots are the semaphore's slots the permits hold, each on a quorum.
	Slots []int
	// Validity is how long the grant may be relied on, as computed at
	// Decided: ttl - (Decided - Start) - drift. A caller that passes a
	// lease to Extend or Release with Validity and Decided set vouches
	// for them: an extension then re-enrols masters until that validity
	// ends, which is safe only while the lease truly holds a quorum (set
	// them only from the engine's own answers, never overstate them).
	Validity time.Duration
	// Start is when the successful attempt began.
	Start time.Time
	// Decided is when Validity was computed.
	Decided time.Time

	// owner is the owner nonce of a SetNX grant: Abandon gives back only
	// the keys it set.
	owner string
	// hold is the hold id of a re-entrant grant: Abandon gives back only
	// that hold.
	hold string
	// voters is, for each master, the connection its vote for the grant
	// came on (0: it did not vote), for the grant's note (grantNote).
	voters []uint64
	// note is the grant's note, on a lease being released.
	note *grantNote
}

// resource is the one resource of a single-resource lease.
func (l *Lease) resource() string {
	if len(l.Resources) != 1 {
		return ""
	}
	return l.Resources[0]
}

// primitive is what the engine's verbs do for one primitive: the one
// table they dispatch on. A primitive's scripts, key layout and answer
// rules live in its own file; this is how the verbs reach them.
type primitive struct {
	acquire func(e *Engine, ctx context.Context, req Request) (*Lease, error)
	release func(e *Engine, ctx context.Context, l *Lease) (bool, error)
	extend  func(e *Engine, ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error)
	abandon func(e *Engine, ctx context.Context, l *Lease)
	info    func(e *Engine, ctx context.Context, name string) (*Info, error)
	// single: the primitive takes exactly one resource.
	single bool
	// ops names each verb's operation for the Observer (metrics), in the
	// order acquire, release, extend, info.
	ops [4]string
	// scripts are the scripts the primitive runs (quorum/scripts), and
	// doc the design file that states its safety argument, a path from
	// the repository's root (docs/design/<primitive>.md, listed in the
	// package doc): TestPrimitiveChecklist checks both.
	scripts []*scripts.Script
	doc     string
}

// primitives is every primitive the engine serves (see "How to add a
// primitive" in the package doc).
func primitives() map[Primitive]primitive {
	lockInfo := func(e *Engine, ctx context.Context, name string) (*Info, error) { return e.lockInfo(ctx, name) }
	lockRelease := func(e *Engine, ctx context.Context, l *Lease) (bool, error) {
		return e.lockReleaseUntil(ctx, l.Resources, l.Token, l.knownEnd(), l.note)
	}
	lockExtend := func(e *Engine, ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
		return e.extend(ctx, l, ttl, false)
	}
	return map[Primitive]primitive{
		Lock: {
			acquire: (*Engine).lockAcquire,
			release: lockRelease,
			extend:  lockExtend,
			abandon: (*Engine).lockAbandon,
			info:    lockInfo,
			ops:     [4]string{"lock", "unlock", "extend", "lock_info"},
			scripts: []*scripts.Script{scripts.LockAcquire, scripts.LockAcquireWait, scripts.LockFence, scripts.LockRelease, scripts.TimeLeft, scripts.LockExtend, scripts.LockInfo, scripts.LockReenrol, scripts.LockBreak},
			doc:     "docs/design/locks.md",
		},
		SetNX: {
			acquire: (*Engine).lockAcquire,
			release: func(e *Engine, ctx context.Context, l *Lease) (bool, error) {
				// Each resource on its own (deleteHeld's two rounds are
				// per key): held only if every one was.
				all := true
				for _, r := range l.Resources {
					held, err := e.deleteHeld(ctx, r, l.Token)
					if err != nil {
						return false, err
					}
					all = all && held
				}
				return all, nil
			},
			extend: func(e *Engine, ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
				return e.extend(ctx, l, ttl, true)
			},
			abandon: (*Engine).lockAbandon,
			info:    lockInfo,
			ops:     [4]string{"lock", "delete", "extend", "lock_info"},
			scripts: []*scripts.Script{scripts.LockAcquireNX, scripts.LockUnacquireNX, scripts.LockOwner, scripts.LockDeleteExact, scripts.LockExtendOwned, scripts.LockDelete},
			doc:     "docs/design/drop-in.md",
		},
		Fair: {
			acquire: (*Engine).fairAcquire,
			release: lockRelease,
			extend:  lockExtend,
			abandon: (*Engine).fairAbandon,
			info:    lockInfo,
			single:  true,
			ops:     [4]string{"fairlock", "unlock", "extend", "lock_info"},
			scripts: []*scripts.Script{scripts.LockAcquireFair, scripts.FairEnqueue, scripts.FairTicket, scripts.FairDequeue},
			doc:     "docs/design/fair-locks.md",
		},
		Read: {
			acquire: (*Engine).readAcquire,
			release: func(e *Engine, ctx context.Context, l *Lease) (bool, error) {
				return e.readReleaseUntil(ctx, l.resource(), l.Token, l.knownEnd(), l.note)
			},
			extend: func(e *Engine, ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
				return e.readExtend(ctx, l, ttl)
			},
			abandon: (*Engine).readAbandon,
			info:    lockInfo,
			single:  true,
			ops:     [4]string{"read_lock", "read_unlock", "read_extend", "lock_info"},
			scripts: []*scripts.Script{scripts.RWAcquire, scripts.RWRelease, scripts.RWExtend, scripts.RWReenrol, scripts.RWLeave},
			doc:     "docs/design/rwlock.md",
		},
		Semaphore: {
			acquire: (*Engine).semAcquire,
			release: func(e *Engine, ctx context.Context, l *Lease) (bool, error) {
				return e.semReleaseUntil(ctx, l.resource(), l.Token, l.knownEnd(), l.note)
			},
			extend: func(e *Engine, ctx context.Context, l *Lease, ttl time.Duration) (time.Duration, error) {
				return e.semExtend(ctx, l, ttl)
			},
			abandon: (*Engine).semAbandon,
			info: func(e *Engine, ctx context.Context, name string) (*Info, error) {
				n, err := e.semCount(ctx, name)
				if err != nil {
					return nil, err
				}
				return &Info{Held: n > 0, Count: n}, nil
			},
			single:  true,
			ops:     [4]string{"sem_acquire", "sem_release", "sem_extend", "sem_count"},
			scripts: []*scripts.Script{scripts.SemAcquire, scripts.SemRelease, scripts.SemExtend, scripts.SemCount, scripts.SemSet, scripts.FairEnqueue, scripts.FairTicket, scripts.FairDequeue},
			doc:     "docs/design/semaphores.md",
		},
		Election: {
			acquire: (*Engine).electAcquire,
			release: (*Engine).electRelease,
			extend:  (*Engine).electExtend,
			abandon: (*Engine).electAbandon,
			info:    (*Engine).electLeader,
			single:  true,
			ops:     [4]string{"campaign", "resign", "elect_extend", "leader"},
			scripts: []*scripts.Script{scripts.ElectCampaign, scripts.LockFence, scripts.ElectProclaim, scripts.ElectExtend, scripts.ElectResign, scripts.ElectLeader, scripts.ElectTerm, scripts.BusPublish},
			doc:     "docs/design/election.md",
		},
		Latch: {
			info: func(e *Engine, ctx context.Context, name string) (*Info, error) {
				n, err := e.latchLeft(ctx, name)
				if err != nil {
					return nil, err
				}
				return &Info{Held: true, Count: n}, nil
			},
			single:  true,
			ops:     [4]string{"", "", "", "latch_count"},
			scripts: []*scripts.Script{scripts.LatchCreate, scripts.LatchDown, scripts.LatchCount},
			doc:     "docs/design/latches.md",
		},
	}
}

// Primitives lists the primitives the engine serves, for the tables that
// must name each of them (the command table, COMMAND DOCS, the
// every-subset test; see "How to add a primitive" in the package doc).
func Primitives() []Primitive {
	return []Primitive{Lock, Fair, Read, Semaphore, SetNX, Latch, Election}
}

// prim finds p's entry, "" meaning Lock, and checks that it has verb.
func (e *Engine) prim(p Primitive, verb string, resources []string) (primitive, error) {
	if p == "" {
		p = Lock
	}
	pr, ok := e.prims[p]
	var has bool
	switch verb {
	case "acquire":
		has = pr.acquire != nil
	case "release":
		has = pr.release != nil
	case "extend":
		has = pr.extend != nil
	case "info":
		has = pr.info != nil
	}
	if !ok || !has {
		return pr, fmt.Errorf("%w: %s cannot be %s", ErrBadRequest, p, verb+"d")
	}
	if pr.single && len(resources) != 1 {
		return pr, fmt.Errorf("%w: %s takes one resource", ErrBadRequest, p)
	}
	return pr, nil
}

// Acquire takes the lease req asks for. It returns (lease, nil) when
// granted, (nil, nil) when a quorum answered but the resources are held
// (after Wait ran out), and a *QuorumError when fewer than a quorum
// answered on the last try; a semaphore in use with another limit is a
// *LimitError. If ctx ends while waiting, it returns ctx's error and
// holds nothing.
//
// A caller that cannot deliver the lease (its validity ran out before the
// reply, see Lease.ValidityAt) must give it back with Abandon.
func (e *Engine) Acquire(ctx context.Context, req Request) (l *Lease, err error) {
	pr, err := e.prim(req.Primitive, "acquire", req.Resources)
	if err != nil {
		return nil, err
	}
	if req.Primitive == "" {
		req.Primitive = Lock
	}
	if req.Options, err = valueOptions(req.Options); err != nil {
		return nil, err
	}
	if req.Options != nil && req.Options.For() != req.Primitive {
		return nil, fmt.Errorf("%w: %s options for a %s", ErrBadRequest, req.Options.For(), req.Primitive)
	}
	defer e.observe(pr.ops[0], e.now(), func() bool { return l != nil }, &err)
	l, err = pr.acquire(e, ctx, req)
	if l != nil {
		l.Primitive = req.Primitive
		e.noteGrant(l)
	}
	return l, err
}

// Release gives back l wherever it is held (l may be built from a
// client's Primitive, Resources and Token). It reports true when the
// grant was held on a quorum up to the release, false when at least
// N - quorum + 1 masters said it was not held, and a *QuorumError when
// the answers that came in time decide neither. A grant made through
// this engine counts its voters that stay silent (grantNote). Releases
// still in flight when it returns carry on, whatever happens to ctx;
// they wake the primitive's waiters on every proxy.
func (e *Engine) Release(ctx context.Context, l *Lease) (held bool, err error) {
	pr, err := e.prim(l.Primitive, "release", l.Resources)
	if err != nil {
		return false, err
	}
	defer e.observe(pr.ops[1], e.now(), func() bool { return held }, &err)
	if n := e.takeNote(l); n != nil {
		nl := *l
		nl.note = n
		l = &nl
	}
	held, err = pr.release(e, ctx, l)
	return held, err
}

// Extend resets the ttl of l where it is held. It returns the new
// validity; 0 when the lease is known not to be extended on a quorum (it
// is lost); a *QuorumError when the answers that came in time decide
// neither. The fences do not change.
func (e *Engine) Extend(ctx context.Context, l *Lease, ttl time.Duration) (validity time.Duration, err error) {
	pr, err := e.prim(l.Primitive, "extend", l.Resources)
	if err != nil {
		return 0, err
	}
	defer e.observe(pr.ops[2], e.now(), func() bool { return validity > 0 }, &err)
	validity, err = pr.extend(e, ctx, l, ttl)
	return validity, err
}

// Abandon gives back a lease the caller will not use (its validity ran
// out before the reply, or its client left), in the background and
// whatever happens to ctx. Nobody saw the grant, so no waiter is woken
// for it.
func (e *Engine) Abandon(ctx context.Context, l *Lease) {
	if pr, err := e.prim(l.Primitive, "release", l.Resources); err == nil {
		e.takeNote(l)
		pr.abandon(e, ctx, l)
	}
}

// Info reports what a quorum of masters say about the resource name of
// primitive p: for locks, read locks and drop-in keys who holds it, for
// how long and with which fence; for a semaphore the permits with a live
// grant (Count); for a latch the arrivals still missing (Count), or
// ErrNoLatch. Fewer than a quorum of answers is a *QuorumError.
func (e *Engine) Info(ctx context.Context, p Primitive, name string) (info *Info, err error) {
	pr, err := e.prim(p, "info", []string{name})
	if err != nil {
		return nil, err
	}
	defer e.observe(pr.ops[3], e.now(), func() bool { return err == nil }, &err)
	info, err = pr.info(e, ctx, name)
	return info, err
}

// LatchOp is what Engine.Latch does to a latch.
type LatchOp int

// The latch operations.
const (
	// LatchCreate creates the latch waiting for Count arrivals and living
	// TTL: 1 when it created it, 0 when a quorum had it already with that
	// count; another count is a *LatchCountError.
	LatchCreate LatchOp = iota
	// LatchDown records one arrival identified by Token (the same token
	// counts once): the arrivals still missing as a quorum sees them
	// (0: open). The arrival that opens the latch wakes every waiter.
	LatchDown
	// LatchWait waits up to Wait until the latch is open on a quorum: 1
	// when open, 0 when the wait ran out. A latch that does not exist
	// yet is waited for; with Wait 0 it is ErrNoLatch.
	LatchWait
)

// LatchRequest asks Engine.Latch for one operation on the latch Name.
type LatchRequest struct {
	Op    LatchOp
	Name  string
	Count int
	TTL   time.Duration
	Token string
	Wait  time.Duration
}

// Latch runs one operation on a count-down latch and returns its integer
// answer (see LatchOp); the latch's count is read with Info.
func (e *Engine) Latch(ctx context.Context, req LatchRequest) (n int, err error) {
	t0 := e.now()
	switch req.Op {
	case LatchCreate:
		defer e.observe("latch_create", t0, func() bool { return err == nil }, &err)
		created, err := e.latchCreate(ctx, req.Name, req.Count, req.TTL)
		return b2i(created), err
	case LatchDown:
		defer e.observe("latch_down", t0, func() bool { return err == nil }, &err)
		return e.latchDown(ctx, req.Name, req.Token)
	case LatchWait:
		defer e.observe("latch_wait", t0, func() bool { return n == 1 }, &err)
		open, err := e.latchWait(ctx, req.Name, req.Wait)
		return b2i(open), err
	}
	return 0, fmt.Errorf("%w: unknown latch operation %d", ErrBadRequest, req.Op)
}

// Operations are the operation names the engine reports to its Observer,
// for the metrics' series that exist from the start.
func Operations() []string {
	seen := map[string]bool{}
	var out []string
	add := func(op string) {
		if op != "" && !seen[op] {
			seen[op] = true
			out = append(out, op)
		}
	}
	for _, p := range Primitives() {
		for _, op := range primitives()[p].ops {
			add(op)
		}
	}
	for _, op := range []string{"latch_create", "latch_down", "latch_wait", "delete", "proclaim", "sem_set", "lock_break"} {
		add(op)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Status is the engine's view of its masters.
type Status struct {
	// Masters has one entry per configured master, in order.
	Masters []NodeStatus
	// Quorum is how many masters must agree.
	Quorum int
	// MaxGrantedTTL is the longest ttl granted or extended since the
	// engine started (the ttl a quorum of masters set, whatever the
	// validity left): what limits.max_ttl, and so the longest
	// quarantine, could be lowered to.
	MaxGrantedTTL time.Duration
}

// Up is how many masters are up and voting.
func (s Status) Up() int {
	n := 0
	for _, m := range s.Masters {
		if m.State == StateUp {
			n++
		}
	}
	return n
}

// Ready reports whether a quorum of masters can vote for every resource:
// up, not quarantined, and for a cluster master every slot served by a
// shard that is up and voting.
func (s Status) Ready() bool {
	n := 0
	for _, m := range s.Masters {
		if m.State != StateUp {
			continue
		}
		if m.Shards != nil {
			slots := 0
			for _, sh := range m.Shards {
				if sh.Up {
					slots += sh.Slots - sh.Out
				}
			}
			if slots < Slots {
				continue
			}
		}
		n++
	}
	return n >= s.Quorum
}

// Status reports every master's state, the quorum and the longest ttl
// granted.
func (o Operator) Status() Status {
	e := o.e
	return Status{Masters: e.nodeStatus(), Quorum: e.quorum, MaxGrantedTTL: e.maxGrantedTTL()}
}

// EndQuarantine ends the quarantine of the restarted master named by
// master (its index in the configuration, "0", or its address)
// deliberately, on an operator's word (by names who, for the log): its
// votes count again as soon as its fence floor is raised from a quorum
// of the other masters, which it attempts at once. It returns the
// master's status afterwards (still quarantined, with 0 left, while the
// floor cannot be raised: the health loop keeps trying),
// ErrNotQuarantined, or ErrNoSuchMaster.
//
// This is safe only when no grant the master may have voted for before
// its restart is still live: the quarantine is the proxy's only defence
// when those grants' marks died with the masters (see
// docs/design/restarts.md), which is when it cannot be sized and lasts Quarantine.
func (o Operator) EndQuarantine(ctx context.Context, master, by string) (NodeStatus, error) {
	e := o.e
	i, err := e.master(master)
	if err != nil {
		return NodeStatus{}, err
	}
	return e.endQuarantine(ctx, i, by)
}
