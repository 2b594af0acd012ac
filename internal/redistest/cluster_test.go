package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// tagInSlot finds a hash tag whose slot is slot, asking CLUSTER KEYSLOT
// (pipelined) on addr.
func tagInSlot(t *testing.T, addr string, slot int) string {
	t.Helper()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	defer rc.Close()
	const batch = 1000
	for base := 0; base < 200000; base += batch {
		cmds, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range batch {
				p.ClusterKeySlot(ctx, fmt.Sprintf("t%d", base+i))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		for i, cmd := range cmds {
			if cmd.(*redis.IntCmd).Val() == int64(slot) {
				return fmt.Sprintf("t%d", base+i)
			}
		}
	}
	t.Fatalf("no tag found for slot %d", slot)
	return ""
}

func newClusterClient(t *testing.T, c *redistest.Cluster) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { cc.Close() })
	return cc
}

func TestClusterHarness(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, 3, 0)
	t.Logf("cluster up in %v", time.Since(start))
	ctx := context.Background()

	seeds := c.Seeds()
	if len(seeds) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("Seeds() = %v, %d nodes; want 3 and 3", seeds, len(c.Nodes()))
	}
	cc := newClusterClient(t, c)

	// Every slot is served, by one of the seeds.
	//lint:ignore SA1019 CLUSTER SLOTS is what clients route by on Redis 7.0, and what this checks
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	isSeed := map[string]bool{}
	for _, s := range seeds {
		isSeed[s] = true
	}
	var served [16384]bool
	for _, r := range ranges {
		if !isSeed[r.Nodes[0].Addr] {
			t.Errorf("slots %d-%d served by %s, not a seed", r.Start, r.End, r.Nodes[0].Addr)
		}
		for s := r.Start; s <= r.End; s++ {
			served[s] = true
		}
	}
	for s, ok := range served {
		if !ok {
			t.Fatalf("slot %d is not served", s)
		}
	}
	if m := c.MasterOf(t, 0); m.Addr != seeds[0] {
		t.Errorf("MasterOf(0) = %s, want the first seed %s", m.Addr, seeds[0])
	}
	if m := c.MasterOf(t, 16383); m.Addr != seeds[2] {
		t.Errorf("MasterOf(16383) = %s, want the last seed %s", m.Addr, seeds[2])
	}

	if err := cc.Set(ctx, "hello", "world", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := cc.Get(ctx, "hello").Result(); err != nil || v != "world" {
		t.Fatalf("GET hello = %q, %v", v, err)
	}

	// Move slot 42 with 3000 keys (30 MIGRATE batches) while a client keeps
	// incrementing a counter in it and creating new keys in it.
	const slot, preload = 42, 3000
	tag := tagInSlot(t, seeds[0], slot)
	from := c.MasterOf(t, slot)
	to := c.Nodes()[1]
	if from == to {
		t.Fatalf("slot %d already on %s", slot, to.Addr)
	}
	key := "{" + tag + "}:k0"
	if _, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range preload {
			p.Set(ctx, fmt.Sprintf("{%s}:k%d", tag, i), i, 0)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	counter := "{" + tag + "}:counter"
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes int64
	var writeErr error
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if writes == 0 {
				close(started)
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := cc.Incr(ctx, counter).Err(); err != nil {
				writeErr = fmt.Errorf("INCR: %w", err)
				return
			}
			if err := cc.Set(ctx, fmt.Sprintf("{%s}:w%d", tag, writes), "x", 0).Err(); err != nil {
				writeErr = fmt.Errorf("SET: %w", err)
				return
			}
			if writes++; writes == 1 {
				close(started)
			}
		}
	}()
	<-started
	move := time.Now()
	c.MoveSlots(t, from, to, []int{slot})
	t.Logf("MoveSlots took %v", time.Since(move))
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("writing during MoveSlots: %v", writeErr)
	}
	t.Logf("%d INCR+SET during MoveSlots", writes)
	if got, err := cc.Get(ctx, counter).Int64(); err != nil || got != writes {
		t.Fatalf("counter = %d, %v after %d INCRs", got, err, writes)
	}
	if m := c.MasterOf(t, slot); m != to {
		t.Fatalf("MasterOf(%d) = %s after MoveSlots, want %s", slot, m.Addr, to.Addr)
	}
	if v, err := cc.Get(ctx, key).Result(); err != nil || v != "0" {
		t.Fatalf("GET %s after MoveSlots = %q, %v", key, v, err)
	}
	direct := redis.NewClient(&redis.Options{Addr: to.Addr, Protocol: 2, DisableIdentity: true})
	defer direct.Close()
	if n, err := direct.ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || n != preload+1+writes {
		t.Fatalf("%s holds %d keys of slot %d (%v), want %d", to.Addr, n, slot, err, preload+1+writes)
	}

	// Pause and resume a master that the next steps do not use.
	other := c.Nodes()[2]
	other.Pause()
	probe := redis.NewClient(&redis.Options{Addr: other.Addr, Protocol: 2, DisableIdentity: true, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err == nil {
		t.Fatalf("a paused node answered PING")
	}
	other.Resume()
	c.WaitOK(t)

	// Restart the new owner empty: same ID, same slots, no keys.
	id := to.ID(t)
	restart := time.Now()
	to.RestartEmpty()
	t.Logf("RestartEmpty took %v", time.Since(restart))
	if got := to.ID(t); got != id {
		t.Fatalf("ID after RestartEmpty = %s, want %s", got, id)
	}
	c.WaitOK(t)
	if m := c.MasterOf(t, slot); m != to {
		t.Fatalf("MasterOf(%d) = %s after RestartEmpty, want %s", slot, m.Addr, to.Addr)
	}
	if v, err := cc.Get(ctx, key).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s after RestartEmpty = %q, %v; want redis.Nil", key, v, err)
	}
}

func TestClusterFailover(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, 3, 1)
	t.Logf("cluster up in %v", time.Since(start))
	ctx := context.Background()
	if len(c.Seeds()) != 3 || len(c.Nodes()) != 6 {
		t.Fatalf("Seeds() = %v, %d nodes; want 3 and 6", c.Seeds(), len(c.Nodes()))
	}
	master := c.Nodes()[0]
	if m := c.MasterOf(t, 0); m != master {
		t.Fatalf("MasterOf(0) = %s, want %s", m.Addr, master.Addr)
	}
	reps := c.ReplicasOf(t, master)
	if len(reps) != 1 {
		t.Fatalf("ReplicasOf(%s) = %d nodes, want 1", master.Addr, len(reps))
	}
	replica := reps[0]

	cc := newClusterClient(t, c)
	//lint:ignore SA1019 CLUSTER SLOTS is what clients route by on Redis 7.0, and what this checks
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var mine []redis.ClusterSlot
	for _, r := range ranges {
		if r.Nodes[0].Addr == master.Addr {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("%s serves no slots", master.Addr)
	}

	// A key on the master, replicated before the master dies.
	key := "{" + tagInSlot(t, master.Addr, 0) + "}:k"
	direct := redis.NewClient(&redis.Options{Addr: master.Addr, Protocol: 2, DisableIdentity: true})
	defer direct.Close()
	if err := direct.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := direct.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}

	id := master.ID(t)
	master.Kill()
	if got := master.ID(t); got != id {
		t.Fatalf("ID of a killed node = %s, want %s", got, id)
	}
	fo := time.Now()
	c.Failover(t, replica)
	t.Logf("Failover took %v", time.Since(fo))
	for _, r := range mine {
		for _, s := range []int{r.Start, r.End} {
			if m := c.MasterOf(t, s); m != replica {
				t.Fatalf("MasterOf(%d) = %s after Failover, want %s", s, m.Addr, replica.Addr)
			}
		}
	}
	// cc still holds the slot map with the dead master; a new client
	// seeded with the promoted replica reads the new one.
	cc2 := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{replica.Addr}, Protocol: 2, DisableIdentity: true})
	defer cc2.Close()
	if v, err := cc2.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s after Failover = %q, %v", key, v, err)
	}
}
