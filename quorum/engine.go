package quorum

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure an Engine. Zero values are replaced by the defaults
// named on each field.
type Options struct {
	// Quorum is how many masters must agree; 0 means floor(N/2)+1. A value
	// below the majority is refused by New.
	Quorum int
	// DriftFactor is the clock drift allowance as a fraction of the ttl;
	// default 0.01. The validity also loses a constant 2ms.
	DriftFactor float64
	// MasterTimeout bounds each request to each master; default 50ms.
	MasterTimeout time.Duration
	// RetryDelay and RetryJitter space the tries of a WAIT: each sleep is
	// RetryDelay +- a uniform RetryJitter; defaults 100ms and 50ms.
	RetryDelay  time.Duration
	RetryJitter time.Duration
	// KeyPrefix is prepended to a resource to form its lock key; default "".
	KeyPrefix string
	// MetaPrefix is the namespace of the proxy's own keys (fence counters,
	// channels); default "redlock-proxy:". It must not be empty.
	MetaPrefix string
	// HealthInterval is how often each master is pinged; default 1s.
	HealthInterval time.Duration
	// Quarantine is how long a master whose run_id changed (it restarted,
	// and may have lost its locks) does not vote: it should be the longest
	// ttl any grant may have (limits.max_ttl). 0 turns quarantine off.
	// Either way a restarted master votes again only after its fence floor
	// was raised from a quorum of the other masters.
	Quarantine time.Duration
	// Wakeups receives release notifications from the nodes; nil means
	// waiters retry on their timer only.
	Wakeups *Wakeups
	// Observer is told about every operation; nil means none.
	Observer Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Observer is told about operations and master calls, for metrics. It must
// be safe for concurrent use and must not block.
type Observer interface {
	// Operation reports one engine operation ("lock", "unlock", "extend")
	// with its outcome and how long it took.
	Operation(op string, outcome Outcome, d time.Duration)
	// MasterCall reports one request to one master.
	MasterCall(addr string, d time.Duration, err error)
}

// Outcome is how an operation ended.
type Outcome string

// The outcomes an Observer sees.
const (
	OutcomeOK       Outcome = "ok"        // granted, released while held, extended
	OutcomeRefused  Outcome = "refused"   // held by another, not held, lost
	OutcomeNoQuorum Outcome = "no_quorum" // fewer than quorum masters answered
	OutcomeCanceled Outcome = "canceled"  // the caller went away
	OutcomeError    Outcome = "error"     // bad request
)

// Engine runs Redlock over a fixed set of masters. It keeps no per-lock
// state: every call is independent, and it is safe for concurrent use.
type Engine struct {
	nodes  []Node
	opts   Options
	quorum int
	health []nodeHealth
	wake   *Wakeups
	log    *slog.Logger

	pools    []*workers     // one per master
	kick     chan struct{}  // wakes the health loop when a restart is seen
	maxFence atomic.Uint64  // the highest fence this engine issued
	bg       sync.WaitGroup // every request to a master still in flight
	// inflight maps a token to the *flight of its latest try, so that an
	// Unlock or Extend through this proxy is queued behind its acquires
	// (one pipelined connection per master keeps that order) and never
	// overtaken by a straggler.
	inflight sync.Map
	stop     context.CancelFunc
	loopWG   sync.WaitGroup
}

// New returns an engine over nodes. It starts the health loop; Close stops
// it.
func New(nodes []Node, opts Options) (*Engine, error) {
	if len(nodes) == 0 {
		return nil, errors.New("quorum: no masters")
	}
	if opts.DriftFactor == 0 {
		opts.DriftFactor = 0.01
	}
	if opts.MasterTimeout <= 0 {
		opts.MasterTimeout = 50 * time.Millisecond
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 100 * time.Millisecond
	}
	if opts.RetryJitter < 0 {
		opts.RetryJitter = 0
	}
	if opts.MetaPrefix == "" {
		opts.MetaPrefix = "redlock-proxy:"
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	q := len(nodes)/2 + 1
	if opts.Quorum != 0 {
		if opts.Quorum < q || opts.Quorum > len(nodes) {
			return nil, fmt.Errorf("quorum: quorum %d must be between %d and %d", opts.Quorum, q, len(nodes))
		}
		q = opts.Quorum
	}
	wake := opts.Wakeups
	if wake == nil {
		wake = NewWakeups()
	}
	e := &Engine{
		nodes:  nodes,
		opts:   opts,
		quorum: q,
		health: make([]nodeHealth, len(nodes)),
		wake:   wake,
		log:    opts.Logger,
		kick:   make(chan struct{}, 1),
	}
	for range nodes {
		e.pools = append(e.pools, newWorkers())
	}
	// Learn each master's run_id now (the nodes dial when they are built),
	// so that a restart before the first answer is still a restart.
	for i := range nodes {
		e.votes(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	e.loopWG.Add(1)
	go e.healthLoop(ctx)
	return e, nil
}

// Close stops the health loop and waits for rollbacks and releases still in
// flight. The nodes are not closed: they belong to the caller.
func (e *Engine) Close() {
	e.stop()
	e.loopWG.Wait()
	e.bg.Wait()
	for _, p := range e.pools {
		p.close()
	}
}

// Quorum is the number of masters that must agree.
func (e *Engine) Quorum() int { return e.quorum }

// Masters is N, the number of configured masters.
func (e *Engine) Masters() int { return len(e.nodes) }

// LockRequest asks for one lease over a set of resources.
type LockRequest struct {
	// Resources to lock, all or nothing. Duplicates count once.
	Resources []string
	// TTL is the lifetime of the keys on the masters.
	TTL time.Duration
	// Wait is how long to keep retrying while the resources are held;
	// 0 tries once.
	Wait time.Duration
	// Token is the caller's token; "" means a fresh random token per try.
	Token string
}

// Lease is a granted lock. It is a value: the engine keeps no copy.
type Lease struct {
	// Resources are the distinct resources, in the order first given.
	Resources []string
	// Token proves ownership; Unlock and Extend need it.
	Token string
	// Fences holds one fencing token per resource, parallel to Resources.
	Fences []uint64
	// Validity is how long the grant may be relied on, as computed at
	// Decided: ttl - (Decided - Start) - drift.
	Validity time.Duration
	// Start is when the successful attempt began.
	Start time.Time
	// Decided is when Validity was computed.
	Decided time.Time
}

// ValidityAt is the validity left at now: Validity less the time since it
// was computed. A caller about to reply calls it again, so that every step
// after the quorum counts.
func (l *Lease) ValidityAt(now time.Time) time.Duration {
	return l.Validity - now.Sub(l.Decided)
}

// NewToken returns 128 random bits from crypto/rand, hex-encoded.
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand never fails on supported platforms (Go 1.24+).
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// resourceSet is a request's resources, deduplicated and put in canonical
// order, with the way back to the order the caller gave.
type resourceSet struct {
	given []string // distinct, first-given order
	keys  Keys     // sorted by resource
	pos   []int    // pos[i] is the index in keys of given[i]
}

func (e *Engine) resources(rs []string) (*resourceSet, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no resources", ErrBadRequest)
	}
	seen := make(map[string]struct{}, len(rs))
	given := make([]string, 0, len(rs))
	for _, r := range rs {
		if r == "" {
			return nil, fmt.Errorf("%w: empty resource", ErrBadRequest)
		}
		if strings.HasPrefix(e.opts.KeyPrefix+r, e.opts.MetaPrefix) {
			return nil, ErrReservedResource
		}
		if _, dup := seen[r]; dup {
			continue
		}
		seen[r] = struct{}{}
		given = append(given, r)
	}
	sorted := slices.Clone(given)
	slices.Sort(sorted)
	s := &resourceSet{given: given, pos: make([]int, len(given))}
	s.keys.Locks = make([]string, len(sorted))
	s.keys.Fences = make([]string, len(sorted))
	s.keys.Channels = make([]string, len(sorted))
	for i, r := range sorted {
		s.keys.Locks[i] = e.opts.KeyPrefix + r
		s.keys.Fences[i] = e.opts.MetaPrefix + "fence:" + r
		s.keys.Channels[i] = e.opts.MetaPrefix + "released:" + r
	}
	s.keys.Floor, s.keys.HighWater = e.floorKeys()
	for i, r := range given {
		s.pos[i], _ = slices.BinarySearch(sorted, r)
	}
	return s, nil
}

// floorKeys are the master-wide fence floor and high-water mark keys.
func (e *Engine) floorKeys() (floor, highWater string) {
	return e.opts.MetaPrefix + "fence-floor", e.opts.MetaPrefix + "fence-hwm"
}

// Lock acquires a lease. It returns (lease, nil) when granted, (nil, nil)
// when a quorum answered but the resources are held (after Wait ran out),
// and a *QuorumError when fewer than a quorum answered on the last try.
// If ctx ends while waiting, it returns ctx's error and holds nothing.
//
// A caller that cannot deliver the lease (its validity ran out before the
// reply, see Lease.ValidityAt) must give it back with Abandon.
func (e *Engine) Lock(ctx context.Context, req LockRequest) (lease *Lease, err error) {
	t0 := time.Now()
	defer func() { e.observe("lock", t0, lease != nil, err) }()
	rs, err := e.resources(req.Resources)
	if err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("%w: ttl must be positive", ErrBadRequest)
	}
	fixed := req.Token != ""
	deadline := t0.Add(req.Wait)
	// tainted[i]: node i's rollback of an earlier try with the same token
	// was not acknowledged, so its vote cannot be trusted in this call.
	tainted := make([]bool, len(e.nodes))
	var w *watch
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	for {
		token := req.Token
		if !fixed {
			token = NewToken()
		}
		var tr *try
		lease, tr, err = e.attempt(ctx, rs, token, req.TTL, tainted, fixed)
		if lease != nil {
			if ctx.Err() != nil {
				// The caller left while we were granting: hold nothing.
				e.rollback(ctx, tr, nil)
				return nil, ctx.Err()
			}
			return lease, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, ErrNoQuorum) && err != nil {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, err
		}
		if w == nil {
			// Subscribe before the next try, so that a release between the
			// failed try and the subscription is not missed: the next try
			// runs at once and sees it.
			w = e.wake.watch(rs.keys.Channels, e.nodes)
			w.ready(ctx, e.opts.MasterTimeout)
			continue
		}
		if err := w.sleep(ctx, min(e.retryDelay(), time.Until(deadline))); err != nil {
			return nil, err
		}
	}
}

func (e *Engine) retryDelay() time.Duration {
	d := e.opts.RetryDelay
	if j := e.opts.RetryJitter; j > 0 {
		d += time.Duration(randv2.Int64N(int64(2*j)+1)) - j
	}
	return max(d, time.Millisecond)
}

func (e *Engine) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*e.opts.DriftFactor) + 2*time.Millisecond
}

// try is what one attempt sent: each master's acquire result, and a channel
// per master closed once that acquire returned. Anything sent to a master
// afterwards (fence write-back, rollback) waits for that channel, so that it
// is issued after the acquire and can never overtake it.
type try struct {
	rs       *resourceSet
	token    string
	fixed    bool
	acq      <-chan result[AcquireReply] // answers, for the first tally
	returned []chan struct{}
	res      []result[AcquireReply] // res[i] is set before returned[i] closes
}

// mayHold reports whether master i may hold the try's keys; valid once
// returned[i] is closed. Only a "taken" answer rules it out, and not even
// that with a fixed token, which may hold keys from an earlier call.
func (tr *try) mayHold(i int) bool {
	r := tr.res[i]
	return r.err != nil || r.val.OK || tr.fixed
}

// settledTry is a try whose acquires all returned and may all hold the
// keys: for giving back a lease.
func settledTry(rs *resourceSet, token string, n int) *try {
	tr := &try{rs: rs, token: token, returned: make([]chan struct{}, n), res: make([]result[AcquireReply], n)}
	for i := range n {
		tr.returned[i] = make(chan struct{})
		close(tr.returned[i])
		tr.res[i] = result[AcquireReply]{i: i, val: AcquireReply{OK: true}}
	}
	return tr
}

// acquire sends the try's acquire to every master.
func (e *Engine) acquire(ctx context.Context, tr *try, ttl time.Duration) {
	n := len(e.nodes)
	ch := make(chan result[AcquireReply], n)
	tr.acq = ch
	tr.returned = make([]chan struct{}, n)
	tr.res = make([]result[AcquireReply], n)
	fl := &flight{issued: make(chan struct{}), returned: make(chan struct{})}
	e.inflight.Store(tr.token, fl)
	var unissued, left atomic.Int32
	unissued.Store(int32(n))
	left.Store(int32(n))
	// One timeout for the round, cancelled once every acquire returned. The
	// acquires outlive the caller (a grant decided at quorum still reaches
	// the other masters); a caller that left is rolled back after the try.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(e.opts.MasterTimeout, ttl))
	finished := func() bool {
		if left.Add(-1) == 0 {
			cancel()
			return true
		}
		return false
	}
	e.bg.Add(n)
	for i := range n {
		tr.returned[i] = make(chan struct{})
		e.pools[i].run(func() {
			defer e.bg.Done()
			v, err := call(e, rctx, i, func(ctx context.Context, nd Node) (AcquireReply, error) {
				if unissued.Add(-1) == 0 {
					close(fl.issued)
				}
				return nd.Acquire(ctx, tr.rs.keys, tr.token, ttl)
			})
			if err == nil && !e.votes(i) {
				err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
			}
			r := result[AcquireReply]{i: i, val: v, err: err}
			tr.res[i] = r
			close(tr.returned[i])
			ch <- r
			if finished() {
				close(fl.returned)
				e.inflight.CompareAndDelete(tr.token, fl)
			}
		})
	}
}

// attempt is one Redlock try: acquire on a quorum, write the fences back,
// check validity. On failure it has rolled back before it returns.
func (e *Engine) attempt(ctx context.Context, rs *resourceSet, token string, ttl time.Duration, tainted []bool, fixed bool) (*Lease, *try, error) {
	start := time.Now()
	n := len(e.nodes)
	tr := &try{rs: rs, token: token, fixed: fixed}
	e.acquire(ctx, tr, ttl)

	fences := make([]uint64, len(rs.keys.Locks))
	counted := make([]bool, n)
	var errs []error
	ok, answered, pending := 0, 0, n
	deadline := time.NewTimer(min(e.opts.MasterTimeout, ttl) + roundGrace)
	defer deadline.Stop()
	for pending > 0 {
		r, in := receive(tr.acq, deadline.C)
		if !in {
			errs = append(errs, timedOut(pending))
			break
		}
		pending--
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.nodes[r.i].Addr(), r.err))
		} else {
			answered++
			if r.val.OK && !tainted[r.i] {
				ok++
				counted[r.i] = true
				for j, f := range r.val.Fences {
					if j < len(fences) && f > fences[j] {
						fences[j] = f
					}
				}
			}
		}
		if ok >= e.quorum || e.decidedAgainst(ok, answered, pending) {
			break
		}
	}
	if ok < e.quorum {
		e.rollback(ctx, tr, tainted)
		return nil, nil, e.refusal("lock", answered, errs)
	}

	// Each acquiring master raised its counters to max(counter, floor)+1
	// while taking the lock; the fence is the highest of those. A master
	// that returned exactly the fence already holds it, written under the
	// lock. When a quorum does (counters agree: the usual case), no
	// write-back is waited for.
	holdsFences := func(i int) bool {
		r := tr.res[i]
		if r.err != nil || !r.val.OK || len(r.val.Fences) != len(fences) {
			return false
		}
		for j, f := range r.val.Fences {
			if f != fences[j] {
				return false
			}
		}
		return true
	}
	acks := 0
	holder := make([]bool, n)
	for i := range n {
		if counted[i] && holdsFences(i) {
			holder[i] = true
			acks++
		}
	}
	// Write the fences back to every other master that may hold the lock,
	// each once its acquire returned (stragglers included: the more masters
	// hold a fence, the better it survives restarts). The write-backs
	// outlive this call, like rollbacks, each bounded by its timeout.
	fres := make(chan result[bool], n)
	wctx := context.WithoutCancel(ctx)
	sent := 0
	for i := range n {
		if holder[i] {
			continue
		}
		sent++
		e.bg.Add(1)
		e.pools[i].run(func() {
			defer e.bg.Done()
			<-tr.returned[i]
			switch {
			case !tr.mayHold(i):
				fres <- result[bool]{i: i} // answered: taken
				return
			case holdsFences(i) && !tainted[i]:
				fres <- result[bool]{i: i, val: true} // a straggler that holds it
				return
			}
			v, err := callTimeout(e, wctx, i, min(e.opts.MasterTimeout, ttl), func(ctx context.Context, nd Node) (bool, error) {
				return nd.SetFences(ctx, rs.keys, token, fences)
			})
			if err == nil && !e.votes(i) {
				err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
			}
			fres <- result[bool]{i: i, val: v, err: err}
		})
	}
	fanswered := acks
	pending = sent
	errs = errs[:0]
	deadline.Reset(min(e.opts.MasterTimeout, ttl) + roundGrace)
	for acks < e.quorum && pending > 0 {
		r, in := receive(fres, deadline.C)
		if !in {
			errs = append(errs, timedOut(pending))
			break
		}
		pending--
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.nodes[r.i].Addr(), r.err))
		} else {
			fanswered++
			if r.val && !tainted[r.i] {
				acks++
			}
		}
		if e.decidedAgainst(acks, fanswered, pending) {
			break
		}
	}
	if acks < e.quorum {
		e.rollback(ctx, tr, tainted)
		return nil, nil, e.refusal("lock", fanswered, errs)
	}

	decided := time.Now()
	validity := ttl - decided.Sub(start) - e.drift(ttl)
	if validity <= 0 {
		e.rollback(ctx, tr, tainted)
		return nil, nil, nil
	}
	lease := &Lease{
		Resources: rs.given,
		Token:     token,
		Fences:    make([]uint64, len(rs.given)),
		Validity:  validity,
		Start:     start,
		Decided:   decided,
	}
	for i, p := range rs.pos {
		lease.Fences[i] = fences[p]
	}
	for _, f := range fences {
		for {
			cur := e.maxFence.Load()
			if f <= cur || e.maxFence.CompareAndSwap(cur, f) {
				break
			}
		}
	}
	return lease, tr, nil
}

// decidedAgainst reports whether, with yes votes so far, the quorum can no
// longer be reached and a quorum has answered: the outcome is then the
// not-granted reply, final. When fewer than a quorum may answer, the caller
// waits for every master (each bounded by MasterTimeout), so that the
// NOQUORUM error reports exactly how many answered.
func (e *Engine) decidedAgainst(yes, answered, pending int) bool {
	return yes+pending < e.quorum && answered >= e.quorum
}

// refusal is the result of an operation that did not succeed: nil when a
// quorum answered (contention is not an error), a *QuorumError otherwise.
func (e *Engine) refusal(op string, answered int, errs []error) error {
	if answered >= e.quorum {
		return nil
	}
	return &QuorumError{Op: op, Got: answered, Need: e.quorum, Total: len(e.nodes), Errs: slices.Clone(errs)}
}

// rollback releases the try's keys on every master that may hold them, on
// a context the caller cannot cancel. Each master is released only once
// its acquire returned, so that the release is issued after the acquire and
// cannot be overtaken by it.
//
// With a caller-chosen token it waits for the answers and taints the
// masters that did not acknowledge, so that their votes are not counted in
// a later try of the same call (a late rollback could delete the key that
// try set).
func (e *Engine) rollback(ctx context.Context, tr *try, tainted []bool) {
	base := context.WithoutCancel(ctx)
	// No notifications: undoing a failed try would wake every waiter at
	// once, each of which fails the same way and wakes them again.
	quiet := tr.rs.keys
	quiet.Channels = nil
	var wg sync.WaitGroup
	n := len(e.nodes)
	e.bg.Add(n)
	wg.Add(n)
	for i := range n {
		e.pools[i].run(func() {
			defer e.bg.Done()
			defer wg.Done()
			<-tr.returned[i]
			if !tr.mayHold(i) {
				return
			}
			// A caller-chosen token waits for these answers, so they are
			// bounded by MasterTimeout (a master that does not acknowledge in
			// time is tainted instead); other rollbacks run in the
			// background and may take releaseTimeout.
			timeout := e.releaseTimeout()
			if tr.fixed {
				timeout = e.opts.MasterTimeout
			}
			_, err := callTimeout(e, base, i, timeout, func(ctx context.Context, nd Node) (int, error) {
				return nd.Release(ctx, quiet, tr.token)
			})
			if tr.fixed && err != nil {
				// Safe: with a fixed token the caller waits below.
				tainted[i] = true
			}
		})
	}
	if tr.fixed {
		wg.Wait()
	}
}

// Abandon releases a lease the caller will not use, in the background and
// whatever happens to ctx.
func (e *Engine) Abandon(ctx context.Context, l *Lease) {
	rs, err := e.resources(l.Resources)
	if err != nil {
		return
	}
	e.awaitAcquires(l.Token)
	e.rollback(ctx, settledTry(rs, l.Token, len(e.nodes)), nil)
}

// Unlock releases the resources held with token wherever they are held. It
// reports whether they were held on a quorum up to the release; a
// *QuorumError means fewer than a quorum answered. Releases still in flight
// when it returns carry on, whatever happens to ctx.
func (e *Engine) Unlock(ctx context.Context, resources []string, token string) (held bool, err error) {
	t0 := time.Now()
	defer func() { e.observe("unlock", t0, held, err) }()
	rs, err := e.resources(resources)
	if err != nil {
		return false, err
	}
	if token == "" {
		return false, fmt.Errorf("%w: empty token", ErrBadRequest)
	}
	e.awaitAcquires(token)
	want := len(rs.keys.Locks)
	// The answers count only within MasterTimeout (tally's round), but the
	// releases themselves may take releaseTimeout to be sent and answered.
	res := fanout(e, context.WithoutCancel(ctx), e.all(), e.releaseTimeout(), func(ctx context.Context, nd Node) (int, error) {
		return nd.Release(ctx, rs.keys, token)
	})
	// Once decided, give the other masters a short grace: a caller that
	// locks again right after a release should not meet a straggler, but a
	// paused master is not worth a whole MasterTimeout on every release.
	yes, answered, errs := tally(e, res, e.straggleGrace(), func(v int) bool { return v == want })
	if yes >= e.quorum {
		return true, nil
	}
	return false, e.refusal("unlock", answered, errs)
}

// Extend resets the ttl of the resources held with token. It returns the new
// validity, or 0 when the lease could not be extended on a quorum (it is
// lost). A *QuorumError means fewer than a quorum answered.
func (e *Engine) Extend(ctx context.Context, resources []string, token string, ttl time.Duration) (validity time.Duration, err error) {
	t0 := time.Now()
	defer func() { e.observe("extend", t0, validity > 0, err) }()
	rs, err := e.resources(resources)
	if err != nil {
		return 0, err
	}
	if ttl <= 0 || token == "" {
		return 0, fmt.Errorf("%w: ttl and token are required", ErrBadRequest)
	}
	e.awaitAcquires(token)
	want := len(rs.keys.Locks)
	res := fanout(e, context.WithoutCancel(ctx), e.all(), min(e.opts.MasterTimeout, ttl), func(ctx context.Context, nd Node) (int, error) {
		return nd.Extend(ctx, rs.keys, token, ttl)
	})
	yes, answered, errs := tally(e, res, -1, func(v int) bool { return v == want })
	if yes < e.quorum {
		return 0, e.refusal("extend", answered, errs)
	}
	validity = ttl - time.Since(t0) - e.drift(ttl)
	return max(validity, 0), nil
}

// tally counts a fan-out over all nodes until the outcome is decided; with
// settle >= 0 it then waits up to settle more for the other answers.
func tally[T any](e *Engine, res <-chan result[T], settle time.Duration, yes func(T) bool) (votes, answered int, errs []error) {
	pending := len(e.nodes)
	deadline := time.NewTimer(e.opts.MasterTimeout + roundGrace)
	defer deadline.Stop()
	decided := false
	for pending > 0 {
		r, in := receive(res, deadline.C)
		if !in {
			if !decided {
				errs = append(errs, timedOut(pending))
			}
			break
		}
		pending--
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.nodes[r.i].Addr(), r.err))
		} else {
			answered++
			if yes(r.val) {
				votes++
			}
		}
		if !decided && (votes >= e.quorum || e.decidedAgainst(votes, answered, pending)) {
			if settle < 0 {
				break
			}
			decided = true
			deadline.Reset(settle)
		}
	}
	return votes, answered, errs
}

// straggleGrace is how long a decided release still waits for the other
// masters: max(2ms, MasterTimeout/10).
func (e *Engine) straggleGrace() time.Duration {
	return max(2*time.Millisecond, e.opts.MasterTimeout/10)
}

func (e *Engine) all() []int {
	idx := make([]int, len(e.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (e *Engine) observe(op string, t0 time.Time, ok bool, err error) {
	if e.opts.Observer == nil {
		return
	}
	outcome := OutcomeRefused
	switch {
	case ok:
		outcome = OutcomeOK
	case errors.Is(err, ErrNoQuorum):
		outcome = OutcomeNoQuorum
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	case err != nil:
		outcome = OutcomeError
	}
	e.opts.Observer.Operation(op, outcome, time.Since(t0))
}

// releaseTimeout bounds a release or rollback that nobody waits for:
// 10 x MasterTimeout. A release sent late is harmless (it deletes only its
// own token's key); one given up before it could be sent (the client, like
// rueidis, does not send a request whose deadline passed) leaves the key on
// that master until its ttl, which a busy proxy would otherwise do under
// load.
func (e *Engine) releaseTimeout() time.Duration { return 10 * e.opts.MasterTimeout }

// roundGrace is how long after MasterTimeout a round still waits for
// answers before it counts the silent masters as timed out itself.
const roundGrace = 5 * time.Millisecond

// receive waits for the next answer, or reports false once the round's
// deadline passed: a master that has not answered by then counts as timed
// out even if the client library does not honour the deadline (rueidis
// does not while it redials). Its request carries on in the background.
func receive[T any](ch <-chan result[T], deadline <-chan time.Time) (result[T], bool) {
	select {
	case r := <-ch:
		return r, true
	case <-deadline:
		return result[T]{}, false
	}
}

func timedOut(n int) error {
	return fmt.Errorf("%d masters did not answer in time: %w", n, context.DeadlineExceeded)
}

// result is one master's answer in a fan-out.
type result[T any] struct {
	i   int
	val T
	err error
}

// fanout calls call on each target node in its own goroutine, each bounded
// by timeout, and returns a channel buffered for every answer: a reader may
// stop early and the stragglers never block. Close waits for them. The
// answer of a master whose vote does not count (see votes) is an
// ErrQuarantined error.
func fanout[T any](e *Engine, ctx context.Context, targets []int, timeout time.Duration, fn func(context.Context, Node) (T, error)) <-chan result[T] {
	ch := make(chan result[T], len(targets))
	if len(targets) == 0 {
		return ch
	}
	// One timeout for the round, cancelled once every call returned.
	rctx, cancel := context.WithTimeout(ctx, timeout)
	var left atomic.Int32
	left.Store(int32(len(targets)))
	finished := func() {
		if left.Add(-1) == 0 {
			cancel()
		}
	}
	e.bg.Add(len(targets))
	for _, i := range targets {
		e.pools[i].run(func() {
			defer e.bg.Done()
			v, err := call(e, rctx, i, fn)
			if err == nil && !e.votes(i) {
				// Checked after the answer: a restart is seen before the
				// first answer on the new connection is counted.
				err = fmt.Errorf("%s: %w", e.nodes[i].Addr(), ErrQuarantined)
			}
			ch <- result[T]{i: i, val: v, err: err}
			finished()
		})
	}
	return ch
}

// flight tracks the acquires of a try: issued closes once every one was
// handed to its master's client, returned once every one came back.
type flight struct {
	issued, returned chan struct{}
}

// awaitAcquires makes an Unlock or Extend through this engine come after
// the acquires of the latest try with the same token: it waits until they
// were all issued (at most MasterTimeout), then until they returned, but
// only for the straggle grace. On a healthy master the acquire has returned
// by then; a slow master's acquire was issued long before, on the same
// pipelined connection, so the release queues behind it.
func (e *Engine) awaitAcquires(token string) {
	v, ok := e.inflight.Load(token)
	if !ok {
		return
	}
	fl := v.(*flight)
	t := time.NewTimer(e.opts.MasterTimeout)
	defer t.Stop()
	select {
	case <-fl.issued:
	case <-t.C:
		return
	}
	t.Reset(e.straggleGrace())
	select {
	case <-fl.returned:
	case <-t.C:
	}
}

// callTimeout makes one request to node i, bounded by timeout.
func callTimeout[T any](e *Engine, ctx context.Context, i int, timeout time.Duration, fn func(context.Context, Node) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(e, cctx, i, fn)
}

// call makes one request to node i, bounded by ctx, and records its
// latency and error.
func call[T any](e *Engine, ctx context.Context, i int, fn func(context.Context, Node) (T, error)) (T, error) {
	t0 := time.Now()
	v, err := fn(ctx, e.nodes[i])
	d := time.Since(t0)
	e.health[i].record(d, err)
	if e.opts.Observer != nil {
		e.opts.Observer.MasterCall(e.nodes[i].Addr(), d, err)
	}
	return v, err
}
