package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// NodeState is a master's state as the engine last saw it.
type NodeState string

// The states of a master.
const (
	StateUp          NodeState = "up"
	StateDown        NodeState = "down"
	StateQuarantined NodeState = "quarantined"
)

// NodeStatus is a snapshot of one master's health, for INFO and metrics.
type NodeStatus struct {
	// Addr is the master's address.
	Addr string
	// State is quarantined while the master's vote does not count, else up
	// after its last request succeeded and down after it failed.
	State NodeState
	// QuarantineLeft is how long the quarantine still lasts (0 when none;
	// a master whose quarantine ended but whose fence floor is not raised
	// yet stays quarantined with 0 left).
	QuarantineLeft time.Duration
	// RunID is the master's run_id, "" if unknown.
	RunID string
	// Restarts counts the run_id changes seen since the proxy started.
	Restarts int
	// Latency is the duration of the last successful request.
	Latency time.Duration
	// LastError is the text of the failure that took the master down, ""
	// while it answers (a master back up does not keep its old error).
	LastError string
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// Why says why the master is quarantined ("" when it is not): the
	// restart, how the quarantine was sized, or what its rejoining waits
	// for.
	Why string
	// Shards are a cluster master's shards (nil for a single server).
	Shards []ShardStatus
}

type nodeHealth struct {
	mu sync.Mutex
	up bool
	// failing is set while the last request timed out or took longer
	// than master_timeout (unlike up, false before the first request).
	failing bool
	// lateRun counts the requests in a row that timed out or answered
	// late; probed is when the last fresh request was let through to a
	// master skipDown skips.
	lateRun   int
	lateAt    time.Time // when lateRun last grew
	probed    time.Time
	latency   time.Duration
	lastErr   string
	lastErrAt time.Time

	runID      string    // "" until the master told us
	conn       uint64    // the Identity.Conn last checked
	quarantine time.Time // votes do not count before
	needsFloor bool      // restarted: votes do not count until seeded
	// unchecked: first met, its intact mark not read yet (checkIntact);
	// votes do not count until it is.
	unchecked bool
	// lackSeen is when a check first found the unchecked master
	// without its intact mark while others had it.
	lackSeen time.Time
	sized    bool // the quarantine was sized by the others' leases
	// warned holds the restart-path warnings already logged for the
	// current restart (warnSizing, warnRejoin): each is logged once per
	// restart, not at every health tick while it lasts.
	warned      warnings
	restarts    int
	restartSeen time.Time
	// why is NodeStatus.Why while the master is quarantined.
	why string
}

// record notes one request's latency d and error; slow says d was longer
// than master_timeout (a request with a longer timeout, a release say,
// answered: the master is up, but too slow for a round to wait for).
//
// lateRun grows at most once per window (master_timeout): the requests
// pipelined to a master that one stall kept waiting (a GC pause, a
// starved proxy) time out together, and count as one late answer, not
// as one per request in flight.
func (h *nodeHealth) record(now time.Time, d time.Duration, err error, slow bool, window time.Duration) {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrShardNotVoting) {
		return // the caller left, or one shard is out: says nothing about the master
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Only a master that keeps requests waiting is down for the rounds: a
	// fast failure (not connected, refused) answers at once anyway, and
	// the master may be back by the next request.
	h.failing = slow || errors.Is(err, context.DeadlineExceeded)
	switch {
	case !h.failing:
		h.lateRun = 0
	case h.lateRun == 0 || now.Sub(h.lateAt) >= window:
		h.lateRun++
		h.lateAt = now
	}
	if err != nil {
		h.up = false
		h.lastErr = err.Error()
		h.lastErrAt = now
		return
	}
	if !h.up {
		// Back up: the failure that took it down is over.
		h.lastErr, h.lastErrAt = "", time.Time{}
	}
	h.up = true
	h.latency = d
}

// downAt reports, for each master, whether it is down now: its last
// request timed out or took longer than master_timeout (a master never
// asked yet is not down; one that fails at once is not waited for
// anyway). A master slowed past master_timeout
// otherwise flapped between down and up as answers to requests with
// longer timeouts (releases, rollbacks) came in.
func (e *Engine) downAt() []bool {
	down := make([]bool, len(e.nodes))
	for i := range e.health {
		h := &e.health[i]
		h.mu.Lock()
		down[i] = h.failing
		h.mu.Unlock()
	}
	return down
}

// skipAfter is how many late answers in a row (each in its own
// master_timeout window, see record) must come before fresh requests skip
// a master: one late answer on a busy machine (a GC pause, a loaded test
// runner) must not cost a master its votes.
const skipAfter = 3

// skipDown reports whether a fresh request (a new acquisition's first)
// may skip master i: its last skipAfter late answers came in a row, and a
// fresh request went to it less than a master_timeout ago. One such probe
// per master_timeout finds it back. A paused master is then not sent
// every request of the pause, which it would run as a backlog on resuming
// before answering anything in time. Not sending is a lost request,
// which Redlock tolerates; a grant still needs a quorum of yes. skipSet
// bounds how many masters one round skips.
func (e *Engine) skipDown(i int) bool {
	h := &e.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lateRun < skipAfter {
		return false
	}
	now := e.now()
	if now.Sub(h.probed) < e.opts.MasterTimeout {
		return true
	}
	h.probed = now
	return false
}

// skipSet is, for a fresh round, the masters it does not send to: those
// skipDown skips, but never more than N - quorum of them (those with the
// longest late runs), so that every fresh round asks at least a quorum of
// masters. Skipping alone therefore never makes a round answer NOQUORUM:
// that takes N - quorum + 1 masters failing or late in that round itself.
// A stall of the proxy makes every master late at once; the bound keeps
// its rounds asking a quorum, with every master up.
// With more than N - quorum masters really down no quorum answers anyway,
// and the least late of them is asked (a backlog of at most what it is
// sent while down).
func (e *Engine) skipSet() []bool {
	n := len(e.nodes)
	var cand []int
	for i := range n {
		if e.skipDown(i) {
			cand = append(cand, i)
		}
	}
	skip := make([]bool, n)
	if len(cand) == 0 {
		return skip
	}
	if most := n - e.quorum; len(cand) > most {
		late := make([]int, n)
		for _, i := range cand {
			late[i] = e.lateRunOf(i)
		}
		slices.SortStableFunc(cand, func(a, b int) int { return cmp.Compare(late[b], late[a]) })
		cand = cand[:most]
	}
	for _, i := range cand {
		skip[i] = true
	}
	return skip
}

// lateRunOf is how many requests to master i in a row timed out or
// answered late (skipDown's count), without probing.
func (e *Engine) lateRunOf(i int) int {
	h := &e.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lateRun
}

// votes reports whether node i's answers count. It first checks the run_id
// on the node's current connection: a changed run_id means the master
// restarted and may have lost its locks and fence counters, so it is
// quarantined and must have its fence floor raised before it votes again.
//
// The first run_id seen for a master cannot tell whether it restarted
// before the proxy met it: its votes wait until checkIntact has read its
// intact mark.
func (e *Engine) votes(i int) bool {
	id := e.nodes[i].Identity()
	h := &e.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	now := e.now()
	if id.Conn != h.conn {
		h.conn = id.Conn
		if id.RunID != "" {
			switch {
			case h.runID != "" && id.RunID != h.runID:
				h.restarts++
				e.restarted(i, h, now, fmt.Sprintf("restarted (run_id %s -> %s) %s: its votes wait until every grant it may have voted for expired (at most limits.max_ttl %v)",
					short(h.runID), short(id.RunID), now.UTC().Format(time.RFC3339), e.opts.Quarantine))
				e.log.Warn("master restarted: its votes do not count until its quarantine ends and its fence floor is raised",
					"master", e.nodes[i].Addr(), "old_run_id", h.runID, "run_id", id.RunID, "quarantine", e.opts.Quarantine)
			case h.runID == "" && !e.opts.Slotted && !e.off.intact:
				h.unchecked = true
				h.why = "first met: its intact mark is not read yet"
				e.kickHealth()
			}
			h.runID = id.RunID
		}
	}
	return !h.unchecked && !h.needsFloor && !now.Before(h.quarantine)
}

// restarted quarantines master i (h, locked) as restarted at now: its
// votes wait for the quarantine (at most Options.Quarantine, sized by
// sizeQuarantine) and for its fence floor (rejoin). why is NodeStatus.Why.
func (e *Engine) restarted(i int, h *nodeHealth, now time.Time, why string) {
	h.restartSeen = now
	h.needsFloor = true
	h.unchecked = false
	h.lackSeen = time.Time{}
	h.sized = false
	h.warned = 0
	h.why = why
	if e.opts.Quarantine > 0 {
		// At most this long; sizeQuarantine shortens it to the
		// longest grant still live on the other masters.
		h.quarantine = now.Add(e.opts.Quarantine)
	}
	e.kickHealth()
}

// kickHealth wakes the health loop.
func (e *Engine) kickHealth() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// intactKey is the master's intact mark: set (with no expiry) on a master
// whose data proxies trust, by the first proxies to meet a new set of
// masters and by every rejoin after a restart. A master without it while
// other masters have it restarted empty, or was down, since the proxies
// met it. See checkIntact.
func (e *Engine) intactKey() string { return e.opts.MetaPrefix + "intact" }

// checkIntact reads the intact mark of every master first met and not
// checked yet (votes), so that a master that restarted empty before this
// proxy met it (no proxy saw its run_id change) is quarantined as a
// restarted one, not counted at once.
//
// It asks every master, each bounded by four times MasterTimeout, whether
// it has the mark. A master first met that has it votes. One that lacks
// it while some master has it, at two checks at least four times
// MasterTimeout apart (the first may fall while another proxy marks new
// masters), restarted or missed the marking: it is quarantined and
// rejoins as a restarted master does, its mark set when its floor is
// (rejoin). When every master answers without it, the
// masters are new to the proxies (or were served only by versions
// without the mark): they are marked and vote. Otherwise the masters
// first met stay unchecked until a later call (every health tick)
// decides. Every master must answer for that: a master that was down
// when the others were marked lacks the mark too, and a quorum of such
// masters and restarted ones, with the marked masters unreachable, must
// not pass for new ones.
//
// word (not -1) is the master of an operator's RQUARANTINE END, whose
// word is that the masters are new: when that master answers and none
// that answered has the mark, those that answered are marked.
func (e *Engine) checkIntact(ctx context.Context, word int) {
	e.intactMu.Lock() // one check at a time: a check marks what it saw new
	defer e.intactMu.Unlock()
	var pending []int
	for i := range e.nodes {
		h := &e.health[i]
		h.mu.Lock()
		if h.unchecked {
			pending = append(pending, i)
		}
		h.mu.Unlock()
	}
	if len(pending) == 0 {
		return
	}
	mark := e.intactKey()
	has := make([]int8, len(e.nodes)) // 0: no answer, 1: has it, -1: lacks it
	e.eachMaster(ctx, func(ctx context.Context, j int) {
		v, err := e.call(ctx, j, &op{name: "intact", script: scripts.ListPresent, keys: []string{mark}})
		if arr, ok := v.([]any); err == nil && ok && len(arr) == 1 {
			has[j] = -1
			if arr[0] == int64(1) {
				has[j] = 1
			}
		}
	})
	some, lack := false, 0
	for _, x := range has {
		some = some || x == 1
		if x == -1 {
			lack++
		}
	}
	now := e.now()
	fresh := make([]bool, len(e.nodes))
	for _, i := range pending {
		h := &e.health[i]
		h.mu.Lock()
		switch {
		case !h.unchecked:
		case has[i] == 1:
			h.unchecked, h.why = false, ""
		case has[i] == -1 && some && !h.lackSeen.IsZero() && now.Sub(h.lackSeen) >= e.opts.MasterTimeout*4:
			e.restarted(i, h, now, fmt.Sprintf("first met %s without its intact mark, which other masters have: it restarted empty (or was down) since the proxies met it; its votes wait until every grant it may have voted for expired (at most limits.max_ttl %v)",
				now.UTC().Format(time.RFC3339), e.opts.Quarantine))
			e.log.Warn("master lacks its intact mark while others have it: quarantined as a restarted master",
				"master", e.nodes[i].Addr(), "quarantine", e.opts.Quarantine)
		case has[i] == -1 && some:
			// Seen once: another proxy may be marking new masters right
			// now. Still lacking at a later check, it restarted.
			if h.lackSeen.IsZero() {
				h.lackSeen = now
			}
			h.why = "first met without its intact mark, which other masters have: checking again before it is quarantined as restarted"
		case has[i] == -1 && (lack == len(e.nodes) || word >= 0 && has[word] != 0):
			fresh[i] = true
		case has[i] == -1:
			h.why = fmt.Sprintf("first met without its intact mark, as %d of the %d masters that answered: every master must answer once to tell new masters from restarted ones", lack, len(e.nodes))
		}
		h.mu.Unlock()
	}
	// Mark the new masters together (another proxy that reads them
	// meanwhile sees some marked, and checks again).
	lag, seq := e.fenceKeys("")
	e.eachMaster(ctx, func(ctx context.Context, i int) {
		if !fresh[i] {
			return
		}
		if _, err := e.call(ctx, i, &op{name: "intact", script: scripts.FenceFloor, keys: []string{seq, lag, mark}, args: []string{"0"}}); err != nil {
			return
		}
		h := &e.health[i]
		h.mu.Lock()
		if h.unchecked {
			h.unchecked, h.why = false, ""
		}
		h.mu.Unlock()
	})
}

// eachMaster runs f for every master at once, each with ctx bounded by
// four times MasterTimeout, and returns when all did.
func (e *Engine) eachMaster(ctx context.Context, f func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range e.nodes {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, e.opts.MasterTimeout*4)
			defer cancel()
			f(cctx, i)
		})
	}
	wg.Wait()
}

// nodeStatus returns a snapshot of every master, in configuration order.
func (e *Engine) nodeStatus() []NodeStatus {
	out := make([]NodeStatus, len(e.nodes))
	now := e.now()
	for i, nd := range e.nodes {
		h := &e.health[i]
		h.mu.Lock()
		st := StateDown
		if h.up {
			st = StateUp
		}
		left := max(h.quarantine.Sub(now), 0)
		if left > 0 || h.needsFloor || h.unchecked {
			st = StateQuarantined
		}
		why := ""
		if st == StateQuarantined {
			why = h.why
		}
		out[i] = NodeStatus{Addr: nd.Addr(), State: st, QuarantineLeft: left, RunID: h.runID, Restarts: h.restarts,
			Latency: h.latency, LastError: h.lastErr, LastErrorAt: h.lastErrAt, Why: why}
		h.mu.Unlock()
		if sn, ok := nd.(ShardedNode); ok {
			out[i].Shards = sn.Shards()
		}
	}
	return out
}

// up reports how many masters are up and voting.
func (e *Engine) up() int {
	n := 0
	for _, s := range e.nodeStatus() {
		if s.State == StateUp {
			n++
		}
	}
	return n
}

// healthLoop pings every master each HealthInterval (so that INFO shows a
// master's state, and a restart is noticed, even without lock traffic) and
// lets restarted masters rejoin once their quarantine is over.
func (e *Engine) healthLoop(ctx context.Context) {
	defer e.loopWG.Done()
	timeout := max(2*e.opts.MasterTimeout, 100*time.Millisecond)
	tick := e.clock.NewTimer(e.opts.HealthInterval)
	defer tick.Stop()
	var q quorumWatch
	for {
		e.pingAll(ctx, timeout)
		e.checkIntact(ctx, -1)
		if err := e.olderProxy(ctx); err != nil {
			e.log.Error("an older redlock-proxy granted on these masters since this one started: its grants may carry fences lower than this version's; stop it", "err", err)
		}
		q.check(e)
		e.sweepCarried()
		e.sweepNotes()
		tried := make([]bool, len(e.nodes))
		for i := range e.nodes {
			e.sizeQuarantine(ctx, i)
			tried[i] = e.dueToRejoin(i)
			e.rejoin(ctx, i)
		}
		// Wake at the earliest end of a quarantine too, so that a master
		// rejoins when its quarantine ends, not at the next tick.
		var end <-chan time.Time
		var endTimer Timer
		if d, ok := e.nextQuarantineEnd(tried); ok {
			endTimer = e.clock.NewTimer(d)
			end = endTimer.C()
		}
		select {
		case <-ctx.Done():
		case <-tick.C():
			tick.Reset(e.opts.HealthInterval)
		case <-e.kick:
		case <-end:
		}
		// A tick or a kick ready at the instant of the wake is taken
		// with it, whichever case select chose: its choice among ready
		// cases is random, and the next pass covers them both (this keeps
		// a simulated run's replay exact).
		select {
		case <-tick.C():
			tick.Reset(e.opts.HealthInterval)
		default:
		}
		select {
		case <-e.kick:
		default:
		}
		if endTimer != nil {
			endTimer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// pingAll pings every master at once, each bounded by timeout, records
// the outcome and checks the run_id of each connection (votes), so that a
// restart is noticed without lock traffic. It returns once every ping
// did (the health loop, which Close waits for, covers them: they are not
// counted among the engine's requests in flight).
func (e *Engine) pingAll(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for i, nd := range e.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			t0 := e.now()
			err := nd.Ping(cctx)
			e.record(i, e.since(t0), err)
			e.votes(i)
		}()
	}
	wg.Wait()
}

// nextQuarantineEnd is the time until the earliest quarantine still
// running ends; at most 0 for one that ended after its master's turn in
// the health loop's pass (tried[i] false: its rejoin was not due then),
// which no timer would wake the loop for.
func (e *Engine) nextQuarantineEnd(tried []bool) (time.Duration, bool) {
	now := e.now()
	var next time.Duration
	found := false
	for i := range e.health {
		h := &e.health[i]
		h.mu.Lock()
		// A quarantine that ended after its master's turn in the pass
		// (not tried) is due now: 0.
		if h.needsFloor && (h.quarantine.After(now) || !tried[i]) {
			if d := h.quarantine.Sub(now); !found || d < next {
				next, found = d, true
			}
		}
		h.mu.Unlock()
	}
	return next, found
}

// sizeQuarantine shortens the quarantine of restarted master i to what
// it must be: until every grant it may have voted for has expired.
//
// Every grant or extension raises, on each master that makes it, that
// master's lease high-water mark to its expiry (on the master's clock),
// and the mark expires then. A grant that i voted for before its restart
// was made by a quorum Q including i; a quorum Qr of the N-1 other masters
// shares a master with Q minus i (q + q-1 > N-1), whose mark lives at least
// until that grant expires. So the longest mark among the answers of a
// quorum of the others, measured after the restart was seen, bounds every
// such grant; grants made since do not count i's vote. The quarantine
// becomes that (plus drift and a round), never more than
// Options.Quarantine. Only masters that kept their data count; with fewer
// than a quorum of them the quarantine stays Options.Quarantine.
func (e *Engine) sizeQuarantine(ctx context.Context, i int) {
	h := &e.health[i]
	h.mu.Lock()
	due := h.needsFloor && !h.sized && e.now().Before(h.quarantine)
	conn := h.conn
	h.mu.Unlock()
	if !due {
		return
	}
	if e.opts.Slotted {
		// One lease mark per slot: the quarantine stays Options.Quarantine
		// (see docs/design/cluster.md).
		h.mu.Lock()
		if h.conn == conn && !h.sized {
			h.sized = true
			h.why = fmt.Sprintf("restarted %s; with cluster masters the quarantine is limits.max_ttl (%v)",
				h.restartSeen.UTC().Format(time.RFC3339), e.opts.Quarantine)
		}
		h.mu.Unlock()
		return
	}
	o := &op{name: "quarantine", script: scripts.LeaseLeft, keys: []string{e.leaseKey("")}}
	var until time.Time
	var longest time.Duration
	got := 0
	for _, a := range e.askOthers(ctx, i, o) {
		n, isInt := a.v.(int64)
		if a.err != nil || !isInt || !a.intact {
			continue
		}
		got++
		left := time.Duration(n) * time.Millisecond
		longest = max(longest, left)
		// The answer's arrival plus the time it gave.
		if at := a.at.Add(left); at.After(until) {
			until = at
		}
	}
	if got < e.quorum {
		h.mu.Lock()
		if h.conn == conn {
			h.why = fmt.Sprintf("restarted %s; its quarantine cannot be sized: %d of the other masters kept their data and answered, %d needed, so it stays at limits.max_ttl (%v) (see docs/troubleshooting.md, All masters quarantined)",
				h.restartSeen.UTC().Format(time.RFC3339), got, e.quorum, e.opts.Quarantine)
		}
		h.mu.Unlock()
		if h.warnOnce(warnSizing) {
			e.log.Warn("cannot size the quarantine of a restarted master yet: it stays at its longest until a quorum of the other masters answers (logged once per restart)",
				"master", e.nodes[i].Addr(), "answers", got, "needed", e.quorum, "quarantine_left", h.left(e.now()).Round(time.Millisecond))
		}
		return
	}
	margin := time.Duration(float64(longest)*e.opts.DriftFactor) + 2*e.opts.MasterTimeout + 2*time.Millisecond
	end := until.Add(margin)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != conn || h.sized {
		return // restarted again meanwhile: measure again
	}
	h.sized = true
	if end.Before(h.quarantine) {
		h.quarantine = end
	}
	h.why = fmt.Sprintf("restarted %s; sized by the longest grant still live on the other masters (%v)",
		h.restartSeen.UTC().Format(time.RFC3339), longest.Round(time.Millisecond))
	e.log.Info("quarantine of a restarted master sized by the longest live grant",
		"master", e.nodes[i].Addr(), "longest_grant_left", longest, "quarantine_left", e.until(h.quarantine).Round(time.Millisecond))
}

// dueToRejoin reports whether restarted master i's quarantine is over
// and its fence floor not raised yet.
func (e *Engine) dueToRejoin(i int) bool {
	h := &e.health[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.needsFloor && !e.now().Before(h.quarantine)
}

// rejoin raises the fence floor of restarted master i once its quarantine
// is over, and then lets it vote again.
//
// Why this keeps fences increasing: a fence F was written back to a quorum
// Qw before the restart. The floor is the highest fence written to each of
// a quorum Qr of the other masters. Qr (q masters out of the N-1 others)
// and Qw minus i (at least q-1 of the same N-1) share at least
// 2q-N >= 1 master, which holds F: so floor >= F, and any later grant whose
// quorum includes i reads at least F there and picks a larger fence.
//
// It returns the error that kept the master out, nil when it rejoined or
// was not due.
func (e *Engine) rejoin(ctx context.Context, i int) error {
	h := &e.health[i]
	h.mu.Lock()
	due := h.needsFloor && !e.now().Before(h.quarantine)
	conn := h.conn
	h.mu.Unlock()
	if !due {
		return nil
	}
	var floor uint64
	var err error
	if !e.off.floor {
		floor, err = e.raiseFloors(ctx, i, nil, nil)
	}
	if err != nil {
		h.mu.Lock()
		if h.conn == conn {
			h.why = fmt.Sprintf("quarantine over; its fence floor cannot be raised yet: %v", err)
		}
		h.mu.Unlock()
		if h.warnOnce(warnRejoin) {
			e.log.Warn("restarted master cannot rejoin yet: its quarantine is over but its fence floor cannot be raised; retrying every health tick (logged once per restart)",
				"master", e.nodes[i].Addr(), "err", err)
		}
		return err
	}
	e.votes(i) // notice a restart during the seeding
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == conn && h.needsFloor {
		h.needsFloor = false
		h.why = ""
		e.log.Info("restarted master rejoins", "master", e.nodes[i].Addr(), "fence_floor", floor,
			"after", e.since(h.restartSeen).Round(time.Millisecond))
	}
	return nil
}

// short is the start of a run_id, enough to tell two apart in a log line.
func short(runID string) string { return runID[:min(len(runID), 8)] }

// otherAnswer is one master's answer to askOthers.
type otherAnswer struct {
	v      any
	err    error
	at     time.Time // when it arrived
	intact bool      // the connection that answered saw no restart (votes)
}

// askOthers runs o on every master but i at once, each bounded by four
// times MasterTimeout, and returns the answers by master once all are in
// (the entry of i holds an error). Only the restart path uses it.
func (e *Engine) askOthers(ctx context.Context, i int, o *op) []otherAnswer {
	out := make([]otherAnswer, len(e.nodes))
	out[i].err = errors.New("not asked")
	var wg sync.WaitGroup
	for j := range e.nodes {
		if j == i {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, e.opts.MasterTimeout*4)
			v, err := e.call(cctx, j, o)
			cancel()
			// votes checks the run_id of the connection that answered: a
			// master that restarted unseen is not intact.
			out[j] = otherAnswer{v: v, err: err, at: e.now(), intact: e.votes(j)}
		})
	}
	wg.Wait()
	return out
}

// floorFromOthers is the highest fence floor or high-water mark among the
// other masters, at least a quorum of which must answer, and the highest
// fence this engine issued itself.
//
// Masters that also restarted and wait for their own floor are asked too:
// if fewer than a quorum kept their data the fence guarantee is void
// (PROTOCOL.md: "as long as fewer than a quorum of masters fail"), and
// refusing to rejoin would leave the service down for good after, say, a
// power cut that restarted every master. The engine then says so loudly and
// rejoins with the best floor it can find: what the others hold and what it
// issued itself.
func (e *Engine) floorFromOthers(ctx context.Context, i int, seq, old string) (uint64, error) {
	hw := &op{name: "floor", script: scripts.FenceHighwater, keys: []string{seq, old}}
	top := e.fences.high()
	got, intact := 0, 0
	for j, a := range e.askOthers(ctx, i, hw) {
		n, ok := a.v.(int64)
		if a.err == nil && (!ok || n < 0) {
			a.err = fmt.Errorf("%s: fence_highwater answered %v", e.nodes[j].Addr(), a.v)
		}
		if a.err != nil {
			continue
		}
		got++
		if a.intact {
			intact++
		}
		top = max(top, uint64(n))
	}
	if got < e.quorum {
		return 0, fmt.Errorf("%w: %d of the other masters answered, %d needed to raise the fence floor", ErrNoQuorum, got, e.quorum)
	}
	if intact < e.quorum {
		return top, &fewIntactError{intact: intact}
	}
	return top, nil
}

// fewIntactError is floorFromOthers' floor when fewer than a quorum of
// the masters that answered kept their data: the best known, not a bound.
type fewIntactError struct{ intact int }

func (f *fewIntactError) Error() string {
	return fmt.Sprintf("%d intact masters answered", f.intact)
}

// raiseFloors raises the fence floor of master i: from a quorum of the
// other masters (floorFromOthers), written to i's sequence. With the
// slotted layout there is one sequence per hash slot, and it does so for
// each of slots (every slot when slots is nil), some at a time, and calls
// raised (when not nil) for each slot whose floor it wrote: the first
// slot that fails stops the others, and what was written stays written.
// Without the slotted layout slots and raised are ignored. It returns the
// highest floor written.
func (e *Engine) raiseFloors(ctx context.Context, i int, slots []int, raised func(slot int)) (uint64, error) {
	one := func(ctx context.Context, seq, lag, old string) (uint64, bool, error) {
		floor, err := e.floorFromOthers(ctx, i, seq, old)
		var few *fewIntactError
		fewIntact := errors.As(err, &few)
		if err != nil && !fewIntact {
			return 0, false, err
		}
		keys := []string{seq, lag}
		if !e.opts.Slotted {
			keys = append(keys, e.intactKey()) // its data is trusted again
		}
		o := &op{name: "floor", script: scripts.FenceFloor, keys: keys, args: []string{strconv.FormatUint(floor, 10)}}
		cctx, cancel := context.WithTimeout(ctx, e.opts.MasterTimeout*4)
		_, err = e.call(cctx, i, o)
		cancel()
		return floor, fewIntact, err
	}
	if !e.opts.Slotted {
		lag, seq := e.fenceKeys("")
		floor, few, err := one(ctx, seq, lag, e.opts.MetaPrefix+"fence-floor")
		if err == nil && few {
			e.log.Error("fewer than a quorum of masters kept their data: fences may repeat; rejoining with the best floor known",
				"master", e.nodes[i].Addr(), "quorum", e.quorum, "fence_floor", floor)
		}
		return floor, err
	}
	if slots == nil {
		slots = make([]int, Slots)
		for s := range slots {
			slots[s] = s
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu          sync.Mutex
		top         uint64
		few         bool
		next        int
		wg          sync.WaitGroup
		parallelism = floorParallelism
	)
	for range min(parallelism, len(slots)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				if next == len(slots) {
					mu.Unlock()
					return
				}
				s := slots[next]
				next++
				mu.Unlock()
				floor, f, err := one(ctx, e.slotMeta(s, "fence-hwm"), e.slotMeta(s, "fence-lag"), e.slotMeta(s, "fence-floor"))
				if err != nil {
					cancel(fmt.Errorf("slot %d: %w", s, err))
					return
				}
				if raised != nil {
					raised(s)
				}
				mu.Lock()
				top, few = max(top, floor), few || f
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Said also when a later slot failed, if the slots raised rejoin
	// (reported to raised) with these floors.
	if few && (raised != nil || context.Cause(ctx) == nil) {
		e.log.Error("fewer than a quorum of masters kept their data: fences may repeat; rejoining with the best floors known",
			"master", e.nodes[i].Addr(), "quorum", e.quorum, "slots", len(slots), "highest_fence_floor", top)
	}
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return top, nil
}

// floorParallelism is how many slots' floors one raise has in flight.
// Each slot is three requests (the high-water mark on two other masters,
// the floor on the restarted one) on the connections that also carry the
// lock traffic and the health pings: with more in flight, a raise of
// thousands of slots on a loaded proxy queues them past master_timeout,
// the masters look slow, and the raise and the service fail together.
// At 16, two proxies each raising a restarted shard's 5461 slots in two
// clusters at once took about a second on an idle 2-core machine.
const floorParallelism = 16

// warnings is a set of the restart path's once-per-restart warnings.
type warnings uint8

const (
	warnSizing warnings = 1 << iota // the quarantine could not be sized
	warnRejoin                      // the fence floor could not be raised
)

// warnOnce reports whether warning w is due: true the first time in the
// current restart, false after.
func (h *nodeHealth) warnOnce(w warnings) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	due := h.warned&w == 0
	h.warned |= w
	return due
}

// left is how long the quarantine still lasts.
func (h *nodeHealth) left(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(h.quarantine.Sub(now), 0)
}

// quorumWatch logs when fewer than a quorum of masters are up and voting
// (at start too), and when a quorum is back: one line each, at the health
// tick that sees the change. Only the health loop uses it.
type quorumWatch struct {
	lost  bool
	since time.Time
}

func (w *quorumWatch) check(e *Engine) {
	st := e.nodeStatus()
	up := 0
	var out []string
	for _, s := range st {
		if s.State == StateUp {
			up++
		} else {
			out = append(out, s.Addr+" ("+string(s.State)+")")
		}
	}
	switch {
	case up < e.quorum && !w.lost:
		w.lost, w.since = true, e.now()
		e.log.Warn("quorum lost: fewer than a quorum of masters are up and voting; every command answers NOQUORUM until a quorum is back",
			"up", up, "quorum", e.quorum, "masters", len(st), "not_voting", out)
	case up >= e.quorum && w.lost:
		w.lost = false
		e.log.Info("quorum regained", "up", up, "quorum", e.quorum, "masters", len(st),
			"after", e.since(w.since).Round(time.Millisecond))
	}
}

// master finds a master by its index in the configuration ("0") or its
// address.
func (e *Engine) master(name string) (int, error) {
	if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < len(e.nodes) && strconv.Itoa(i) == name {
		return i, nil
	}
	for i, nd := range e.nodes {
		if nd.Addr() == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrNoSuchMaster, name)
}

// endQuarantine is EndQuarantine of master i.
func (e *Engine) endQuarantine(ctx context.Context, i int, by string) (NodeStatus, error) {
	if sn, ok := e.nodes[i].(ShardedNode); ok {
		n := sn.EndQuarantine()
		if n == 0 {
			return e.nodeStatus()[i], fmt.Errorf("%w: %s", ErrNotQuarantined, e.nodes[i].Addr())
		}
		e.log.Warn("QUARANTINE ENDED BY AN OPERATOR: the cluster's quarantined slots vote again once their fence floors are raised; a grant they voted for before their shard lost its data that is still live can now be granted to a second client",
			"master", e.nodes[i].Addr(), "by", by, "slots", n)
		return e.nodeStatus()[i], nil
	}
	h := &e.health[i]
	h.mu.Lock()
	if h.unchecked {
		// Not checked yet: no master has the intact mark and one does
		// not answer. The operator's word is that the masters are new
		// (or kept their data): those that answer are marked and vote.
		// A master without the mark while others have it is quarantined
		// as restarted instead, and ended below.
		h.mu.Unlock()
		e.checkIntact(ctx, i)
		h.mu.Lock()
		if h.unchecked {
			h.mu.Unlock()
			return e.nodeStatus()[i], fmt.Errorf("%w: %s does not answer", ErrNoQuorum, e.nodes[i].Addr())
		}
		if !h.needsFloor {
			h.mu.Unlock()
			e.log.Warn("MASTERS DECLARED NEW BY AN OPERATOR: the masters without an intact mark that answered are marked and vote; one that restarted unseen while a grant it voted for is live can now grant it to a second client",
				"master", e.nodes[i].Addr(), "by", by)
			return e.nodeStatus()[i], nil
		}
	}
	now := e.now()
	if !h.needsFloor {
		h.mu.Unlock()
		return e.nodeStatus()[i], fmt.Errorf("%w: %s", ErrNotQuarantined, e.nodes[i].Addr())
	}
	left := max(h.quarantine.Sub(now), 0)
	h.quarantine = now
	h.why = "quarantine ended by " + by + "; waiting for its fence floor to be raised"
	since := now.Sub(h.restartSeen).Round(time.Millisecond)
	h.mu.Unlock()
	e.log.Warn("QUARANTINE ENDED BY AN OPERATOR: the restarted master's votes count again once its fence floor is raised; a grant it voted for before its restart that is still live can now be granted to a second client",
		"master", e.nodes[i].Addr(), "by", by, "quarantine_left", left.Round(time.Millisecond), "restarted_ago", since)
	e.rejoin(ctx, i)
	return e.nodeStatus()[i], nil
}

// maxGrantedTTL is the longest ttl granted or extended since the engine
// started (the ttl a quorum of masters set, whatever the validity left):
// what limits.max_ttl, and so the longest quarantine, could be lowered to.
func (e *Engine) maxGrantedTTL() time.Duration { return time.Duration(e.grantedTTL.Load()) }

// noteTTL records a ttl a quorum of masters set, for MaxGrantedTTL.
func (e *Engine) noteTTL(ttl time.Duration) {
	for {
		cur := e.grantedTTL.Load()
		if int64(ttl) <= cur || e.grantedTTL.CompareAndSwap(cur, int64(ttl)) {
			return
		}
	}
}

// olderProxy reports ErrOlderProxy, naming the master, when a master holds
// the lagging fence bound that proxies before the per-master-sequence
// fences create at every grant and that lives FenceLag: an older proxy
// granted there within that time. Masters that do not answer are passed
// over. With the slotted layout (one bound per hash slot) it checks
// nothing.
func (e *Engine) olderProxy(ctx context.Context) error {
	if e.opts.Slotted {
		return nil
	}
	lag, _ := e.fenceKeys("")
	found := make([]bool, len(e.nodes))
	e.eachMaster(ctx, func(ctx context.Context, j int) {
		t0 := e.now()
		n, err := e.nodes[j].Exists(ctx, lag)
		e.record(j, e.since(t0), err)
		found[j] = err == nil && n > 0
	})
	for j, f := range found {
		if f {
			return fmt.Errorf("%w (master %s holds %s)", ErrOlderProxy, e.nodes[j].Addr(), lag)
		}
	}
	return nil
}
