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
// shard serving the hash slot of its keys (every key of one script lives
// in one slot with the engine's slotted layout), over that shard's Node
// (one pipelined connection, batching across clients per shard; Options.
// Sharded batches only requests of one slot together).
//
// Routing follows the slot map read with CLUSTER NODES from any node it
// knows, read again every RefreshInterval and at once after a MOVED. A
// MOVED to a shard the map knows as a master (a resharding) is followed
// at once, and an ASK is followed with ASKING on the target's connection;
// a MOVED elsewhere, TRYAGAIN and CLUSTERDOWN fail the request (the
// engine counts it as a missing vote and tries again).
//
// A shard that lost its data does not vote until Quarantine is over and
// the engine raised the fence floors of its slots (see "Cluster masters"
// in the quorum package doc). Lost data is seen two ways: the run_id read
// on a new connection to the shard changed (the process restarted,
// perhaps empty), or it took over slots while it was not a master (a
// failover: the promoted replica may miss the last writes). Slots that move between masters that
// stay masters (a resharding) move with their keys and need nothing.
// Every request of a shard out of the vote fails at once, except the
// engine's fence floor writes.
//
// Release notifications and the proxies' pub/sub messages use the first
// seed's subscriber: a cluster carries a PUBLISH to all its nodes.
type Cluster struct {
	opts ClusterOptions
	log  *slog.Logger
	name string

	mu     sync.Mutex
	shards map[string]*shard // by address, never removed (a cluster's nodes are few)
	sub    *Node             // subscriptions

	table atomic.Pointer[slotTable]
	raise atomic.Pointer[func(ctx context.Context, slots []int) error]

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// slotTable is one reading of the slot map.
type slotTable struct {
	owner   [quorum.Slots]*shard
	masters map[string]bool // addresses of the nodes that are masters
}

// shard is one node of the cluster that served slots.
type shard struct {
	addr string
	node *Node

	// out is set while the shard does not vote (quarantined, or its fence
	// floors not raised); the rest is under mu.
	out atomic.Bool

	mu         sync.Mutex
	runID      string    // the run_id its votes count for, "" until known
	until      time.Time // the quarantine's end
	needsFloor bool
	floor      []int // the slots whose floors to raise
	restarts   int
	failovers  int
	why        string
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
		opts:   opts,
		name:   "cluster(" + strings.Join(opts.Seeds, ",") + ")",
		shards: map[string]*shard{},
		kick:   make(chan struct{}, 1),
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
	c.wg.Add(1)
	go c.loop()
	return c, nil
}

// shardAt returns the shard at addr, connecting to it the first time.
func (c *Cluster) shardAt(addr string) (*shard, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.shards[addr]; ok {
		return s, nil
	}
	o := c.opts.Node
	o.Addr, o.Sharded = addr, true
	n, err := New(o)
	if err != nil {
		return nil, err
	}
	s := &shard{addr: addr, node: n}
	s.runID = n.Identity().RunID
	c.shards[addr] = s
	return s, nil
}

// Addr implements quorum.Node: the cluster's seeds.
func (c *Cluster) Addr() string { return c.name }

// AttachFloors implements quorum.ShardedNode.
func (c *Cluster) AttachFloors(raise func(ctx context.Context, slots []int) error) {
	c.raise.Store(&raise)
}

// Identity implements quorum.Node. A cluster's shards restart one by one
// and are quarantined here, not by the engine: its identity never changes.
func (c *Cluster) Identity() quorum.Identity { return quorum.Identity{RunID: "cluster"} }

// Eval implements quorum.Node.
func (c *Cluster) Eval(ctx context.Context, name string, keys, args []string) (any, error) {
	return wait(ctx, func(done func(any, error)) { c.Send(name, keys, args, done) })
}

// Send implements quorum.Node: the request goes to the shard of its keys'
// slot.
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
			c.sendSplit(name, keys, args, done)
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
		done(nil, fmt.Errorf("%w: no node serves slot %d", ErrNoSlotMap, slot))
		return
	}
	c.sendTo(s, name, keys, args, done, false, slot)
}

// sendSplit runs a request whose keys live in several slots as one
// request per slot, one after another in ascending slot order, and
// combines their answers (scripts.Split, Script.Combine); a request whose
// script cannot be split fails with ErrCrossSlot.
func (c *Cluster) sendSplit(name string, keys, args []string, done func(any, error)) {
	d := scripts.ByName(name)
	if d == nil {
		done(nil, fmt.Errorf("redisnode: no script %q", name))
		return
	}
	parts, err := d.Split(keys, args, quorum.KeySlot, retag)
	if err != nil {
		done(nil, fmt.Errorf("%w: %s: %w", ErrCrossSlot, name, err))
		return
	}
	items := 0
	for _, p := range parts {
		items += len(p.Items)
	}
	answers := make([]any, 0, len(parts))
	var step func(i int)
	step = func(i int) {
		if i == len(parts) {
			done(d.Combine(parts, items, answers))
			return
		}
		p := parts[i]
		t := c.table.Load()
		if t.owner[p.Slot] == nil {
			done(nil, fmt.Errorf("%w: no node serves slot %d", ErrNoSlotMap, p.Slot))
			return
		}
		c.sendTo(t.owner[p.Slot], name, p.Keys, p.Args, func(v any, err error) {
			if err != nil {
				done(nil, err)
				return
			}
			answers = append(answers, v)
			if arr, ok := v.([]any); ok && d.Merge == scripts.MergeGrant && len(arr) > 0 && arr[0] != int64(1) {
				done(d.Combine(parts, items, answers)) // refused: the later parts are not asked
				return
			}
			step(i + 1)
		}, false, p.Slot)
	}
	step(0)
}

// retag gives a per-slot key of the slotted layout (one hash tag) the tag
// of slot.
func retag(key string, slot int) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[:i+1] + quorum.SlotTag(slot) + key[i+1+j:]
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

// sendTo sends the request to shard s (after ASKING when ask), following
// one redirection.
func (c *Cluster) sendTo(s *shard, name string, keys, args []string, done func(any, error), ask bool, slot int) {
	// A shard out of the vote runs only the fence floor's reads and
	// writes (the engine's, as it raises floors; see ShardedNode).
	floor := name == scripts.FenceFloor.Name || name == scripts.FenceHighwater.Name
	if s.out.Load() && !floor {
		done(nil, fmt.Errorf("%w: %s: %s", ErrShardOut, s.addr, s.reason()))
		return
	}
	cb := func(v any, err error) {
		if err == nil {
			if err = c.check(s); err != nil && !floor {
				done(nil, err)
				return
			}
			done(v, nil)
			return
		}
		var re Error
		if errors.As(err, &re) {
			if !ask {
				if to, asking, ok := c.redirect(string(re)); ok {
					c.sendTo(to, name, keys, args, done, asking, slot)
					return
				}
			}
			switch kind, _, _ := strings.Cut(string(re), " "); kind {
			case "MOVED", "ASK", "TRYAGAIN":
				err = fmt.Errorf("%w: %s: %w", errMoving, s.addr, err)
			}
		}
		done(nil, err)
	}
	if ask {
		s.node.sendAsking(name, keys, args, cb)
	} else {
		s.node.Send(name, keys, args, cb)
	}
}

// redirect reads a MOVED or ASK error: the shard to send the request to,
// if it is a master the slot map knows (a resharding), and whether with
// ASKING. A MOVED also reads the slot map again, and one to another node
// (a replica promoted since the map was read) is not followed: the map
// decides first whether that node lost data.
func (c *Cluster) redirect(msg string) (to *shard, asking, ok bool) {
	kind, rest, _ := strings.Cut(msg, " ")
	if kind != "MOVED" && kind != "ASK" {
		return nil, false, false
	}
	slotText, addr, _ := strings.Cut(rest, " ")
	slot, err := strconv.Atoi(slotText)
	if err != nil || slot < 0 || slot >= quorum.Slots {
		return nil, false, false
	}
	if kind == "MOVED" {
		c.refreshSoon()
	}
	t := c.table.Load()
	if t == nil || !t.masters[addr] {
		return nil, false, false
	}
	c.mu.Lock()
	s := c.shards[addr]
	c.mu.Unlock()
	if s == nil {
		return nil, false, false
	}
	return s, kind == "ASK", true
}

// check fails an answer from a connection to s whose run_id is not the
// one s votes with: s restarted, and is quarantined from now.
func (c *Cluster) check(s *shard) error {
	id := s.node.Identity().RunID
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case id == s.runID:
		return nil
	case s.runID == "":
		s.runID = id // first known
		return nil
	}
	old := s.runID
	s.runID = id
	s.restarts++
	c.quarantine(s, fmt.Sprintf("restarted (run_id %s -> %s)", short(old), short(id)), nil)
	return fmt.Errorf("%w: %s restarted", ErrShardOut, s.addr)
}

// quarantine takes s out of the vote for Quarantine and until the floors
// of slots (every slot it serves when nil) are raised. s.mu is held.
func (c *Cluster) quarantine(s *shard, why string, slots []int) {
	s.until = time.Now().Add(c.opts.Quarantine)
	if s.needsFloor && slots != nil && s.floor != nil {
		slots = append(slices.Clone(s.floor), slots...)
	}
	s.needsFloor = true
	s.floor = slots
	s.why = why
	s.out.Store(true)
	c.log.Warn("cluster shard lost its data: its votes do not count until its quarantine ends and its fence floors are raised",
		"shard", s.addr, "why", why, "quarantine", c.opts.Quarantine)
}

func short(runID string) string { return runID[:min(len(runID), 8)] }

// reason says why s does not vote.
func (s *shard) reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if left := time.Until(s.until); left > 0 {
		return fmt.Sprintf("%s; quarantined %v more", s.why, left.Round(time.Millisecond))
	}
	return s.why + "; quarantine over, fence floors not raised yet"
}

// refreshSoon asks the loop for a slot map reading now.
func (c *Cluster) refreshSoon() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// loop reads the slot map, checks the shards' identities and lets
// quarantined shards rejoin, every RefreshInterval or when kicked.
func (c *Cluster) loop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		if err := c.refresh(); err != nil {
			c.log.Debug("cluster slot map not read", "err", err)
		}
		for _, s := range c.shardList() {
			c.check(s)
			c.rejoin(s)
		}
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

// rejoin raises the fence floors of a shard whose quarantine is over, and
// lets it vote again.
func (c *Cluster) rejoin(s *shard) {
	s.mu.Lock()
	due := s.needsFloor && !time.Now().Before(s.until)
	slots, runID := s.floor, s.runID
	s.mu.Unlock()
	raise := c.raise.Load()
	if !due || raise == nil {
		return
	}
	if slots == nil {
		slots = c.slotsOf(s)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	err := (*raise)(ctx, slots)
	cancel()
	if err != nil {
		s.mu.Lock()
		s.why = fmt.Sprintf("%s; its fence floors cannot be raised yet: %v", s.why, err)
		s.mu.Unlock()
		c.log.Warn("cluster shard cannot rejoin yet: its fence floors cannot be raised", "shard", s.addr, "err", err)
		return
	}
	c.check(s) // a restart during the raise quarantines it again
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runID == runID && s.needsFloor && !time.Now().Before(s.until) {
		s.needsFloor, s.floor, s.why = false, nil, ""
		s.out.Store(false)
		c.log.Info("cluster shard rejoins", "shard", s.addr, "slots", len(slots))
	}
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
// then the seeds) and installs it; slots taken over from a master that is
// no longer one quarantine their new shard (a failover).
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
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.Node.DialTimeout+time.Second)
		v, err := s.node.Command(ctx, "CLUSTER", "NODES")
		cancel()
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

// install makes nodes the slot map.
func (c *Cluster) install(nodes []clusterNode) error {
	t := &slotTable{masters: map[string]bool{}}
	for _, n := range nodes {
		if !n.master {
			continue
		}
		t.masters[n.addr] = true
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
	if old != nil {
		// Slots that went to a node that was not a master went to a
		// promoted replica (a resharding moves slots between masters).
		taken := map[*shard][]int{}
		for slot, o := range old.owner {
			if n := t.owner[slot]; n != nil && n != o && !old.masters[n.addr] {
				taken[n] = append(taken[n], slot)
			}
		}
		for s, slots := range taken {
			s.mu.Lock()
			s.failovers++
			c.quarantine(s, fmt.Sprintf("took over %d slots in a failover", len(slots)), slots)
			s.mu.Unlock()
		}
	}
	c.table.Store(t)
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr string
	master   bool
	slots    [][2]int
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
			if flag == "master" {
				n.master = true
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

// Ping implements quorum.Node: every shard serving slots answers.
func (c *Cluster) Ping(ctx context.Context) error {
	t := c.table.Load()
	if t == nil {
		c.refreshSoon()
		return ErrNoSlotMap
	}
	seen := map[*shard]bool{}
	for _, s := range t.owner {
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if err := s.node.Ping(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.addr, err)
		}
	}
	return nil
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

// ShardStatus is one shard's state, for INFO and metrics.
type ShardStatus struct {
	Addr      string
	Slots     int
	Voting    bool
	Restarts  int
	Failovers int
	Why       string
}

// Shards reports the shards serving slots, by address.
func (c *Cluster) Shards() []ShardStatus {
	t := c.table.Load()
	count := map[*shard]int{}
	if t != nil {
		for _, s := range t.owner {
			if s != nil {
				count[s]++
			}
		}
	}
	var out []ShardStatus
	for _, s := range c.shardList() {
		if count[s] == 0 {
			continue
		}
		s.mu.Lock()
		out = append(out, ShardStatus{Addr: s.addr, Slots: count[s], Voting: !s.out.Load(),
			Restarts: s.restarts, Failovers: s.failovers, Why: s.why})
		s.mu.Unlock()
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
