package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlotCount is the number of hash slots of a Redis Cluster.
	clusterSlotCount = 16384
	// clusterWait bounds every wait of the cluster harness.
	clusterWait = 10 * time.Second
	// clusterPoll is how often a wait looks at the cluster again.
	clusterPoll = 50 * time.Millisecond
	// migrateBatch is how many keys one MIGRATE moves.
	migrateBatch = 100
)

// Cluster is a Redis Cluster of real redis-server processes on loopback.
type Cluster struct {
	t     testing.TB
	nodes []*ClusterNode // masters first, in slot order, then replicas
	seeds []string
}

// ClusterNode is one redis-server of a Cluster.
type ClusterNode struct {
	// Addr is 127.0.0.1:port; it stays the same across restarts. The
	// cluster bus listens on port+10000.
	Addr string

	c   *Cluster
	srv *Server
	id  string // node ID, fixed by nodes.conf: it survives RestartEmpty

	mu     sync.Mutex
	admin  *redis.Client
	down   bool // killed and not restarted
	paused bool
}

// requireClusterTools fails or skips the test like RequireReal and Start
// do when redis-server (or redis-cli, which creates the cluster) is
// missing: under CI=true it fails, elsewhere it skips saying why.
func requireClusterTools(t testing.TB) {
	t.Helper()
	var missing []string
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) == 0 {
		return
	}
	what := strings.Join(missing, " and ")
	if os.Getenv("CI") == "true" {
		t.Fatalf("redistest: %s not found and CI=true: CI must run against a real Redis Cluster", what)
	}
	t.Skipf("SKIPPED: needs a real Redis Cluster (%s not found); install redis-server and redis-cli to run it", what)
}

// StartCluster starts shards masters, each with replicas replicas, as a
// Redis Cluster (cluster-enabled yes, node timeout 2 s, no persistence),
// joins them with redis-cli --cluster create, waits until every node
// reports cluster_state:ok, knows every other node and agrees on the slot
// map, and every replica's link to its master is up. Every process is
// killed when the test ends. redis-cli needs shards >= 3.
//
// Without redis-server or redis-cli the test is skipped saying why; under
// CI=true it fails instead.
func StartCluster(t testing.TB, shards, replicas int) *Cluster {
	t.Helper()
	requireClusterTools(t)
	if shards < 3 || replicas < 0 {
		t.Fatalf("redistest: StartCluster(%d shards, %d replicas): redis-cli --cluster create needs at least 3 masters and replicas >= 0", shards, replicas)
	}
	c := &Cluster{t: t}
	total := shards * (1 + replicas)
	addrs := make([]string, total)
	for i := range total {
		n := c.startNode()
		c.nodes = append(c.nodes, n)
		addrs[i] = n.Addr
	}

	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, lastOutput(string(out), 15))
	}

	for _, n := range c.nodes {
		id, err := n.client().ClusterMyID(context.Background()).Result()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", n.Addr, err)
		}
		n.id = id
	}
	began, met := time.Now(), time.Time{}
	waitFor(t, "waiting for the new cluster to be ok", func() (bool, string) {
		if ok, state := c.settled(); !ok {
			if time.Since(began) > 3*time.Second && time.Since(met) > time.Second {
				if sent := c.meetMissing(); sent > 0 {
					t.Logf("redistest: %d MEETs sent again after %v (%s)", sent, time.Since(began).Round(time.Millisecond), state)
				}
				met = time.Now()
			}
			return false, state
		}
		slaves := 0
		for _, n := range c.nodes {
			me, err := n.myself()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER NODES on %s: %v", n.Addr, err)
			}
			if me.flags["slave"] {
				slaves++
			}
		}
		if slaves != shards*replicas {
			return false, fmt.Sprintf("%d replicas of %d", slaves, shards*replicas)
		}
		return true, ""
	})
	c.order(t)
	return c
}

// meetMissing has each live node MEET the nodes it does not know yet. A
// handshake that does not complete within the node timeout (a node slow to
// answer on its bus port, on a loaded machine) is dropped, and gossip may
// not start it again for a long while: a new cluster then stays one node
// short on some node ("knows 5 nodes of 6"). redis-cli --cluster create
// sends each MEET once; this sends again those that did not take, and
// says how many.
func (c *Cluster) meetMissing() int {
	sent := 0
	ctx := context.Background()
	for _, n := range c.nodes {
		if !n.live() {
			continue
		}
		views, err := n.clusterNodes()
		if err != nil {
			continue
		}
		known := map[string]bool{}
		for _, v := range views {
			if !v.flags["handshake"] {
				known[v.addr] = true
			}
		}
		for _, m := range c.nodes {
			if m == n || known[m.Addr] || !m.live() {
				continue
			}
			host, port, err := net.SplitHostPort(m.Addr)
			if err != nil {
				continue
			}
			if n.client().ClusterMeet(ctx, host, port).Err() == nil {
				sent++
			}
		}
	}
	return sent
}

// order sorts the nodes: masters by their lowest slot, then the replicas
// grouped by master in the same order; and records the seeds.
func (c *Cluster) order(t testing.TB) {
	t.Helper()
	views, err := c.nodes[0].clusterNodes()
	if err != nil {
		t.Fatalf("redistest: CLUSTER NODES on %s: %v", c.nodes[0].Addr, err)
	}
	owners, err := c.nodes[0].slotOwners()
	if err != nil {
		t.Fatalf("redistest: CLUSTER SLOTS on %s: %v", c.nodes[0].Addr, err)
	}
	first := map[string]int{} // master ID -> lowest slot
	for slot := clusterSlotCount - 1; slot >= 0; slot-- {
		first[owners[slot]] = slot
	}
	rank := map[string]int{} // node ID -> sort key
	for _, v := range views {
		if s, ok := first[v.id]; ok {
			rank[v.id] = s
		} else if s, ok := first[v.master]; ok {
			rank[v.id] = clusterSlotCount + s
		} else {
			t.Fatalf("redistest: node %s (%s) is neither a master with slots nor a replica of one", v.id, v.addr)
		}
	}
	sort.SliceStable(c.nodes, func(i, j int) bool { return rank[c.nodes[i].id] < rank[c.nodes[j].id] })
	c.seeds = nil
	for _, n := range c.nodes {
		if rank[n.id] < clusterSlotCount {
			c.seeds = append(c.seeds, n.Addr)
		}
	}
}

// Seeds returns the addresses (host:port) of the masters the cluster was
// created with, in slot order.
func (c *Cluster) Seeds() []string { return append([]string(nil), c.seeds...) }

// Nodes returns every node: the masters the cluster was created with, in
// slot order, then their replicas in the same order. Roles may change
// later (Failover); the order does not.
func (c *Cluster) Nodes() []*ClusterNode { return append([]*ClusterNode(nil), c.nodes...) }

// Cluster-bus ports are port+10000, so ports are taken from 10000..22767:
// the node and bus ports then both stay below the usual ephemeral range
// (32768 and up) where outgoing connections would take them.
const (
	clusterPortMin = 10000
	clusterPortMax = 22767
)

var clusterPorts = struct {
	sync.Mutex
	used map[int]bool
}{used: map[int]bool{}}

// freeClusterPort picks a port p such that both p and p+10000 are free on
// loopback, and reserves it within this process.
func freeClusterPort() (int, error) {
	clusterPorts.Lock()
	defer clusterPorts.Unlock()
	for range 1000 {
		p := clusterPortMin + rand.IntN(clusterPortMax-clusterPortMin+1)
		if clusterPorts.used[p] || clusterPorts.used[p+10000] || clusterPorts.used[p-10000] {
			continue
		}
		if portFree(p) && portFree(p+10000) {
			clusterPorts.used[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no free port p with p+10000 free in 10000..22767")
}

func releaseClusterPort(p int) {
	clusterPorts.Lock()
	delete(clusterPorts.used, p)
	clusterPorts.Unlock()
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// startNode starts one cluster-enabled redis-server on a free port pair,
// trying another pair when it was taken meanwhile.
func (c *Cluster) startNode() *ClusterNode {
	t := c.t
	t.Helper()
	dir := t.TempDir()
	var lastErr error
	for range 10 {
		port, err := freeClusterPort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		conf := filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port))
		s := &Server{t: t, dir: dir, port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", conf,
			"--cluster-node-timeout", "2000",
			// Without this a master waits 5 s for more replicas before
			// it starts a replica's first sync.
			"--repl-diskless-sync-delay", "0",
		}}
		if lastErr = s.start(); lastErr != nil {
			os.Remove(conf)
			releaseClusterPort(port)
			continue
		}
		n := &ClusterNode{Addr: s.Addr, c: c, srv: s}
		t.Cleanup(func() {
			n.Kill()
			releaseClusterPort(port)
		})
		if lastErr = n.checkOwn(); lastErr != nil {
			n.Kill()
			continue
		}
		return n
	}
	t.Fatalf("redistest: could not start a cluster node: %v", lastErr)
	return nil
}

// checkOwn makes sure the redis-server answering on n.Addr is the process
// we started, not one that held the port already.
func (n *ClusterNode) checkOwn() error {
	n.srv.mu.Lock()
	pid := 0
	if n.srv.cmd != nil {
		pid = n.srv.cmd.Process.Pid
	}
	n.srv.mu.Unlock()
	info, err := n.client().Info(context.Background(), "server").Result()
	if err != nil {
		return fmt.Errorf("INFO server on %s: %v", n.Addr, err)
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("%s is served by process %s, not by ours (%d)", n.Addr, got, pid)
	}
	return nil
}

// client returns the admin connection to n, dialling it if needed.
func (n *ClusterNode) client() *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.admin == nil {
		n.admin = redis.NewClient(&redis.Options{
			Addr:            n.Addr,
			Protocol:        2,
			DisableIdentity: true,
			DialTimeout:     time.Second,
			ReadTimeout:     2 * time.Second,
			WriteTimeout:    2 * time.Second,
			MaxRetries:      2,
			PoolSize:        2,
		})
	}
	return n.admin
}

func (n *ClusterNode) dropClient() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.admin != nil {
		n.admin.Close()
		n.admin = nil
	}
}

// live reports whether n runs and is not paused.
func (n *ClusterNode) live() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.down && !n.paused
}

// Kill stops the node at once (SIGKILL). It stays in the other nodes'
// tables; they mark it failed after the node timeout.
func (n *ClusterNode) Kill() {
	n.srv.Kill()
	n.dropClient()
	n.mu.Lock()
	n.down, n.paused = true, false
	n.mu.Unlock()
}

// RestartEmpty kills the node if it runs and starts redis-server again on
// the same port with the same nodes.conf, so it keeps its node ID, its
// slots and its view of the cluster, but with no data: any RDB or AOF file
// is deleted first and it runs with save "" and appendonly no. It returns
// once the node answers PING and the cluster is ok again (see WaitOK).
func (n *ClusterNode) RestartEmpty() {
	t := n.c.t
	t.Helper()
	n.Kill()
	dir := n.srv.dir
	for _, name := range []string{"dump.rdb", "appendonlydir", "appendonly.aof"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			t.Fatalf("redistest: restart %s: %v", n.Addr, err)
		}
	}
	tmp, _ := filepath.Glob(filepath.Join(dir, "temp-*.rdb"))
	for _, f := range tmp {
		os.Remove(f)
	}
	deadline := time.Now().Add(clusterWait)
	for {
		err := n.srv.start()
		if err == nil {
			if err = n.checkOwn(); err == nil {
				break
			}
			n.srv.Kill()
			n.dropClient()
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: restart %s: %v", n.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.mu.Lock()
	n.down = false
	n.mu.Unlock()
	n.c.WaitOK(t)
}

// Pause stops the node with SIGSTOP. The other nodes mark it failed after
// the node timeout; WaitOK and MasterOf ignore it until Resume.
func (n *ClusterNode) Pause() {
	n.srv.Pause()
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Resume continues a paused node (SIGCONT).
func (n *ClusterNode) Resume() {
	n.srv.Resume()
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// ID returns the node ID (CLUSTER MYID). A node that is down or paused
// answers with the ID it had when the cluster was created, which nodes.conf
// keeps.
func (n *ClusterNode) ID(t testing.TB) string {
	t.Helper()
	if !n.live() {
		return n.id
	}
	id, err := n.client().ClusterMyID(context.Background()).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER MYID on %s: %v", n.Addr, err)
	}
	return id
}

// nodeView is one line of CLUSTER NODES.
type nodeView struct {
	id, addr string
	flags    map[string]bool
	master   string // master ID for a replica
}

func (n *ClusterNode) clusterNodes() ([]nodeView, error) {
	s, err := n.client().ClusterNodes(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	var out []nodeView
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		v := nodeView{id: f[0], addr: f[1], flags: map[string]bool{}}
		if i := strings.IndexAny(v.addr, "@,"); i >= 0 {
			v.addr = v.addr[:i]
		}
		for _, fl := range strings.Split(f[2], ",") {
			v.flags[fl] = true
		}
		if f[3] != "-" {
			v.master = f[3]
		}
		out = append(out, v)
	}
	return out, nil
}

// myself returns n's own line of CLUSTER NODES.
func (n *ClusterNode) myself() (nodeView, error) {
	views, err := n.clusterNodes()
	if err != nil {
		return nodeView{}, err
	}
	for _, v := range views {
		if v.flags["myself"] {
			return v, nil
		}
	}
	return nodeView{}, errors.New("no myself line in CLUSTER NODES")
}

// slotOwners returns, slot by slot, the ID of the master serving it
// according to n's CLUSTER SLOTS ("" where none does).
func (n *ClusterNode) slotOwners() ([]string, error) {
	//lint:ignore SA1019 CLUSTER SLOTS is what clients route by on Redis 7.0, and what this checks
	ranges, err := n.client().ClusterSlots(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	owners := make([]string, clusterSlotCount)
	for _, r := range ranges {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= clusterSlotCount || r.Start > r.End {
			return nil, fmt.Errorf("CLUSTER SLOTS range %+v", r)
		}
		for s := r.Start; s <= r.End; s++ {
			owners[s] = r.Nodes[0].ID
		}
	}
	return owners, nil
}

// renderSlots writes a slot map as "start-end=id ...".
func renderSlots(owners []string) string {
	var b strings.Builder
	for s := 0; s < len(owners); {
		e := s
		for e+1 < len(owners) && owners[e+1] == owners[s] {
			e++
		}
		id := owners[s]
		if id == "" {
			id = "(none)"
		}
		fmt.Fprintf(&b, "%d-%d=%s ", s, e, id)
		s = e + 1
	}
	return strings.TrimSpace(b.String())
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func (c *Cluster) byID(id string) *ClusterNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// settled reports whether every live node reports cluster_state:ok, knows
// every node, and shows the same slot map, in which every slot is served by
// a live node of ours; whether every live node sees every live node with
// the role (and master) that node gives itself and not failed; and whether
// every live replica of a live master has its replication link up.
// Otherwise it describes what is not yet so.
func (c *Cluster) settled() (bool, string) {
	ctx := context.Background()
	var ref, refAddr string
	var owners []string
	views := map[*ClusterNode][]nodeView{}
	selves := map[string]nodeView{} // live node ID -> its own line
	for _, n := range c.nodes {
		if !n.live() {
			continue
		}
		info, err := n.client().ClusterInfo(ctx).Result()
		if err != nil {
			return false, fmt.Sprintf("CLUSTER INFO on %s: %v", n.Addr, err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return false, fmt.Sprintf("%s reports cluster_state:%s", n.Addr, st)
		}
		if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(len(c.nodes)) {
			return false, fmt.Sprintf("%s knows %s nodes of %d", n.Addr, k, len(c.nodes))
		}
		o, err := n.slotOwners()
		if err != nil {
			return false, fmt.Sprintf("CLUSTER SLOTS on %s: %v", n.Addr, err)
		}
		m := renderSlots(o)
		if ref == "" {
			ref, refAddr, owners = m, n.Addr, o
		} else if m != ref {
			return false, fmt.Sprintf("slot maps differ: %s has [%s], %s has [%s]", refAddr, ref, n.Addr, m)
		}
		v, err := n.clusterNodes()
		if err != nil {
			return false, fmt.Sprintf("CLUSTER NODES on %s: %v", n.Addr, err)
		}
		views[n] = v
		for _, line := range v {
			if line.flags["myself"] {
				selves[line.id] = line
			}
		}
		if _, ok := selves[n.id]; !ok {
			return false, fmt.Sprintf("%s: no line for itself (%s) in CLUSTER NODES", n.Addr, n.id)
		}
	}
	if len(views) == 0 {
		return false, "no live node"
	}
	for slot, id := range owners {
		if id == "" {
			return false, fmt.Sprintf("slot %d is not served; slot map [%s]", slot, ref)
		}
		m := c.byID(id)
		if m == nil {
			return false, fmt.Sprintf("slot %d is served by unknown node %s; slot map [%s]", slot, id, ref)
		}
		if !m.live() {
			return false, fmt.Sprintf("slot %d is served by %s, which is down or paused; slot map [%s]", slot, m.Addr, ref)
		}
	}
	for n, v := range views {
		for _, line := range v {
			self, ok := selves[line.id]
			if !ok || line.flags["myself"] {
				continue
			}
			if line.flags["fail"] || line.flags["fail?"] || line.flags["handshake"] ||
				line.flags["master"] != self.flags["master"] || line.master != self.master {
				return false, fmt.Sprintf("%s sees %s as %s %s; it calls itself %s %s",
					n.Addr, line.addr, flagList(line.flags), line.master, flagList(self.flags), self.master)
			}
		}
	}
	for n := range views {
		self := selves[n.id]
		if !self.flags["slave"] {
			continue
		}
		if m := c.byID(self.master); m != nil && m.live() {
			repl, err := n.client().Info(ctx, "replication").Result()
			if err != nil {
				return false, fmt.Sprintf("INFO replication on %s: %v", n.Addr, err)
			}
			if st := infoField(repl, "master_link_status"); st != "up" {
				return false, fmt.Sprintf("replica %s: master_link_status:%s (master %s)", n.Addr, st, m.Addr)
			}
		}
	}
	return true, "ok: " + ref
}

// waitFor polls cond until it holds, failing after clusterWait with the
// last state it described.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not done after %v; last state: %s", what, clusterWait, state)
		}
		time.Sleep(clusterPoll)
	}
}

// WaitOK waits until every live (neither killed nor paused) node reports
// cluster_state:ok, knows every node and shows the same slot map, every
// slot is served by a live node, and every live replica of a live master
// has its replication link up.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	waitFor(t, "waiting for the cluster to be ok", c.settled)
}

// MasterOf returns the node serving slot now, according to CLUSTER SLOTS
// of the first live node that answers.
func (c *Cluster) MasterOf(t testing.TB, slot int) *ClusterNode {
	t.Helper()
	if slot < 0 || slot >= clusterSlotCount {
		t.Fatalf("redistest: MasterOf(%d): no such slot", slot)
	}
	var errs []string
	for _, n := range c.nodes {
		if !n.live() {
			continue
		}
		owners, err := n.slotOwners()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n.Addr, err))
			continue
		}
		id := owners[slot]
		if id == "" {
			t.Fatalf("redistest: slot %d is not served according to %s", slot, n.Addr)
		}
		m := c.byID(id)
		if m == nil {
			t.Fatalf("redistest: slot %d is served by unknown node %s according to %s", slot, id, n.Addr)
		}
		return m
	}
	t.Fatalf("redistest: MasterOf(%d): no live node answered CLUSTER SLOTS (%s)", slot, strings.Join(errs, "; "))
	return nil
}

// ReplicasOf returns the nodes that are replicas of master now, according
// to CLUSTER NODES of master (or, if it is down, of the first live node).
func (c *Cluster) ReplicasOf(t testing.TB, master *ClusterNode) []*ClusterNode {
	t.Helper()
	asked := master
	if !asked.live() {
		asked = nil
		for _, n := range c.nodes {
			if n.live() {
				asked = n
				break
			}
		}
		if asked == nil {
			t.Fatalf("redistest: ReplicasOf(%s): no live node", master.Addr)
		}
	}
	views, err := asked.clusterNodes()
	if err != nil {
		t.Fatalf("redistest: CLUSTER NODES on %s: %v", asked.Addr, err)
	}
	var out []*ClusterNode
	for _, v := range views {
		if v.flags["slave"] && v.master == master.id {
			if n := c.byID(v.id); n != nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// Failover promotes replica: CLUSTER FAILOVER FORCE, or TAKEOVER when its
// master is down, paused or does not answer PING. It waits until the
// replica calls itself master, every live node sees it as master, and the
// cluster is ok (see WaitOK). A replica already promoted on its own (the
// cluster fails over automatically after the node timeout) is only waited
// for.
func (c *Cluster) Failover(t testing.TB, replica *ClusterNode) {
	t.Helper()
	if !replica.live() {
		t.Fatalf("redistest: Failover(%s): the replica is down or paused", replica.Addr)
	}
	ctx := context.Background()
	me, err := replica.myself()
	if err != nil {
		t.Fatalf("redistest: CLUSTER NODES on %s: %v", replica.Addr, err)
	}
	if me.flags["slave"] {
		mode := "FORCE"
		if m := c.byID(me.master); m == nil || !m.live() || ping(m.Addr, nil) != nil {
			mode = "TAKEOVER"
		}
		if err := replica.client().Do(ctx, "CLUSTER", "FAILOVER", mode).Err(); err != nil {
			if me2, err2 := replica.myself(); err2 != nil || !me2.flags["master"] {
				t.Fatalf("redistest: CLUSTER FAILOVER %s on %s: %v", mode, replica.Addr, err)
			}
		}
	}
	waitFor(t, "waiting for "+replica.Addr+" to become master", func() (bool, string) {
		for _, n := range c.nodes {
			if !n.live() {
				continue
			}
			views, err := n.clusterNodes()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER NODES on %s: %v", n.Addr, err)
			}
			for _, v := range views {
				if v.id == replica.id && !v.flags["master"] {
					return false, fmt.Sprintf("%s sees %s with flags %s", n.Addr, replica.Addr, flagList(v.flags))
				}
			}
		}
		return c.settled()
	})
}

func flagList(flags map[string]bool) string {
	var out []string
	for f := range flags {
		out = append(out, f)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// MoveSlots moves slots, with their keys, from master from to master to,
// the way redis-cli --cluster reshard does: for each slot CLUSTER SETSLOT
// IMPORTING on to and MIGRATING on from, then CLUSTER GETKEYSINSLOT and
// MIGRATE ... KEYS in batches until the slot is empty on from, then
// CLUSTER SETSLOT NODE on to, on from and on every other live master.
// Clients may keep reading and writing meanwhile (they follow the ASK and
// MOVED redirections). It returns once every live node shows to serving
// the slots and the cluster is ok (see WaitOK).
func (c *Cluster) MoveSlots(t testing.TB, from, to *ClusterNode, slots []int) {
	t.Helper()
	if from == to {
		t.Fatalf("redistest: MoveSlots: from and to are the same node %s", from.Addr)
	}
	if !from.live() || !to.live() {
		t.Fatalf("redistest: MoveSlots(%s -> %s): both nodes must be up and not paused", from.Addr, to.Addr)
	}
	ctx := context.Background()
	src := from.client()
	host, port, err := net.SplitHostPort(to.Addr)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	must := func(n *ClusterNode, args ...any) {
		t.Helper()
		if err := n.client().Do(ctx, args...).Err(); err != nil {
			t.Fatalf("redistest: %v on %s: %v", args, n.Addr, err)
		}
	}
	owners, err := from.slotOwners()
	if err != nil {
		t.Fatalf("redistest: CLUSTER SLOTS on %s: %v", from.Addr, err)
	}
	for _, slot := range slots {
		if slot < 0 || slot >= clusterSlotCount {
			t.Fatalf("redistest: MoveSlots: no slot %d", slot)
		}
		if owners[slot] != from.id {
			t.Fatalf("redistest: MoveSlots: slot %d is served by %s, not by %s (%s)", slot, owners[slot], from.Addr, from.id)
		}
	}
	for _, slot := range slots {
		must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.id)
		must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.id)
		for {
			keys, err := src.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
			if err != nil {
				t.Fatalf("redistest: CLUSTER GETKEYSINSLOT %d on %s: %v", slot, from.Addr, err)
			}
			if len(keys) == 0 {
				break
			}
			args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			if err := src.Do(ctx, args...).Err(); err != nil {
				t.Fatalf("redistest: MIGRATE %d keys of slot %d from %s to %s: %v", len(keys), slot, from.Addr, to.Addr, err)
			}
		}
		// The target first: it then bumps its config epoch, so its claim
		// wins over any stale one.
		must(to, "CLUSTER", "SETSLOT", slot, "NODE", to.id)
		must(from, "CLUSTER", "SETSLOT", slot, "NODE", to.id)
		for _, n := range c.nodes {
			if n == from || n == to || !n.live() {
				continue
			}
			me, err := n.myself()
			if err != nil {
				t.Fatalf("redistest: CLUSTER NODES on %s: %v", n.Addr, err)
			}
			if me.flags["master"] {
				must(n, "CLUSTER", "SETSLOT", slot, "NODE", to.id)
			}
		}
	}
	waitFor(t, fmt.Sprintf("waiting for every node to see slots %v on %s", slots, to.Addr), func() (bool, string) {
		ok, state := c.settled()
		if !ok {
			return false, state
		}
		for _, n := range c.nodes {
			if !n.live() {
				continue
			}
			o, err := n.slotOwners()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER SLOTS on %s: %v", n.Addr, err)
			}
			for _, slot := range slots {
				if o[slot] != to.id {
					return false, fmt.Sprintf("%s sees slot %d on %s", n.Addr, slot, o[slot])
				}
			}
		}
		return true, ""
	})
}

func lastOutput(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
