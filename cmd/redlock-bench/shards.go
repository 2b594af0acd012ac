package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterMasters is the number of masters (votes) of the shards section.
const clusterMasters = 3

// shardScaling measures how the masters' work spreads over the shards of
// cluster masters: 3 masters that are single servers, then Redis Clusters
// of each of shardCounts shards, RLOCK -> RUNLOCK at C=64 over 100,000
// resources. For each: the cycles/s; the masters' CPU per cycle (every
// redis-server process); one shard's mean share (that over the shards of
// the 3 clusters) and the busiest shard's; and what follows: cycles/s per
// core of the busiest shard (a cluster master's ceiling is its busiest
// shard's, as one server's is its own). On this machine every process
// shares the same 2 cores, so the rate itself cannot grow with the
// shards; what the section shows is how each shard's CPU per cycle falls,
// which is what lets a deployment on separate cores grow.
func shardScaling(dir string, o options, shardCounts []int) error {
	fmt.Printf("\n## shards: RLOCK -> RUNLOCK at C=64, K=100000, %d masters of n shards each, %v per cell, median of %d\n\n",
		clusterMasters, o.duration, o.repeat)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "masters\tshards\tcycles/s\terrors\tmasters' CPU us/cycle\tone shard's (mean)\tbusiest shard's\tcycles/s per busiest-shard core\tproxy CPU us/cycle\t")
	configs := append([]int{0}, shardCounts...) // 0: single servers
	for _, shards := range configs {
		var e *env
		var err error
		what := "single servers"
		if shards == 0 {
			e, err = start(dir, clusterMasters, o.proxyBin, "", o.ttl, "", o.proxyYAML)
		} else {
			what = "clusters"
			e, err = startClusters(dir, clusterMasters, shards, o.proxyBin, o.ttl)
		}
		if err != nil {
			return err
		}
		drv := e.proxyDriver(64)
		var runs []result
		var busiest []float64
		for range o.repeat {
			before := e.cpu()
			perProc := e.procCPU()
			r := cycle(drv, 64, 100000, 1, o.duration, o.ttl)
			cycles := r.rate * o.duration.Seconds()
			r.cpu = e.cpu().perK(before, cycles)
			after := e.procCPU()
			top := time.Duration(0)
			for i := range after {
				top = max(top, after[i]-perProc[i])
			}
			busiest = append(busiest, float64(top)/float64(time.Microsecond)/max(cycles, 1))
			if r.errors > 0 {
				fmt.Fprintf(os.Stderr, "shards %d: %d errors, the first: %v\n", shards, r.errors, r.firstErr)
			}
			runs = append(runs, r)
		}
		drv.close()
		e.stop()
		r := median(runs)
		slices.Sort(busiest)
		top := busiest[len(busiest)/2]
		masters := float64(r.cpu.masters) / float64(time.Microsecond) / 1000
		proxy := float64(r.cpu.proxy) / float64(time.Microsecond) / 1000
		n := max(shards, 1)
		mean := masters / float64(clusterMasters*n)
		perCore := 0.0
		if top > 0 {
			perCore = 1e6 / top
		}
		fmt.Fprintf(tw, "%d %s\t%d\t%.0f\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t\n", clusterMasters, what, n, r.rate, r.errors, masters, mean, top, perCore, proxy)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("\n(one shard's: the masters' CPU per cycle over the shards of all the masters; busiest shard's: the most CPU any one redis-server process spent, per cycle; with single servers a \"shard\" is a server)")
	return nil
}

// procCPU is the CPU time of each master process.
func (e *env) procCPU() []time.Duration {
	out := make([]time.Duration, len(e.masters))
	for i, m := range e.masters {
		out[i] = cpuTime(m.Process.Pid)
	}
	return out
}

// startClusters starts n Redis Clusters of shards masters each (no
// replicas; slots in equal ranges, joined with CLUSTER MEET) and a proxy
// whose masters they are.
func startClusters(dir string, n, shards int, proxyBin string, ttl time.Duration) (*env, error) {
	e := &env{ttl: ttl}
	cfg := "metrics_listen: \"\"\nlog_level: warn\nlimits: {max_clients: 15000}\nmasters:\n"
	for c := range n {
		var addrs []string
		for s := range shards {
			cmd, addr, err := startRedis(filepath.Join(dir, fmt.Sprintf("c%d-%d-%d", shards, c, s)),
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
			if err != nil {
				e.stop()
				return nil, err
			}
			e.masters = append(e.masters, cmd)
			e.addrs = append(e.addrs, addr)
			e.direct = append(e.direct, redis.NewClient(&redis.Options{Addr: addr}))
			addrs = append(addrs, addr)
		}
		if err := joinCluster(e.direct[len(e.direct)-shards:], addrs); err != nil {
			e.stop()
			return nil, err
		}
		cfg += fmt.Sprintf("  - cluster: [%q]\n", addrs[0])
	}
	path := filepath.Join(dir, fmt.Sprintf("proxy-clusters-%d.yaml", shards))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		e.stop()
		return nil, err
	}
	var err error
	if e.proxy, e.addr, err = startProxy(proxyBin, path, ""); err != nil {
		e.stop()
		return nil, err
	}
	// The proxy reads the slot map at its start: wait until it serves.
	c := redis.NewClient(&redis.Options{Addr: e.addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, err := c.Do(context.Background(), "RLOCK", "bench:warmup", "1000").Slice()
		if err == nil && len(v) == 3 {
			c.Do(context.Background(), "RUNLOCK", "bench:warmup", v[0])
			return e, nil
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("the proxy does not serve on clusters of %d shards: %v", shards, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// joinCluster gives each node an equal range of the slots and makes them
// meet, then waits until every node says the cluster is ok.
func joinCluster(nodes []*redis.Client, addrs []string) error {
	ctx := context.Background()
	per := 16384 / len(nodes)
	for i, c := range nodes {
		lo, hi := i*per, (i+1)*per-1
		if i == len(nodes)-1 {
			hi = 16383
		}
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %w", addrs[i], err)
		}
	}
	for _, a := range addrs[1:] {
		host, port, _ := strings.Cut(a, ":")
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s: %w", a, err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := true
		for _, c := range nodes {
			info, err := c.ClusterInfo(ctx).Result()
			known := 0
			if err == nil {
				for _, l := range strings.Split(info, "\r\n") {
					if v, found := strings.CutPrefix(l, "cluster_known_nodes:"); found {
						known, _ = strconv.Atoi(v)
					}
				}
			}
			if err != nil || !strings.Contains(info, "cluster_state:ok") || known != len(nodes) {
				ok = false
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster of %v is not ok after 20s", addrs)
		}
	}
}
