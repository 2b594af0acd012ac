package quorum

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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
	// ReleaseRetry is how long a release (or extension) whose answers
	// within MasterTimeout decided nothing keeps asking the masters that
	// failed or stayed silent, before it answers no quorum (see
	// confirm): at most for an extension, at least for a release, which
	// asks until the validity of what it releases ends (releaseUntil);
	// default 1s, negative: not at all.
	ReleaseRetry time.Duration
	// RetryDelay and RetryJitter space the tries of a WAIT: each sleep is
	// RetryDelay +- a uniform RetryJitter; defaults 100ms and 50ms.
	RetryDelay  time.Duration
	RetryJitter time.Duration
	// KeyPrefix is prepended to a resource to form its lock key; default "".
	KeyPrefix string
	// MetaPrefix is the namespace of the proxy's own keys (fences,
	// channels); default "redlock-proxy:". It must not be empty.
	MetaPrefix string
	// Slotted selects the layout for Redis Cluster masters: every key one
	// script touches lives in one hash slot. Each key of a resource
	// carries, after MetaPrefix, the hash tag of its lock key's slot
	// ("{" + SlotTag(slot) + "}"), and the master-wide keys (fence
	// sequence, lagging bound, lease mark) become one per slot. It must be
	// the same on every proxy serving the same masters, and MetaPrefix
	// must then hold no "{" or "}". See docs/design/cluster.md.
	Slotted bool
	// HealthInterval is how often each master is pinged; default 1s.
	HealthInterval time.Duration
	// Quarantine is the longest a master whose run_id changed (it restarted,
	// and may have lost its locks) does not vote: it should be the longest
	// ttl any grant may have (limits.max_ttl). 0 turns quarantine off.
	// Either way a restarted master votes again only after its fence floor
	// was raised from a quorum of the other masters.
	Quarantine time.Duration
	// MaxTTL is the longest ttl any grant may have (limits.max_ttl): a
	// break mark (Break) lives that long. 0: only as long as the broken
	// grant had left on each master.
	MaxTTL time.Duration
	// FenceLag is how long a master's lagging fence bound lives before it
	// is taken again from the master's sequence, and how long a
	// resource's fence key outlives its lock's ttl (see
	// docs/design/fencing.md); default 1s.
	FenceLag time.Duration
	// WaiterLife is how long what a waiting call writes on a master (its
	// place in a fair queue, its waiting-set entry) outlives the call's
	// latest try: a proxy that dies leaves nothing that counts for longer
	// (see docs/design/waiters.md, "A dead proxy's waiters"). A waiting
	// call tries at least every WaiterLife/4, so a live one renews them in
	// time. Default 1s, and never less than 2 * (WaiterLife/4 +
	// MasterTimeout), the longest gap between two of a call's writes on
	// one master.
	WaiterLife time.Duration
	// MaxHolds is how many re-entrant holds one lock may count; 0 means
	// MaxHolds (the package's).
	MaxHolds int
	// Wakeups receives release notifications from the nodes; nil means
	// waiters retry on their timer only.
	Wakeups *Wakeups
	// Clock is the engine's time (see Clock); default the system clock.
	Clock Clock
	// Relay, if set, carries pub/sub messages between the proxies that
	// share the masters (package relay's Bus): New gives it the masters
	// (see Attacher). nil: none.
	Relay Attacher
	// Observer is told about every operation; nil means none.
	Observer Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// off switches safety mechanisms off (tests only: the simulation's
	// negative controls).
	off safetyOff
	// seed, if not 0, seeds the engine's random draws (entropy): tests
	// only, so that a simulated run replays exactly.
	seed uint64
}

// safetyOff names the safety mechanisms a test may switch off to show
// that the simulation catches their absence. The zero value, every
// mechanism on, is the only one outside tests.
type safetyOff struct {
	floor bool // a restarted master rejoins without its fence floor raised
	taint bool // an unacknowledged rollback of a fixed token taints nothing
	slots bool // a semaphore grant counts masters whatever slots they hold
	// intact: a master first met counts at once, its intact mark unread
	intact bool
	// writeBack: a grant's fence is not written back where a master gave
	// less (docs/design/fencing.md)
	writeBack bool
}

// Attacher is what carries messages between the proxies over the masters
// (Options.Relay): the engine only hands it the masters.
type Attacher interface {
	// Attach gives it the masters, the quorum, the meta prefix (its
	// channels live under it) and the master timeout. New calls it once,
	// with the defaults applied, before the engine makes any request.
	Attach(nodes []Node, quorum int, metaPrefix string, timeout time.Duration)
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
	clock  Clock
	// alarms holds the rounds' and counts' deadlines, on one timer.
	alarms *alarms
	// off switches safety mechanisms off, for the simulation's negative
	// controls only (TestSimulateCatches): it is never set outside tests.
	off safetyOff
	// rnd is where tokens and jitters come from (seeded in tests only).
	rnd *entropy

	kick chan struct{} // wakes the health loop when a restart is seen
	// intactMu makes checkIntact's checks one at a time.
	intactMu sync.Mutex
	fences   proposals      // fence proposals, above every fence seen
	bg       sync.WaitGroup // every request to a master still in flight
	// inflight maps a token to the *flight of its latest acquire, so that
	// a release or extension through this proxy is queued behind it (one
	// pipelined connection per master keeps that order) and never
	// overtaken by a straggler.
	inflight sync.Map
	// carried maps a fixed token to the *carried taints its calls left
	// (see carried); swept by the health loop.
	carried sync.Map
	// notes maps a noteKey to the *grantNote of a grant made here, until
	// its release (or its validity ended: swept by the health loop).
	notes sync.Map
	stop  context.CancelFunc
	life  context.Context // ends with Close: background repairs (Semaphores().Set)
	// closeMu guards closed against goBackground's Add racing Close.
	closeMu sync.Mutex
	closed  bool
	loopWG  sync.WaitGroup
	// grantedTTL is the longest ttl granted or extended, in ns
	// (MaxGrantedTTL).
	grantedTTL atomic.Int64
	// prims is what the verbs dispatch on (primitives).
	prims map[Primitive]primitive
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
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.ReleaseRetry == 0 {
		opts.ReleaseRetry = time.Second
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
	for _, n := range nodes {
		if _, ok := n.(ShardedNode); ok {
			opts.Slotted = true // cluster masters need it
		}
	}
	if opts.Slotted && strings.ContainsAny(opts.MetaPrefix, "{}") {
		return nil, fmt.Errorf("quorum: meta prefix %q must not hold a hash tag's braces with cluster masters", opts.MetaPrefix)
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = time.Second
	}
	if opts.FenceLag <= 0 {
		opts.FenceLag = time.Second
	}
	if opts.MaxHolds <= 0 {
		opts.MaxHolds = MaxHolds
	}
	if opts.WaiterLife <= 0 {
		opts.WaiterLife = DefaultWaiterLife
	}
	// The gap between two writes of a live waiter is a sleep of at most
	// WaiterLife/4 and a round of at most MasterTimeout: the life covers
	// two of them.
	opts.WaiterLife = max(opts.WaiterLife, 2*(opts.WaiterLife/4+opts.MasterTimeout))
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
		clock:  opts.Clock,
		alarms: newAlarms(opts.Clock),
		kick:   make(chan struct{}, 1),
		prims:  primitives(),
		off:    opts.off,
		rnd:    newEntropy(opts.seed),
	}
	for i, n := range nodes {
		if sn, ok := n.(ShardedNode); ok {
			sn.AttachFloors(func(ctx context.Context, slots []int, raised func(int)) error {
				_, err := e.raiseFloors(ctx, i, slots, raised)
				return err
			})
		}
	}
	if opts.Relay != nil {
		opts.Relay.Attach(nodes, q, opts.MetaPrefix, opts.MasterTimeout)
	}
	// Learn each master's run_id now (the nodes dial when they are built),
	// so that a restart before the first answer is still a restart.
	for i := range nodes {
		e.votes(i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.life = cancel, ctx
	// Read the intact marks before the first request: the masters that
	// answer vote from the start (bounded: the others are checked by the
	// health loop when they answer).
	e.checkIntact(ctx, -1)
	if err := e.olderProxy(ctx); err != nil {
		cancel()
		return nil, err
	}
	if opts.Slotted {
		e.learnUnslotted()
	}
	e.loopWG.Add(1)
	go e.healthLoop(ctx)
	return e, nil
}

// goBackground runs f on a goroutine that Close waits for, unless the
// engine is closed already (then f does not run).
func (e *Engine) goBackground(f func()) {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		return
	}
	e.loopWG.Add(1)
	go func() {
		defer e.loopWG.Done()
		f()
	}()
}

// Close stops the health loop and waits for rollbacks and releases still in
// flight. The nodes are not closed: they belong to the caller.
func (e *Engine) Close() {
	e.closeMu.Lock()
	e.closed = true
	e.closeMu.Unlock()
	e.stop()
	e.loopWG.Wait()
	e.bg.Wait()
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

func (e *Engine) retryDelay() time.Duration {
	d := e.opts.RetryDelay
	if j := e.opts.RetryJitter; j > 0 {
		d += time.Duration(e.rnd.int64N(int64(2*j)+1)) - j
	}
	return max(d, time.Millisecond)
}

// splitDelay is the wait after a try refused by a split vote: random in
// [1 ms, RetryDelay/4], so that the contenders whose tries split the
// masters try again soon and one at a time.
func (e *Engine) splitDelay() time.Duration {
	return time.Millisecond + time.Duration(e.rnd.int64N(int64(e.opts.RetryDelay/4)+1))
}

// validity is what is left of ttl for a grant whose attempt started at
// start: ttl - elapsed - (ttl*DriftFactor + 2ms). It is asked once per
// grant or extension a quorum of masters made, so it also records ttl for
// MaxGrantedTTL.
func (e *Engine) validity(ttl time.Duration, start, now time.Time) time.Duration {
	e.noteTTL(ttl)
	return ttl - now.Sub(start) - (time.Duration(float64(ttl)*e.opts.DriftFactor) + 2*time.Millisecond)
}

// observe tells the Observer, if any, how operation op that started at
// t0 ended: granted() or the error *errp.
func (e *Engine) observe(op string, t0 time.Time, granted func() bool, errp *error) {
	if e.opts.Observer == nil {
		return
	}
	err := *errp
	outcome := OutcomeRefused
	switch {
	case granted():
		outcome = OutcomeOK
	case errors.Is(err, ErrNoQuorum):
		outcome = OutcomeNoQuorum
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = OutcomeCanceled
	case err != nil:
		outcome = OutcomeError
	}
	e.opts.Observer.Operation(op, outcome, e.since(t0))
}

// releaseTimeout bounds a release or rollback that nobody waits for:
// 10 x MasterTimeout. A release sent late is harmless (it deletes only its
// own token's key); one given up before it could be sent (the client, like
// rueidis, does not send a request whose deadline passed) leaves the key on
// that master until its ttl, which a busy proxy would otherwise do under
// load.
func (e *Engine) releaseTimeout() time.Duration { return 10 * e.opts.MasterTimeout }

// straggleGrace is how long a release or extension waits for the
// acquires of its token's latest try to return (awaitForRelease,
// awaitAcquires): max(2ms, MasterTimeout/10).
func (e *Engine) straggleGrace() time.Duration {
	return max(2*time.Millisecond, e.opts.MasterTimeout/10)
}
