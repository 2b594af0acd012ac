package redisnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// ClusterOptions configure a Cluster.
type ClusterOptions struct {
	// Seeds are addresses (host:port) of some of the cluster's nodes; the
	// others are learnt from them (CLUSTER NODES).
	Seeds []string
	// Node is the template of every shard's Node: credentials, TLS,
	// timeouts, the notification callbacks and the logger (Addr and
	// Sharded are set per shard).
	Node Options
	// Quarantine is how long a shard that restarted or failed over does
	// not vote (limits.max_ttl, as the engine's Options.Quarantine). Its
	// fence floors are raised after it either way.
	Quarantine time.Duration
	// RefreshInterval spaces the reads of the slot map, and the checks of
	// the shards' identities and quarantines; default 1s. A redirection
	// (MOVED) makes one at once.
	RefreshInterval time.Duration
}

// ErrShardOut fails a request for a slot whose shard does not vote: it
// restarted or failed over and is quarantined, or its fence floors are not
// raised yet.
var ErrShardOut = fmt.Errorf("redisnode: cluster shard quarantined: %w", quorum.ErrShardNotVoting)

// errMoving fails a request redirected while its slot moves (TRYAGAIN, or
// a redirection not followed).
var errMoving = fmt.Errorf("redisnode: slot moving: %w", quorum.ErrShardNotVoting)

// ErrNoSlotMap fails requests while no node of the cluster told its slot
// map.
var ErrNoSlotMap = errors.New("redisnode: cluster slot map unknown")

// ErrCrossSlot fails a request whose keys live in several hash slots, which
// a cluster cannot run in one script.
var ErrCrossSlot = errors.New("redisnode: keys in different hash slots")

// errNoListing fails RLOCKLIST's scan on a cluster.
var errNoListing = errors.New("redisnode: listing (RLOCKLIST) does not scan cluster masters")

// Cluster is one of the engine's masters made of a Redis Cluster: it
// implements quorum.Node, and quorum.ShardedNode. Each request goes to the
// shard serving the hash slot of its keys (the engine's slotted layout
// puts every key of one script in one slot, and splits calls over several
// slots), over that shard's Node: one pipelined connection, batching
// across clients per shard (Options.Sharded batches only requests of one
// slot together).
//
// Routing follows the slot map read with CLUSTER NODES from any node it
// knows, read again every RefreshInterval and at once after a MOVED. A
// request that met a MOVED is sent again once the map was read again, by
// that map (which first decides whether the new owner lost data); an ASK
// to a healthy master is followed with ASKING on the target's connection;
// a second redirection, TRYAGAIN and CLUSTERDOWN fail the request (the
// engine counts a missing vote and tries again).
//
// Slots whose data may be lost do not vote (quorum.ErrShardNotVoting)
// until Quarantine is over and the engine raised their fence floors (see
// docs/design/cluster.md). The quarantine belongs to
// the slots, wherever they move meanwhile. Lost data is seen three ways:
// the run_id read on a new connection to a shard changed (the process
// restarted, maybe empty): its slots; a node took over slots while it was
// not a healthy master (a failover: the promoted replica may miss the last
// writes): those slots; a master's replication id changed between two
// readings of the map (it was promoted, or restarted, unseen): its slots.
// Slots that move between masters that stay masters (a resharding) move
// with their keys and need nothing. A request for a slot out of the vote
// fails at once, except the engine's fence floor reads and writes.
//
// Release notifications and the proxies' pub/sub messages use the first
// seed's subscriber: a cluster carries a PUBLISH to all its nodes.
type Cluster struct {
	opts ClusterOptions
	log  *slog.Logger
	name string

	mu     sync.Mutex
	shards map[string]*shard // by address; pruned once gone from the cluster
	sub    *Node             // subscriptions

	table atomic.Pointer[slotTable]
	raise atomic.Pointer[raiseFunc]

	// q is each slot's quarantine; qmu orders its changes (out is read
	// without it).
	qmu sync.Mutex
	q   [quorum.Slots]slotQuarantine

	kick       chan struct{}
	rejoinKick chan struct{}

	// moved are the requests a MOVED sends again after the next reading
	// of the map.
	movedMu sync.Mutex
	moved   []func()
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// slotQuarantine is one slot's quarantine: out while its votes do not
// count, until when at least, gen counting its quarantines. Written under
// Cluster.qmu; out is also read without it.
type slotQuarantine struct {
	out   atomic.Bool
	until atomic.Int64 // unix nanoseconds
	gen   uint32
	// wanted is set when a request asked for the slot after its
	// quarantine ended, while its floor was not raised yet (rejoin).
	wanted atomic.Bool
}

// slotTable is one reading of the slot map.
type slotTable struct {
	owner   [quorum.Slots]*shard
	masters map[string]bool // addresses of the healthy masters
	ids     []string        // the node IDs the map lists
}

// ownerOf is the owner of slot in t (nil for none, or no t).
func (t *slotTable) ownerOf(slot int) *shard {
	if t == nil {
		return nil
	}
	return t.owner[slot]
}

// shard is one node of the cluster.
type shard struct {
	addr string
	node *Node

	mu        sync.Mutex
	runID     string // the run_id its votes count for, "" until known
	replID    string // its replication id at the last reading, "" until known
	restarts  int
	failovers int
	why       string // the last reason its slots were quarantined
	missing   int    // readings of the map in a row that did not list it
}

var _ quorum.ShardedNode = (*Cluster)(nil)

// NewCluster returns a Cluster for opts.Seeds. It reads the slot map once,
// synchronously; if no seed answers it keeps trying in the background and
// NewCluster still succeeds (requests fail with ErrNoSlotMap meanwhile).
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	if len(opts.Seeds) == 0 {
		return nil, errors.New("redisnode: a cluster needs at least one seed")
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = time.Second
	}
	if opts.Node.Logger == nil {
		opts.Node.Logger = slog.Default()
	}
	c := &Cluster{
		opts:       opts,
		name:       "cluster(" + strings.Join(opts.Seeds, ",") + ")",
		shards:     map[string]*shard{},
		kick:       make(chan struct{}, 1),
		rejoinKick: make(chan struct{}, 1),
	}
	c.log = opts.Node.Logger.With("master", c.name)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	sub, err := c.shardAt(opts.Seeds[0])
	if err != nil {
		return nil, err
	}
	c.sub = sub.node
	if err := c.refresh(); err != nil {
		c.log.Warn("cluster slot map not read; retrying in the background", "err", err)
	}
	c.wg.Add(2)
	go c.loop()
	go c.rejoinLoop()
	return c, nil
}

// shardAt returns the shard at addr, connecting to it the first time (not
// under c.mu: a dial may take DialTimeout).
func (c *Cluster) shardAt(addr string) (*shard, error) {
	c.mu.Lock()
	s, ok := c.shards[addr]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	o := c.opts.Node
	o.Addr, o.Sharded = addr, true
	n, err := New(o)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.shards[addr]; ok {
		n.Close() // dialled meanwhile
		return s, nil
	}
	s = &shard{addr: addr, node: n, runID: n.Identity().RunID}
	c.shards[addr] = s
	return s, nil
}

// NodeIDs are the IDs of the nodes the cluster's slot map lists (none
// before it was read).
func (c *Cluster) NodeIDs() []string {
	if t := c.table.Load(); t != nil {
		return slices.Clone(t.ids)
	}
	return nil
}

// Addr implements quorum.Node: the cluster's seeds.
func (c *Cluster) Addr() string { return c.name }

// raiseFunc is the engine's function that raises the fence floors of
// slots (quorum.ShardedNode.AttachFloors).
type raiseFunc = func(ctx context.Context, slots []int, raised func(slot int)) error

// AttachFloors implements quorum.ShardedNode.
func (c *Cluster) AttachFloors(raise raiseFunc) {
	c.raise.Store(&raise)
}

// Identity implements quorum.Node. A cluster's shards restart one by one
// and their slots are quarantined here, not by the engine: its identity
// never changes.
func (c *Cluster) Identity() quorum.Identity { return quorum.Identity{RunID: "cluster"} }

// Eval implements quorum.Node.
func (c *Cluster) Eval(ctx context.Context, name string, keys, args []string) (any, error) {
	return wait(ctx, func(done func(any, error)) { c.Send(name, keys, args, done) })
}

// Send implements quorum.Node: the request goes to the shard of its keys'
// slot. Keys in several slots fail with ErrCrossSlot (the engine splits
// such calls before they reach a node).
func (c *Cluster) Send(name string, keys, args []string, done func(v any, err error)) {
	if name == scripts.ListScan.Name {
		done(nil, errNoListing)
		return
	}
	t := c.table.Load()
	if t == nil {
		c.refreshSoon()
		done(nil, ErrNoSlotMap)
		return
	}
	slot := -1
	for _, k := range keys {
		switch s := quorum.KeySlot(k); {
		case slot == -1:
			slot = s
		case s != slot:
			done(nil, fmt.Errorf("%w: %q and %q", ErrCrossSlot, keys[0], k))
			return
		}
	}
	var s *shard
	if slot >= 0 {
		s = t.owner[slot]
	} else {
		s = c.anyShard(t) // a script without keys (pub/sub): any node
	}
	if s == nil {
		done(nil, fmt.Errorf("%w: no node serves slot %d: %w", ErrNoSlotMap, slot, quorum.ErrShardNotVoting))
		return
	}
	c.sendTo(s, name, keys, args, done, sendFirst, slot)
}

// anyShard is a master of t, the subscriber's if it is one.
func (c *Cluster) anyShard(t *slotTable) *shard {
	for _, s := range t.owner {
		if s != nil && s.node == c.sub {
			return s
		}
	}
	for _, s := range t.owner {
		if s != nil {
			return s
		}
	}
	return nil
}

// out reports whether slot is out of the vote.
func (c *Cluster) out(slot int) bool {
	return slot >= 0 && c.q[slot].out.Load()
}

// sendTo sends the request to shard s (after ASKING when ask), following
// one redirection. A request for a slot out of the vote fails, before it
// is sent and again when its answer comes (the slot may have been taken
// out meanwhile: a restart seen by another answer).
// sendMode says how sendTo sends a request.
type sendMode int8

const (
	sendFirst  sendMode = iota // as routed; a redirection is followed once
	sendAsking                 // after ASKING; not redirected again
	sendAgain                  // after a MOVED, by the new map; not redirected again
)

func (c *Cluster) sendTo(s *shard, name string, keys, args []string, done func(any, error), mode sendMode, slot int) {
	// Only the fence floor's reads and writes run for a slot out of the
	// vote (the engine's, as it raises floors; see ShardedNode).
	floor := name == scripts.FenceFloor.Name || name == scripts.FenceHighwater.Name
	if c.out(slot) && !floor {
		c.want(slot)
		done(nil, c.outErr(s, slot))
		return
	}
	cb := func(v any, err error) {
		if err == nil {
			if !c.check(s, slot) && !floor {
				done(nil, fmt.Errorf("%w: %s: its run_id could not be read on this connection", ErrShardOut, s.addr))
				return
			}
			if c.out(slot) && !floor {
				done(nil, c.outErr(s, slot))
				return
			}
			done(v, nil)
			return
		}
		var re Error
		if errors.As(err, &re) {
			if mode == sendFirst {
				switch kind, _, _ := strings.Cut(string(re), " "); kind {
				case "MOVED":
					// Sent again once the map is read again (at once),
					// by that map: it decides first whether the new
					// owner lost data.
					c.afterRefresh(func() {
						t := c.table.Load()
						if to := t.ownerOf(slot); to != nil {
							c.sendTo(to, name, keys, args, done, sendAgain, slot)
							return
						}
						done(nil, fmt.Errorf("%w: %s: %w", errMoving, s.addr, err))
					})
					return
				case "ASK":
					if to, ok := c.redirect(string(re)); ok {
						c.sendTo(to, name, keys, args, done, sendAsking, slot)
						return
					}
				}
			}
			switch kind, _, _ := strings.Cut(string(re), " "); kind {
			case "MOVED", "ASK", "TRYAGAIN":
				err = fmt.Errorf("%w: %s: %w", errMoving, s.addr, err)
			}
		}
		done(nil, err)
	}
	if mode == sendAsking {
		s.node.sendAsking(name, keys, args, cb)
	} else {
		s.node.Send(name, keys, args, cb)
	}
}

// takeMoved takes the requests waiting for the next reading of the map.
func (c *Cluster) takeMoved() []func() {
	c.movedMu.Lock()
	defer c.movedMu.Unlock()
	moved := c.moved
	c.moved = nil
	return moved
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// afterRefresh runs f once the slot map was read again (kicked now), on
// the refresh loop's goroutine.
func (c *Cluster) afterRefresh(f func()) {
	c.movedMu.Lock()
	c.moved = append(c.moved, f)
	c.movedMu.Unlock()
	c.refreshSoon()
}

// outErr is the error of a request for slot, out of the vote, to s.
func (c *Cluster) outErr(s *shard, slot int) error {
	s.mu.Lock()
	why := s.why
	s.mu.Unlock()
	if left := time.Until(time.Unix(0, c.q[slot].until.Load())); left > 0 {
		return fmt.Errorf("%w: slot %d on %s: %s; quarantined %v more", ErrShardOut, slot, s.addr, why, left.Round(time.Millisecond))
	}
	return fmt.Errorf("%w: slot %d on %s: %s; fence floors not raised yet", ErrShardOut, slot, s.addr, why)
}

// redirect reads an ASK error: the shard to send the request to with
// ASKING, if it is a healthy master in the slot map (a slot moving to
// it). A MOVED is sent again by sendTo once the map was read again.
func (c *Cluster) redirect(msg string) (to *shard, ok bool) {
	kind, rest, _ := strings.Cut(msg, " ")
	if kind != "ASK" {
		return nil, false
	}
	slotText, addr, _ := strings.Cut(rest, " ")
	slot, err := strconv.Atoi(slotText)
	if err != nil || slot < 0 || slot >= quorum.Slots {
		return nil, false
	}
	t := c.table.Load()
	if t == nil || !t.masters[addr] {
		return nil, false
	}
	c.mu.Lock()
	s := c.shards[addr]
	c.mu.Unlock()
	return s, s != nil
}

// check quarantines the slots of s, and slot (the slot of an answer, -1
// for none: the map may not list it on s yet), when the run_id of its
// connection is not the one its votes count for: s restarted. It reports
// false when the connection's run_id could not be read where one was
// known: its answers cannot be vouched for (and are refused) until a
// connection tells it.
func (c *Cluster) check(s *shard, slot int) bool {
	id := s.node.Identity().RunID
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case id == s.runID:
		return true
	case s.runID == "":
		s.runID = id // first known
		return true
	case id == "":
		return false
	}
	old := s.runID
	s.runID = id
	s.restarts++
	slots := c.slotsOf(s)
	if slot >= 0 && !slices.Contains(slots, slot) {
		slots = append(slots, slot)
	}
	c.quarantine(s, fmt.Sprintf("restarted (run_id %s -> %s)", short(old), short(id)), slots)
	return true
}

// quarantine takes slots out of the vote for Quarantine and until their
// floors are raised, for why; s.mu (s serves them) is held.
func (c *Cluster) quarantine(s *shard, why string, slots []int) {
	if len(slots) == 0 {
		return
	}
	until := time.Now().Add(c.opts.Quarantine).UnixNano()
	c.qmu.Lock()
	for _, slot := range slots {
		q := &c.q[slot]
		q.gen++
		q.until.Store(max(q.until.Load(), until))
		q.out.Store(true)
		q.wanted.Store(false)
	}
	c.qmu.Unlock()
	s.why = why
	c.log.Warn("cluster shard lost its data: the votes of its slots do not count until their quarantine ends and their fence floors are raised",
		"shard", s.addr, "why", why, "slots", len(slots), "quarantine", c.opts.Quarantine)
}

func short(runID string) string { return runID[:min(len(runID), 8)] }

// refreshSoon asks the loop for a slot map reading now.
func (c *Cluster) refreshSoon() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// loop checks the shards' identities and reads the slot map every
// RefreshInterval, or when kicked.
func (c *Cluster) loop() {
	defer c.wg.Done()
	// Closing: what a MOVED left waiting goes out now (and fails on the
	// closing connections) rather than never.
	defer func() { runAll(c.takeMoved()) }()
	t := time.NewTicker(c.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		for _, s := range c.shardList() {
			c.check(s, -1)
		}
		moved := c.takeMoved() // those that met a MOVED before this reading
		if err := c.refresh(); err != nil {
			c.log.Debug("cluster slot map not read", "err", err)
		}
		runAll(moved)
	}
}

// rejoinLoop raises the fence floors of the slots whose quarantine is
// over, and lets them vote again, every RefreshInterval (its own loop: a
// raise waits for the other masters).
func (c *Cluster) rejoinLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.rejoinKick:
		}
		c.rejoin()
	}
}

// EndQuarantine implements quorum.ShardedNode: every slot out of the vote
// may rejoin at once, its fence floor raised first (by the rejoin loop,
// woken now).
func (c *Cluster) EndQuarantine() int {
	now := time.Now().UnixNano()
	n := 0
	c.qmu.Lock()
	for slot := range c.q {
		q := &c.q[slot]
		if q.out.Load() {
			q.until.Store(min(q.until.Load(), now))
			n++
		}
	}
	c.qmu.Unlock()
	if n > 0 {
		select {
		case c.rejoinKick <- struct{}{}:
		default:
		}
	}
	return n
}

// rejoinChunk is how many slots one raise of fence floors covers: the
// slots of a chunk raised rejoin before the next chunk starts, and the
// slots requests asked for meanwhile go first in the next.
const rejoinChunk = 256

// rejoin raises the floors of the slots whose quarantine is over, a chunk
// at a time, and lets each slot raised vote again (unless it was
// quarantined again meanwhile). The slots that requests asked for since
// their quarantine ended (wanted, see sendTo) go first: after a shard
// restarts, the resources in use vote again within a chunk's raise
// rather than after every slot of the shard, which takes seconds under
// load. A raise cut short by a slot that fails (a timeout under load, a
// master that does not answer) still lets in the slots it raised, and the
// next chunk starts; a chunk that raises nothing ends the pass (the next
// is a RefreshInterval later, or at the next kick).
func (c *Cluster) rejoin() {
	raise := c.raise.Load()
	if raise == nil {
		return
	}
	raised, left := 0, 0
	var lastErr error
	for c.ctx.Err() == nil {
		slots, gens, due := c.dueSlots(rejoinChunk)
		left = due
		if len(slots) == 0 {
			break
		}
		var mu sync.Mutex
		done := make(map[int]bool, len(slots))
		ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		err := (*raise)(ctx, slots, func(slot int) {
			mu.Lock()
			done[slot] = true
			mu.Unlock()
		})
		cancel()
		if err != nil {
			lastErr = err
		}
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n == 0 {
			break
		}
		for _, s := range c.shardList() {
			c.check(s, -1) // a restart during the raise quarantines its slots again
		}
		mu.Lock()
		c.qmu.Lock()
		for i, slot := range slots {
			q := &c.q[slot]
			if done[slot] && q.gen == gens[i] && q.until.Load() <= time.Now().UnixNano() {
				q.out.Store(false)
				q.wanted.Store(false)
				raised++
				left--
			}
		}
		c.qmu.Unlock()
		mu.Unlock()
	}
	if lastErr != nil && left > 0 {
		c.log.Warn("cluster slots cannot rejoin yet: their fence floors cannot be raised", "slots", left, "err", lastErr)
	}
	if raised > 0 {
		c.log.Info("cluster slots rejoin: their fence floors are raised", "slots", raised)
	}
}

// dueSlots returns up to limit slots whose quarantine is over and that
// are still out of the vote, wanted ones first, with their quarantine
// generations, and how many such slots there are in all.
func (c *Cluster) dueSlots(limit int) (slots []int, gens []uint32, due int) {
	now := time.Now().UnixNano()
	var rest []int
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for slot := range c.q {
		q := &c.q[slot]
		if !q.out.Load() || q.until.Load() > now {
			continue
		}
		due++
		if q.wanted.Load() && len(slots) < limit {
			slots = append(slots, slot)
		} else if len(rest) < limit {
			rest = append(rest, slot)
		}
	}
	slots = append(slots, rest[:min(len(rest), limit-len(slots))]...)
	for _, slot := range slots {
		gens = append(gens, c.q[slot].gen)
	}
	return slots, gens, due
}

// want marks slot, out of the vote, as asked for by a request: once its
// quarantine is over it goes first in the next raise of fence floors,
// which it kicks.
func (c *Cluster) want(slot int) {
	q := &c.q[slot]
	if q.until.Load() > time.Now().UnixNano() || q.wanted.Swap(true) {
		return
	}
	select {
	case c.rejoinKick <- struct{}{}:
	default:
	}
}

func (c *Cluster) shardList() []*shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *shard) int { return strings.Compare(a.addr, b.addr) })
	return out
}

// slotsOf lists the slots s serves in the current map.
func (c *Cluster) slotsOf(s *shard) []int {
	t := c.table.Load()
	if t == nil {
		return nil
	}
	var out []int
	for slot, o := range t.owner {
		if o == s {
			out = append(out, slot)
		}
	}
	return out
}

// refresh reads the slot map from a node that answers (the shards first,
// then the seeds) and installs it.
func (c *Cluster) refresh() error {
	var lastErr error
	tried := map[string]bool{}
	for _, addr := range append(c.addrs(), c.opts.Seeds...) {
		if tried[addr] {
			continue
		}
		tried[addr] = true
		s, err := c.shardAt(addr)
		if err != nil {
			lastErr = err
			continue
		}
		v, err := c.command(s, "CLUSTER", "NODES")
		text, ok := v.(string)
		if err == nil && !ok {
			err = fmt.Errorf("CLUSTER NODES answered %T", v)
		}
		if err != nil {
			lastErr = fmt.Errorf("%s: %w", addr, err)
			continue
		}
		host, _, _ := net.SplitHostPort(addr)
		nodes, err := parseClusterNodes(text, host)
		if err != nil {
			lastErr = fmt.Errorf("%s: %w", addr, err)
			continue
		}
		return c.install(nodes)
	}
	if lastErr == nil {
		lastErr = errors.New("no node to ask")
	}
	return lastErr
}

// command runs a plain command on s, bounded by the dial timeout.
func (c *Cluster) command(s *shard, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Node.DialTimeout+time.Second)
	defer cancel()
	return s.node.Command(ctx, args...)
}

func (c *Cluster) addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.shards))
	for a := range c.shards {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// install makes nodes the slot map. Before it does, it quarantines the
// slots that a node took over while it was not a healthy master, and
// those of a master whose replication id changed: both may have lost data
// (a failover, or a restart not seen yet).
func (c *Cluster) install(nodes []clusterNode) error {
	t := &slotTable{masters: map[string]bool{}}
	listed := map[string]bool{}
	for _, n := range nodes {
		listed[n.addr] = true
		t.ids = append(t.ids, n.id)
		if !n.master {
			continue
		}
		if !n.failed {
			t.masters[n.addr] = true
		}
		if len(n.slots) == 0 {
			continue
		}
		s, err := c.shardAt(n.addr)
		if err != nil {
			return err
		}
		for _, r := range n.slots {
			for slot := r[0]; slot <= r[1]; slot++ {
				t.owner[slot] = s
			}
		}
	}
	old := c.table.Load()
	taken := map[*shard][]int{}
	serving := map[*shard][]int{}
	for slot, s := range t.owner {
		if s == nil {
			continue
		}
		serving[s] = append(serving[s], slot)
		// Only a move between two healthy masters (a resharding, keys
		// and all) keeps the slot's data: any other new owner (a promoted
		// replica, or a master given the slot of a failed or forgotten
		// one without its keys) may lack it.
		if o := old.ownerOf(slot); old != nil && o != s && (o == nil || !old.masters[o.addr] || !old.masters[s.addr]) {
			taken[s] = append(taken[s], slot)
		}
	}
	// The replication ids of every healthy master, slots or not (a master
	// without slots may be demoted and promoted before it takes any).
	masters := map[*shard]bool{}
	for addr := range t.masters {
		if s, err := c.shardAt(addr); err == nil {
			masters[s] = true
		}
	}
	for s := range serving {
		masters[s] = true
	}
	ids := map[*shard][2]string{}
	var idMu sync.Mutex
	var wg sync.WaitGroup
	for s := range masters {
		wg.Go(func() {
			id, prev := c.replIDs(s)
			idMu.Lock()
			ids[s] = [2]string{id, prev}
			idMu.Unlock()
		})
	}
	wg.Wait()
	for s := range masters {
		slots := serving[s]
		id, prev := ids[s][0], ids[s][1]
		s.mu.Lock()
		switch {
		case len(taken[s]) > 0:
			s.failovers++
			c.quarantine(s, fmt.Sprintf("took over %d slots in a failover", len(taken[s])), taken[s])
		case id != "" && s.replID != "" && id != s.replID && prev != "" && strings.Trim(prev, "0") != "":
			// A new replication id with the one before it kept: a
			// promotion (a reset of the backlog, or a restart, keeps
			// none; a restart is seen by its run_id).
			s.failovers++
			c.quarantine(s, fmt.Sprintf("promoted since the map was read (replication id %s -> %s)", short(s.replID), short(id)), slots)
		}
		if id != "" {
			s.replID = id
		}
		s.mu.Unlock()
	}
	c.table.Store(t)
	c.prune(listed)
	return nil
}

// replIDs reads the master_replid and master_replid2 of s ("" if it does
// not answer within a second).
func (c *Cluster) replIDs(s *shard) (id, prev string) {
	ctx, cancel := context.WithTimeout(c.ctx, time.Second)
	defer cancel()
	v, err := s.node.Command(ctx, "INFO", "replication")
	text, ok := v.(string)
	if err != nil || !ok {
		return "", ""
	}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "master_replid2:"); ok {
			prev = v
		}
	}
	return id, prev
}

// prune closes the shards that the cluster has not listed for a minute
// of readings (a node removed, or an address that changed), but the
// subscriber's and the seeds'.
func (c *Cluster) prune(listed map[string]bool) {
	var gone []*shard
	c.mu.Lock()
	for addr, s := range c.shards {
		if listed[addr] || s.node == c.sub || slices.Contains(c.opts.Seeds, addr) {
			s.missing = 0
			continue
		}
		if s.missing++; s.missing > 60 {
			delete(c.shards, addr)
			gone = append(gone, s)
		}
	}
	c.mu.Unlock()
	for _, s := range gone {
		c.log.Info("cluster node gone: its connection closed", "shard", s.addr)
		s.node.Close()
	}
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr       string
	master, failed bool
	slots          [][2]int
}

// parseClusterNodes reads CLUSTER NODES' reply; host replaces an empty
// host (a node that does not know its own address).
func parseClusterNodes(text, host string) ([]clusterNode, error) {
	var out []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", strings.TrimSpace(line))
		}
		n := clusterNode{id: f[0]}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		h, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES address %q: %w", f[1], err)
		}
		if h == "" {
			h = host
		}
		n.addr = net.JoinHostPort(h, port)
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.master = true
			case "fail", "fail?", "handshake", "noaddr":
				n.failed = true
			}
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot migrating or importing: its owner is listed plain
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil || a < 0 || b < a || b >= quorum.Slots {
				return nil, fmt.Errorf("CLUSTER NODES slots %q", r)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// Ping implements quorum.Node: nil when a shard serving slots answers (a
// shard down fails the requests of its slots, not the cluster's).
func (c *Cluster) Ping(ctx context.Context) error {
	t := c.table.Load()
	if t == nil {
		c.refreshSoon()
		return ErrNoSlotMap
	}
	seen := map[*shard]bool{}
	var shards []*shard
	for _, s := range t.owner {
		if s != nil && !seen[s] {
			seen[s] = true
			shards = append(shards, s)
		}
	}
	if len(shards) == 0 {
		return fmt.Errorf("%w: no node serves a slot", ErrNoSlotMap)
	}
	errs := make(chan error, len(shards))
	for _, s := range shards {
		go func() {
			if err := s.node.Ping(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", s.addr, err)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range shards {
		if err := <-errs; err == nil {
			return nil
		} else {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// Exists implements quorum.Node: keys must share a hash slot, and the
// shard serving it answers (no redirection is followed: a probe that
// meets a moved slot fails and is asked again at the next tick).
func (c *Cluster) Exists(ctx context.Context, keys ...string) (int64, error) {
	t := c.table.Load()
	if t == nil {
		c.refreshSoon()
		return 0, ErrNoSlotMap
	}
	if len(keys) == 0 {
		return 0, nil
	}
	slot := quorum.KeySlot(keys[0])
	for _, k := range keys[1:] {
		if quorum.KeySlot(k) != slot {
			return 0, fmt.Errorf("%w: %q and %q", ErrCrossSlot, keys[0], k)
		}
	}
	s := t.owner[slot]
	if s == nil {
		return 0, fmt.Errorf("%w: no node serves slot %d: %w", ErrNoSlotMap, slot, quorum.ErrShardNotVoting)
	}
	return s.node.Exists(ctx, keys...)
}

// Subscribe implements quorum.Node.
func (c *Cluster) Subscribe(channel string) { c.sub.Subscribe(channel) }

// Unsubscribe implements quorum.Node.
func (c *Cluster) Unsubscribe(channel string) { c.sub.Unsubscribe(channel) }

// Subscribed implements quorum.Node.
func (c *Cluster) Subscribed(ctx context.Context, channel string) error {
	return c.sub.Subscribed(ctx, channel)
}

// PSubscribe implements quorum.Node.
func (c *Cluster) PSubscribe(pattern string) { c.sub.PSubscribe(pattern) }

// PUnsubscribe implements quorum.Node.
func (c *Cluster) PUnsubscribe(pattern string) { c.sub.PUnsubscribe(pattern) }

// PSubscribed implements quorum.Node.
func (c *Cluster) PSubscribed(ctx context.Context, pattern string) error {
	return c.sub.PSubscribed(ctx, pattern)
}

// Shards implements quorum.ShardedNode: the shards serving slots, by
// address. A shard votes while none of its slots is out of the vote.
func (c *Cluster) Shards() []quorum.ShardStatus {
	t := c.table.Load()
	if t == nil {
		return []quorum.ShardStatus{} // a cluster: none serves yet
	}
	byShard := map[*shard]*quorum.ShardStatus{}
	now := time.Now()
	for slot, s := range t.owner {
		if s == nil {
			continue
		}
		st := byShard[s]
		if st == nil {
			st = &quorum.ShardStatus{Addr: s.addr, Up: s.node.pipe.Load() != nil, Voting: true}
			byShard[s] = st
		}
		st.Slots++
		if c.q[slot].out.Load() {
			st.Voting = false
			st.Out++
			st.QuarantineLeft = max(st.QuarantineLeft, time.Unix(0, c.q[slot].until.Load()).Sub(now))
		}
	}
	out := []quorum.ShardStatus{}
	for _, s := range c.shardList() {
		st := byShard[s]
		if st == nil {
			continue
		}
		s.mu.Lock()
		st.Restarts, st.Failovers = s.restarts, s.failovers
		if !st.Voting {
			st.Why = s.why
		}
		s.mu.Unlock()
		out = append(out, *st)
	}
	return out
}

// Close stops the background work and closes every shard's connections.
func (c *Cluster) Close() {
	c.cancel()
	c.wg.Wait()
	for _, s := range c.shardList() {
		s.node.Close()
	}
}
