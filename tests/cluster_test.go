package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// clusterDeployment is real Redis Clusters as the masters (each cluster
// one vote) and two proxies in front of them.
type clusterDeployment struct {
	clusters []*redistest.Cluster
	p1, p2   *Proxy
	c1, c2   *redis.Client
}

// clusterTurns bounds how many cluster deployments run at once. Each is
// nine or more redis-server processes in cluster mode and two proxies
// built with -race, and the scenarios that restart a shard have each
// proxy raise thousands of slots' fence floors: more than three at once
// on 2 cores starve the proxies' 50 ms health pings, every master looks
// down and the scenarios stop testing what they name.
var clusterTurns = make(chan struct{}, 3)

// startClusterDeployment starts n clusters of shards masters each (the
// first with replicas0 replicas per master, the others with none) and two
// proxies; tweak may change their config.
func startClusterDeployment(t *testing.T, n, shards, replicas0 int, tweak func(*proxyConfig)) *clusterDeployment {
	t.Helper()
	redistest.RequireReal(t, "cluster masters are real Redis Clusters")
	clusterTurns <- struct{}{}
	t.Cleanup(func() { <-clusterTurns }) // registered first, so it runs last
	d := &clusterDeployment{}
	cfg := defaults(nil)
	for i := range n {
		r := 0
		if i == 0 {
			r = replicas0
		}
		cl := redistest.StartCluster(t, shards, r)
		d.clusters = append(d.clusters, cl)
		cfg.clusters = append(cfg.clusters, cl.Seeds())
	}
	if tweak != nil {
		tweak(&cfg)
	}
	d.p1, d.p2 = startProxy(t, cfg), startProxy(t, cfg)
	d.c1, d.c2 = d.p1.Client(), d.p2.Client()
	t.Cleanup(func() { d.c1.Close(); d.c2.Close() })
	return d
}

// resourcesOnEveryShard returns count resource names whose lock keys
// cover every shard of cl (by slot), prefixed by prefix.
func resourcesOnEveryShard(t *testing.T, cl *redistest.Cluster, prefix string, count int) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for i := 0; len(out) < count || len(seen) < len(cl.Seeds()); i++ {
		r := fmt.Sprintf("%s%d", prefix, i)
		seen[cl.MasterOf(t, quorum.KeySlot(r)).Addr] = true
		out = append(out, r)
		if i > 10*count+100 {
			t.Fatalf("resources do not cover the %d shards", len(cl.Seeds()))
		}
	}
	return out
}

// TestClusterMastersEveryFamily: 3 Redis Clusters of 3 shards are the
// masters, behind two proxies. Every command family works across the
// proxies on resources spread over every shard, and a multi-resource lock
// over several slots is all-or-nothing and released whole.
func TestClusterMastersEveryFamily(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d := startClusterDeployment(t, 3, 3, 0, func(c *proxyConfig) {
		c.extra = "dropin: true\n"
		c.metricsListen = "127.0.0.1:0"
	})
	c1, c2 := d.c1, d.c2
	ctx := context.Background()

	t.Run("lock", func(t *testing.T) {
		for _, r := range resourcesOnEveryShard(t, d.clusters[0], "lock-", 9) {
			g, ok := rlock(t, c1, r, 10000)
			if !ok {
				t.Fatalf("%s: not granted", r)
			}
			if _, ok := rlock(t, c2, r, 10000); ok {
				t.Fatalf("%s: granted twice", r)
			}
			if v := do(t, c2, "REXTEND", r, g.token, 20000); v == nil {
				t.Fatalf("%s: not extended", r)
			}
			if v := do(t, c2, "RUNLOCK", r, g.token); v != int64(1) {
				t.Fatalf("%s: RUNLOCK answered %v", r, v)
			}
			g2, ok := rlock(t, c2, r, 10000)
			if !ok || g2.fence <= g.fence {
				t.Fatalf("%s: after release granted=%v fence %d, first fence %d", r, ok, g2.fence, g.fence)
			}
			do(t, c1, "RUNLOCK", r, g2.token)
		}
	})

	t.Run("multilock over slots", func(t *testing.T) {
		rs := resourcesOnEveryShard(t, d.clusters[0], "multi-", 6)
		args := []any{"RMULTILOCK", 10000, len(rs)}
		for _, r := range rs {
			args = append(args, r)
		}
		v := do(t, c1, args...)
		arr, ok := v.([]any)
		if !ok || len(arr) != 3 || len(arr[2].([]any)) != len(rs) {
			t.Fatalf("RMULTILOCK over %v: %v", rs, v)
		}
		token := arr[0].(string)
		// Every resource is held: alone, or in another multi-lock.
		if _, ok := rlock(t, c2, rs[len(rs)-1], 10000); ok {
			t.Fatal("a resource of the multi-lock was granted to another")
		}
		if v := do(t, c2, "RMULTILOCK", 10000, 2, "multi-free", rs[2]); v != nil {
			t.Fatalf("an overlapping multi-lock was granted: %v", v)
		}
		// All or nothing: the refused multi-lock holds no part of it.
		g, ok := rlock(t, c2, "multi-free", 1000)
		if !ok {
			t.Fatal("the refused multi-lock kept a resource")
		}
		do(t, c2, "RUNLOCK", "multi-free", g.token)
		ext := append([]any{"RMULTIEXTEND", token, 20000}, args[3:]...)
		if v := do(t, c2, ext...); v == nil {
			t.Fatal("RMULTIEXTEND: not extended")
		}
		un := append([]any{"RMULTIUNLOCK", token}, args[3:]...)
		if v := do(t, c2, un...); v != int64(1) {
			t.Fatalf("RMULTIUNLOCK answered %v", v)
		}
		for _, r := range rs {
			g, ok := rlock(t, c1, r, 1000)
			if !ok {
				t.Fatalf("%s still held after RMULTIUNLOCK", r)
			}
			do(t, c1, "RUNLOCK", r, g.token)
		}
	})

	t.Run("fair lock", func(t *testing.T) {
		v := do(t, c1, "RFAIRLOCK", "fair", 10000)
		first := v.([]any)[0].(string)
		got := make(chan any, 1)
		go func() { got <- c2.Do(ctx, "RFAIRLOCK", "fair", 10000, "WAIT", 5000).Val() }()
		waitFor(t, 5*time.Second, "the waiter to queue", func() bool {
			return replyField(do(t, c1, "RLOCKINFO", "fair"), "waiters") == int64(1)
		})
		do(t, c1, "RUNLOCK", "fair", first)
		select {
		case v := <-got:
			arr, ok := v.([]any)
			if !ok {
				t.Fatalf("the waiter got %v", v)
			}
			do(t, c1, "RUNLOCK", "fair", arr[0])
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not granted")
		}
	})

	t.Run("semaphore", func(t *testing.T) {
		a := do(t, c1, "RSEMACQUIRE", "sem", 2, 10000).([]any)
		b := do(t, c2, "RSEMACQUIRE", "sem", 2, 10000).([]any)
		if v := do(t, c2, "RSEMACQUIRE", "sem", 2, 10000); v != nil {
			t.Fatalf("a third permit of 2: %v", v)
		}
		if v := do(t, c1, "RSEMCOUNT", "sem"); v != int64(2) {
			t.Fatalf("RSEMCOUNT %v", v)
		}
		do(t, c1, "RSEMRELEASE", "sem", a[0])
		c := do(t, c2, "RSEMACQUIRE", "sem", 2, 10000).([]any)
		do(t, c1, "RSEMRELEASE", "sem", b[0])
		do(t, c1, "RSEMRELEASE", "sem", c[0])
		if v := do(t, c2, "RSEMCOUNT", "sem"); v != int64(0) {
			t.Fatalf("RSEMCOUNT after release %v", v)
		}
	})

	t.Run("read-write lock", func(t *testing.T) {
		r1 := do(t, c1, "RRLOCK", "rw", 10000).([]any)
		r2 := do(t, c2, "RRLOCK", "rw", 10000).([]any)
		if _, ok := rlock(t, c1, "rw", 10000); ok {
			t.Fatal("a writer was granted with readers in")
		}
		do(t, c1, "RRUNLOCK", "rw", r1[0])
		do(t, c2, "RRUNLOCK", "rw", r2[0])
		g, ok := rlock(t, c1, "rw", 10000)
		if !ok {
			t.Fatal("the writer was refused once the readers left")
		}
		if v := do(t, c2, "RRLOCK", "rw", 10000); v != nil {
			t.Fatalf("a reader was granted while a writer holds: %v", v)
		}
		do(t, c1, "RUNLOCK", "rw", g.token)
	})

	t.Run("latch", func(t *testing.T) {
		do(t, c1, "RLATCH", "latch", 2, 10000)
		got := make(chan any, 1)
		go func() { got <- c2.Do(ctx, "RLATCHWAIT", "latch", 5000).Val() }()
		do(t, c1, "RLATCHDOWN", "latch", "a")
		if v := do(t, c2, "RLATCHDOWN", "latch", "b"); v != int64(0) {
			t.Fatalf("RLATCHDOWN answered %v, want 0 (open)", v)
		}
		select {
		case v := <-got:
			if v != int64(1) {
				t.Fatalf("RLATCHWAIT answered %v", v)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("RLATCHWAIT not woken")
		}
	})

	t.Run("auto-extended lease", func(t *testing.T) {
		conn := redis.NewClient(&redis.Options{Addr: d.p1.Addr, PoolSize: 1})
		defer conn.Close()
		v, err := conn.Do(ctx, "RLOCK", "lease", 600, "AUTOEXTEND").Result()
		if err != nil {
			t.Fatal(err)
		}
		token := v.([]any)[0]
		time.Sleep(1500 * time.Millisecond) // 2.5 ttls: only the proxy's extensions keep it
		if _, ok := rlock(t, c2, "lease", 1000); ok {
			t.Fatal("the auto-extended lease lapsed")
		}
		if v := conn.Do(ctx, "RUNLOCK", "lease", token).Val(); v != int64(1) {
			t.Fatalf("RUNLOCK of the lease answered %v", v)
		}
	})

	t.Run("election", func(t *testing.T) {
		v := do(t, c1, "RELECT", "CAMPAIGN", "elect", 10000, "node-a").([]any)
		if do(t, c2, "RELECT", "CAMPAIGN", "elect", 10000, "node-b") != nil {
			t.Fatal("two leaders")
		}
		if l := do(t, c2, "RELECT", "LEADER", "elect").([]any); l[0] != "node-a" {
			t.Fatalf("leader %v", l)
		}
		if do(t, c2, "RELECT", "RESIGN", "elect", v[0]) != int64(1) {
			t.Fatal("RESIGN")
		}
	})

	t.Run("drop-in", func(t *testing.T) {
		if v := do(t, c1, "SET", "dropin-key", "v1", "NX", "PX", 10000); v != "OK" {
			t.Fatalf("SET NX: %v", v)
		}
		if v := do(t, c2, "SET", "dropin-key", "v2", "NX", "PX", 10000); v != nil {
			t.Fatalf("SET NX granted twice: %v", v)
		}
		if v := do(t, c2, "GET", "dropin-key"); v != "v1" {
			t.Fatalf("GET %v", v)
		}
		// The release script of the Redis docs' lock pattern.
		release := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
		if v := do(t, c2, "EVAL", release, 1, "dropin-key", "v1"); v != int64(1) {
			t.Fatalf("release script: %v", v)
		}
		if v := do(t, c1, "GET", "dropin-key"); v != nil {
			t.Fatalf("GET after release %v", v)
		}
	})

	t.Run("INFO, RLOCKLIST", func(t *testing.T) {
		info := do(t, c1, "INFO", "masters").(string)
		for i, cl := range d.clusters {
			slots := 0
			for j := range cl.Seeds() {
				line := ""
				for _, l := range strings.Split(info, "\r\n") {
					if strings.HasPrefix(l, fmt.Sprintf("master%d_shard%d:", i, j)) {
						line = l
					}
				}
				if !strings.Contains(line, "state=up") {
					t.Errorf("INFO masters: shard %d of master %d: %q", j, i, line)
				}
				var n int
				if _, err := fmt.Sscanf(line[strings.Index(line, "slots="):], "slots=%d", &n); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				slots += n
			}
			if slots != quorum.Slots {
				t.Errorf("master %d: shards serve %d slots", i, slots)
			}
		}
		expectErr(t, c1, "ERR RLOCKLIST does not list cluster masters (docs/PROTOCOL.md, Cluster masters)", "RLOCKLIST", 0)
		body := metricsBody(t, d.p1)
		for _, cl := range d.clusters {
			for _, seed := range cl.Seeds() {
				for _, m := range []string{"redlock_proxy_shard_up", "redlock_proxy_shard_quarantined", "redlock_proxy_shard_slots"} {
					if !strings.Contains(body, m+`{master="cluster(`) || !strings.Contains(body, `shard="`+seed+`"}`) {
						t.Errorf("/metrics has no %s for shard %s:\n%s", m, seed, grepLines(body, "shard"))
					}
				}
			}
		}
		if got := grepLines(body, "redlock_proxy_shard_up{"); strings.Count(got, "} 1") != 9 {
			t.Errorf("redlock_proxy_shard_up: want 9 shards up:\n%s", got)
		}
		resp, err := http.Get(d.p1.MetricsURL(t) + "/readyz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz: %v %v", resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	})

	t.Run("keys of one resource share its slot", func(t *testing.T) {
		// A re-entrant lock: its holds and their fence are kept beside
		// the lock key, in its slot.
		g, _ := rlock(t, c1, "slotcheck", 10000, "TOKEN", "slot-token", "REENTRANT")
		defer do(t, c1, "RUNLOCK", "slotcheck", g.token)
		want := quorum.KeySlot("slotcheck")
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.clusters[1].Seeds()})
		defer cc.Close()
		var keys []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			ks, err := m.Keys(ctx, "*slotcheck*").Result()
			if err != nil {
				return err
			}
			for _, k := range ks {
				keys = append(keys, k)
				if s := quorum.KeySlot(k); s != want {
					return fmt.Errorf("%q is in slot %d, the lock key in %d", k, s, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) < 3 {
			t.Fatalf("keys of the lock: %v, want the lock, its holds and their fence at least", keys)
		}
	})
}

// clusterRestartScenario: A holds a lock granted on the 3 clusters; the
// shards holding it in 2 of them restart empty. It returns the grant, a
// client of the other proxy and when the grant was asked.
func clusterRestartScenario(t *testing.T, quarantine bool) (*clusterDeployment, grant, time.Time) {
	d := startClusterDeployment(t, 3, 3, 0, func(c *proxyConfig) {
		c.maxTTL = 7 * time.Second
		if !quarantine {
			// Longer, so that the double grant happens while it is valid
			// however slowly a loaded machine brings the shards back: the
			// floors are raised only once a restarted shard takes writes
			// again (2 s after its start), 1,024 slots at a time, which
			// took over 7 s in a CI run under -race. Nothing waits the
			// ttl out.
			c.maxTTL = 27 * time.Second
			c.extra = "restart_quarantine: false\n"
		}
	})
	started := time.Now()
	ttl := 6000
	if !quarantine {
		ttl = 25000 // the wait for the double grant stays under the client's 30 s read timeout
	}
	g, ok := rlock(t, d.c1, "ledger", ttl)
	if !ok {
		t.Fatal("not granted")
	}
	slot := quorum.KeySlot("ledger")
	var wg sync.WaitGroup
	for _, cl := range d.clusters[:2] {
		n := cl.MasterOf(t, slot)
		wg.Go(n.RestartEmpty) // at once: each takes 2 s before it takes writes
	}
	wg.Wait()
	return d, g, started
}

// TestClusterShardRestartedEmpty: the shards that hold a lock in 2 of the
// 3 clusters restart empty. A client of the other proxy is refused for as
// long as the grant is valid (only those shards are quarantined: a
// resource of another shard is granted meanwhile), and after max_ttl the
// shards rejoin and the next grant has a greater fence.
func TestClusterShardRestartedEmpty(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d, g, started := clusterRestartScenario(t, true)
	validUntil := started.Add(time.Duration(g.validity) * time.Millisecond)
	wait := time.Until(validUntil).Milliseconds()
	if wait < 300 {
		t.Fatalf("too little validity left to test (%dms)", wait)
	}
	if _, ok, err := tryRlock(d.c2, "ledger", 1000, "WAIT", wait); ok {
		t.Fatal("a second client was granted the lock while the first grant was valid: the shards' quarantine failed")
	} else if err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("refusal: %v", err)
	}
	// Another shard of the same clusters still votes.
	other := ""
	for _, r := range resourcesOnEveryShard(t, d.clusters[0], "other-", 3) {
		if d.clusters[0].MasterOf(t, quorum.KeySlot(r)) != d.clusters[0].MasterOf(t, quorum.KeySlot("ledger")) &&
			d.clusters[1].MasterOf(t, quorum.KeySlot(r)) != d.clusters[1].MasterOf(t, quorum.KeySlot("ledger")) {
			other = r
			break
		}
	}
	if other == "" {
		t.Fatal("no resource on other shards")
	}
	if _, ok, err := tryRlock(d.c2, other, 1000); !ok {
		t.Fatalf("a resource of a shard that did not restart was refused (%v): the whole cluster was quarantined", err)
	}
	for _, p := range []*Proxy{d.p1, d.p2} {
		if !strings.Contains(p.log.String(), "cluster shard lost its data") {
			t.Errorf("proxy %s did not log the shard's restart", p.Addr)
		}
	}
	// INFO masters shows the restarted shards quarantined, the others up.
	info := do(t, d.c2, "INFO", "masters").(string)
	for i, cl := range d.clusters {
		restarted := cl.MasterOf(t, quorum.KeySlot("ledger")).Addr
		for _, line := range strings.Split(info, "\r\n") {
			if !strings.HasPrefix(line, fmt.Sprintf("master%d_shard", i)) {
				continue
			}
			quarantined := strings.Contains(line, "state=quarantined")
			if want := i < 2 && strings.Contains(line, "addr="+restarted+","); quarantined != want {
				t.Errorf("INFO masters: %s (quarantined %v, want %v)", line, quarantined, want)
			}
		}
	}
	var g2 grant
	waitFor(t, 20*time.Second, "the restarted shards to rejoin", func() bool {
		var ok bool
		g2, ok, _ = tryRlock(d.c2, "ledger", 1000)
		return ok
	})
	if time.Now().Before(validUntil) {
		t.Fatal("granted before the first grant expired")
	}
	if g2.fence <= g.fence {
		t.Fatalf("fence %d after %d", g2.fence, g.fence)
	}
	// Logged once every slot of the shard rejoined: the ledger's slot
	// went first (a request asked for it), the others' raise takes 5 s
	// under -race alone and longer beside the other cluster tests.
	waitFor(t, 60*time.Second, "the rejoin of the restarted shards' slots to be logged", func() bool {
		return strings.Contains(d.p2.log.String(), "cluster slots rejoin")
	})
}

// TestClusterShardRestartWithoutQuarantine is the same scenario with
// restart_quarantine: false: the second client IS granted the lock while
// the first grant is valid. It shows what the shards' quarantine prevents
// (and that the test above can fail).
func TestClusterShardRestartWithoutQuarantine(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d, g, started := clusterRestartScenario(t, false)
	validUntil := started.Add(time.Duration(g.validity) * time.Millisecond)
	g2, ok, err := tryRlock(d.c2, "ledger", 1000, "WAIT", time.Until(validUntil).Milliseconds()-100)
	if err != nil || !ok {
		t.Fatalf("without quarantine the double grant did not happen (%v, %v): this scenario no longer shows the danger", ok, err)
	}
	if time.Now().After(validUntil) {
		t.Fatal("granted only after the first grant expired")
	}
	t.Logf("double grant: fence %d while fence %d is valid for %v more", g2.fence, g.fence, time.Until(validUntil).Round(time.Millisecond))
}

// TestClusterFailover: the first cluster has a replica per shard. A lock
// is granted on the first and third clusters (the second has the key
// taken by someone else) while the replica of its shard in the first is
// cut off, so that the replica never gets it; the master dies and the
// replica takes over. Once the other holder released its key, the
// promoted replica and the second cluster both lack the lock: only the
// failover's quarantine keeps a second client out while the grant is
// valid. Afterwards the promoted shard votes again, with greater fences.
func TestClusterFailover(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d := startClusterDeployment(t, 3, 3, 1, func(c *proxyConfig) { c.maxTTL = 12 * time.Second })
	slot := quorum.KeySlot("ledger")
	cl := d.clusters[0]
	master := cl.MasterOf(t, slot)
	replica := cl.ReplicasOf(t, master)[0]
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.clusters[1].Seeds()})
	defer other.Close()
	// Cut the replica off: its link is closed and it cannot log in again
	// (the proxy's connections stay logged in), so the lock never reaches
	// it. (A paused replica would still receive it in its socket.)
	ctx := context.Background()
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer mc.Close()
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	if err := mc.ConfigSet(ctx, "requirepass", "cut-the-replica-off").Err(); err != nil {
		t.Fatal(err)
	}
	if err := mc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the replica's link to go down", func() bool {
		return strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:down")
	})
	// Held until after the grant and the failover, then released (not
	// left to expire: a grant whose retries outlast a ttl would take this
	// cluster too, as one under load did, and the scenario would be lost).
	if err := other.Set(ctx, "ledger", "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// WAIT: with cluster 1 held, the grant needs both other clusters,
	// and one answer later than master_timeout on a loaded machine
	// refuses a try.
	g, ok, err := tryRlock(d.c1, "ledger", 10000, "WAIT", 300)
	if !ok {
		t.Fatalf("not granted (%v)", err)
	}
	master.Kill()
	cl.Failover(t, replica)
	if n := rc.Exists(ctx, "ledger").Val(); n != 0 {
		t.Fatal("the promoted replica has the lock: this scenario no longer loses it")
	}
	if v := other.Get(ctx, "ledger").Val(); v != "someone-else" {
		t.Fatalf("the second cluster's key is %q, not the other holder's", v)
	}
	if err := other.Del(ctx, "ledger").Err(); err != nil {
		t.Fatal(err)
	}
	validUntil := started.Add(time.Duration(g.validity) * time.Millisecond)
	if wait := time.Until(validUntil); wait < time.Second {
		t.Fatalf("too little validity left to test (%v)", wait)
	}
	// Tries (no WAIT) until shortly before the first grant's validity
	// ends: a grant whose reply came before it is a double grant. (A
	// WAIT as long as the validity left ends later than it, by the time
	// the command takes to reach the proxy, and the first grant's keys
	// may have expired by then: a grant then is correct.)
	tries := 0
	for time.Until(validUntil) > 500*time.Millisecond {
		_, ok, err := tryRlock(d.c2, "ledger", 1000)
		replied := time.Now()
		tries++
		switch {
		case ok && replied.Before(validUntil):
			t.Fatalf("a second client was granted the lock %v before the first grant's validity ended: the failover was not quarantined", validUntil.Sub(replied))
		case ok:
			t.Fatalf("a try sent 500 ms before the first grant's validity ended was granted after it: cannot tell whether the keys had expired")
		case err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM"):
			t.Fatalf("refusal: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d tries refused while the first grant was valid", tries)
	waitFor(t, 10*time.Second, "the failover to be seen", func() bool {
		return strings.Contains(d.p2.log.String(), "in a failover")
	})
	var g2 grant
	waitFor(t, 20*time.Second, "the promoted replica to vote", func() bool {
		var ok bool
		g2, ok, _ = tryRlock(d.c2, "ledger", 1000)
		return ok
	})
	if g2.fence <= g.fence {
		t.Fatalf("fence %d after %d", g2.fence, g.fence)
	}
}

// TestClusterResharding: 8 workers through two proxies lock random
// resources while slots holding them move between the shards of two
// clusters, keys and all. No two workers ever hold one resource at once,
// each resource's fences strictly increase, and locks are still granted
// after the moves.
func TestClusterResharding(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d := startClusterDeployment(t, 3, 3, 0, nil)
	rs := resourcesOnEveryShard(t, d.clusters[0], "res-", 24)
	grants, stopLoad := lockLoad(d, rs, 2000)
	waitFor(t, 10*time.Second, "the load's first 50 grants", func() bool { return grants.Load() >= 50 })
	before := grants.Load()
	for _, cl := range d.clusters[:2] {
		// Move the slots of a third of the resources to the next shard.
		masters := cl.Nodes()[:len(cl.Seeds())]
		for _, r := range rs[:len(rs)/3] {
			slot := quorum.KeySlot(r)
			from := cl.MasterOf(t, slot)
			to := masters[0]
			for i, m := range masters {
				if m == from {
					to = masters[(i+1)%len(masters)]
				}
			}
			cl.MoveSlots(t, from, to, []int{slot})
		}
	}
	moved := grants.Load()
	// The load goes on after the moves: 100 more grants, on resources of
	// which a third moved.
	for end := time.Now().Add(10 * time.Second); grants.Load() < moved+100 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	violations := stopLoad()
	after := grants.Load()
	if len(violations) > 0 {
		t.Fatalf("%d violations, first: %v", len(violations), violations[:min(5, len(violations))])
	}
	t.Logf("grants: %d before the moves, %d during, %d after", before, moved-before, after-moved)
	if after-moved < 100 {
		t.Fatalf("%d grants in the 10 s after the moves, want 100", after-moved)
	}
	for _, p := range []*Proxy{d.p1, d.p2} {
		if strings.Contains(p.log.String(), "cluster shard lost its data") {
			t.Errorf("proxy %s took a resharding for lost data", p.Addr)
		}
	}
	// A try rolled back (or a release) while its slot moved may have
	// been refused there (TRYAGAIN) and left its key for its 2 s ttl
	// (docs/design/cluster.md, Resharding): a moved resource is granted
	// within that.
	for _, r := range rs[:len(rs)/3] {
		g, ok := rlock(t, d.c1, r, 1000, "WAIT", 3000)
		if !ok {
			t.Fatalf("%s not granted within the load's ttl after its slot moved", r)
		}
		do(t, d.c1, "RUNLOCK", r, g.token)
	}
}

// replyField is field name of a reply that is a map (RESP3) or a flat
// array of names and values (RESP2); nil when absent.
func replyField(v any, name string) any {
	switch m := v.(type) {
	case map[any]any:
		return m[name]
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if m[i] == name {
				return m[i+1]
			}
		}
	}
	return nil
}

// lockLoad runs 8 workers, half through each proxy, that lock random
// resources of rs for a moment and release them, checking as they go
// that no two hold one resource at once and that each resource's fences
// strictly increase. grants counts the grants so far; stop ends the
// workers and returns the violations seen.
func lockLoad(d *clusterDeployment, rs []string, ttl int) (grants *atomic.Int64, stop func() []string) {
	var (
		mu         sync.Mutex
		lastFence  = map[string]int64{}
		inside     = map[string]*atomic.Int32{}
		violations []string
		done       = make(chan struct{})
		wg         sync.WaitGroup
	)
	grants = &atomic.Int64{}
	for _, r := range rs {
		inside[r] = &atomic.Int32{}
	}
	for w := range 8 {
		c := d.c1
		if w%2 == 1 {
			c = d.c2
		}
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				r := rs[rand.IntN(len(rs))]
				g, ok, err := tryRlock(c, r, ttl, "WAIT", 200)
				if err != nil || !ok {
					continue
				}
				if n := inside[r].Add(1); n != 1 {
					mu.Lock()
					violations = append(violations, fmt.Sprintf("%s held by %d at once", r, n))
					mu.Unlock()
				}
				mu.Lock()
				if g.fence <= lastFence[r] {
					violations = append(violations, fmt.Sprintf("%s: fence %d after %d", r, g.fence, lastFence[r]))
				}
				lastFence[r] = g.fence
				mu.Unlock()
				grants.Add(1)
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				inside[r].Add(-1)
				c.Do(context.Background(), "RUNLOCK", r, g.token)
			}
		})
	}
	return grants, func() []string {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return violations
	}
}

// TestClusterShardRestartUnderLoad: while 8 workers lock random resources
// through two proxies, the shard serving the same slots in 2 of the 3
// clusters is killed and restarted empty (the resources there lose 2 of
// their 3 votes' data). No two workers ever hold one resource at once,
// fences strictly increase, and those resources are granted again once
// the slots rejoin. (The holds here are short, shorter than the 2 s a
// restarted cluster master refuses writes: the case where only the
// quarantine prevents a double grant is TestClusterShardRestartedEmpty's,
// whose counterpart without quarantine grants twice.)
func TestClusterShardRestartUnderLoad(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d := startClusterDeployment(t, 3, 3, 0, func(c *proxyConfig) { c.maxTTL = 3 * time.Second })
	rs := resourcesOnEveryShard(t, d.clusters[0], "load-", 24)
	grants, stopLoad := lockLoad(d, rs, 2000)
	waitFor(t, 10*time.Second, "the load's first grants", func() bool { return grants.Load() > 0 })
	time.Sleep(500 * time.Millisecond)
	before := grants.Load()
	slot := quorum.KeySlot(rs[0])
	var hit []string // the resources whose shards restart in both clusters
	for _, r := range rs {
		if d.clusters[0].MasterOf(t, quorum.KeySlot(r)) == d.clusters[0].MasterOf(t, slot) &&
			d.clusters[1].MasterOf(t, quorum.KeySlot(r)) == d.clusters[1].MasterOf(t, slot) {
			hit = append(hit, r)
		}
	}
	var wg sync.WaitGroup
	for _, cl := range d.clusters[:2] {
		wg.Go(cl.MasterOf(t, slot).RestartEmpty)
	}
	wg.Wait()
	restarted := grants.Load()
	// The quarantine (3 s) and the floors, then a while of load.
	var g grant
	waitFor(t, 20*time.Second, "the restarted slots to vote again", func() bool {
		for _, r := range hit {
			var ok bool
			g, ok, _ = tryRlock(d.c1, r, 1000)
			if !ok {
				return false
			}
			do(t, d.c1, "RUNLOCK", r, g.token)
		}
		return true
	})
	time.Sleep(time.Second)
	violations := stopLoad()
	after := grants.Load()
	if len(violations) > 0 {
		t.Fatalf("%d violations, first: %v", len(violations), violations[:min(5, len(violations))])
	}
	t.Logf("grants: %d before the restarts, %d during them, %d after; %d resources on the restarted shards of both clusters",
		before, restarted-before, after-restarted, len(hit))
	if len(hit) == 0 || before == 0 || after-restarted == 0 {
		t.Fatalf("the scenario did not happen: %d resources hit, %d grants before, %d after", len(hit), before, after-restarted)
	}
	for _, p := range []*Proxy{d.p1, d.p2} {
		if !strings.Contains(p.log.String(), "cluster shard lost its data") {
			t.Errorf("proxy %s did not see the restarts", p.Addr)
		}
	}
}

// TestClusterQuarantineEndByAdmin: the shards of one slot restart empty in
// 2 of the 3 clusters with a quarantine of an hour: their resources answer
// NOQUORUM, the other slots are served. RQUARANTINE END of both masters
// (on each proxy) lets the slots vote again once their floors are raised,
// with a greater fence; a master with nothing quarantined is refused.
func TestClusterQuarantineEndByAdmin(t *testing.T) {
	waits(t) // mostly waits (quarantines, validity, failovers): overlaps the other cluster tests
	d := startClusterDeployment(t, 3, 3, 0, func(c *proxyConfig) {
		c.maxTTL = time.Hour
		c.extra = "auth:\n  users:\n    - {name: ops, password: opw, resources: [\"*\"], admin: true}\n"
	})
	for _, c := range []*redis.Client{d.c1, d.c2} {
		c.Options().Username, c.Options().Password = "ops", "opw"
	}
	g, ok := rlock(t, d.c1, "ledger", 1000)
	if !ok {
		t.Fatal("not granted")
	}
	do(t, d.c1, "RUNLOCK", "ledger", g.token)
	slot := quorum.KeySlot("ledger")
	var wg sync.WaitGroup
	for _, cl := range d.clusters[:2] {
		wg.Go(cl.MasterOf(t, slot).RestartEmpty)
	}
	wg.Wait()
	waitFor(t, 10*time.Second, "both proxies to quarantine the restarted shards' slots", func() bool {
		_, ok1, err1 := tryRlock(d.c1, "ledger", 1000)
		_, ok2, err2 := tryRlock(d.c2, "ledger", 1000)
		return !ok1 && !ok2 && err1 != nil && err2 != nil && strings.HasPrefix(err1.Error(), "NOQUORUM") && strings.HasPrefix(err2.Error(), "NOQUORUM")
	})
	expectErr(t, d.c1, "ERR master is not quarantined (RQUARANTINE LIST shows each master)", "RQUARANTINE", "END", "2")
	for _, c := range []*redis.Client{d.c1, d.c2} {
		for _, m := range []string{"0", "1"} {
			if v := do(t, c, "RQUARANTINE", "END", m); v == nil {
				t.Fatalf("RQUARANTINE END %s: nil", m)
			}
		}
	}
	var g2 grant
	waitFor(t, 10*time.Second, "the slots to vote again once their floors are raised", func() bool {
		var ok bool
		g2, ok, _ = tryRlock(d.c2, "ledger", 1000)
		return ok
	})
	if g2.fence <= g.fence {
		t.Fatalf("fence %d after %d", g2.fence, g.fence)
	}
	if !strings.Contains(d.p1.log.String(), "QUARANTINE ENDED BY AN OPERATOR") {
		t.Error("the end of the quarantine was not logged")
	}
}
