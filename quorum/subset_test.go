package quorum

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// masterState is what one master does in a subset test's attempt.
type masterState int

const (
	stOK    masterState = iota // answers, and nothing it holds stands in the way
	stDown                     // every request fails at once
	stTaken                    // answers, and someone else holds what the attempt needs (the row's take)
	stSlow                     // answers only after the attempt returned (held until then)
)

func (s masterState) String() string { return [...]string{"ok", "down", "taken", "slow"}[s] }

// tokenMode is how a subset test's attempt names its token.
type tokenMode int

const (
	fresh     tokenMode = iota // a fresh token per try
	fixed                      // TOKEN mine
	exclusive                  // drop-in's SET NX: value "mine", and the other holder uses "mine" too
)

func (m tokenMode) String() string { return [...]string{"fresh", "fixed", "exclusive"}[m] }

// token is the token an attempt in this mode passes ("": a fresh one).
func (m tokenMode) token() string {
	if m == fresh {
		return ""
	}
	return "mine"
}

// outcome is what an attempt answers.
type outcome int

const (
	wantGrant    outcome = iota
	wantRefusal          // not granted: (nil, nil), or the row's refusal error
	wantNoQuorum         // a *QuorumError naming how many masters answered
)

func (o outcome) String() string { return [...]string{"granted", "refused", "no quorum"}[o] }

// grantExpect is an acquisition's rule: granted iff a quorum of masters
// are ok (free and answering in time); otherwise refused if a quorum
// answered, else no quorum.
func grantExpect(ok, _, answered, _, q int) outcome {
	switch {
	case ok >= q:
		return wantGrant
	case answered >= q:
		return wantRefusal
	}
	return wantNoQuorum
}

// subsetRow is one primitive under the every-subset test. Its actions are
// small closures over the engine, so that the engine's API can change
// under them without touching the test's logic.
type subsetRow struct {
	// name names the row's subtests.
	name string
	// primitive is the primitive the row covers.
	primitive Primitive
	// sizes are the cluster sizes to try every assignment of states on.
	sizes []int
	// modes are the token modes to try each assignment with.
	modes []tokenMode
	// setup, if set, runs on the fresh cluster before any state is
	// applied (every master up and empty).
	setup func(c *cluster) error
	// take makes master i "taken" for the primitive: someone else holds
	// what the attempt needs there. other is the other holder's token
	// ("other", or "mine" in exclusive mode).
	take func(c *cluster, i int, other string)
	// acquire makes one attempt (no WAIT) in mode.
	acquire func(ctx context.Context, c *cluster, mode tokenMode) subsetResult
	// expect is the outcome for ok masters ok, taken ones taken and
	// answered = ok + taken of n with quorum q; nil means grantExpect.
	expect func(ok, taken, answered, n, q int) outcome
	// refusal is the error a refusal answers (nil: none).
	refusal error
	// mayChange, if set, names keys that an attempt may leave changed on
	// a master in state st (once everything landed): by default it
	// leaves nothing but the master-wide fence keys and lease mark.
	mayChange func(c *cluster, st masterState, key string) bool
}

// subsetResult is one attempt's answer, with what to check once every
// request of it landed.
type subsetResult struct {
	granted bool
	err     error
	// holders counts the masters that hold all of the grant.
	holders func() int
	// check, if set, checks the grant (or the refusal) further.
	check func() error
	// lease is the grant, extended and given back through the engine's
	// verbs; nil for a latch create or arrival, which nothing gives back.
	lease *Lease
}

// lockResult wraps a lock-like lease (lock, multi, fair, write, SET NX).
func lockResult(c *cluster, lease *Lease, err error, p Primitive, resources []string) subsetResult {
	res := subsetResult{granted: lease != nil, err: err, lease: lease}
	if lease == nil {
		return res
	}
	res.holders = func() int {
		least := len(c.nodes)
		for _, r := range resources {
			least = min(least, c.holders(r, lease.Token))
		}
		return least
	}
	res.check = func() error {
		if !slices.Equal(lease.Resources, resources) || len(lease.Fences) != len(resources) || lease.Primitive != p {
			return fmt.Errorf("lease %+v for %v", lease, resources)
		}
		for _, f := range lease.Fences {
			if f != 1 {
				return fmt.Errorf("first fences = %v, want 1 each", lease.Fences)
			}
		}
		return nil
	}
	return res
}

// semSubsetRow is a semaphore row: count permits of a limit-permit
// semaphore. A taken master holds, for holders that differ from master to
// master (so that none of them holds anything on a quorum), enough slots
// that fewer than count are free there: the state that per-master counts
// see as "full here, room there", and that must refuse the attempt there.
func semSubsetRow(limit, count int, sizes []int) subsetRow {
	return subsetRow{
		name:      fmt.Sprintf("semaphore/limit=%d,count=%d", limit, count),
		primitive: Semaphore,
		sizes:     sizes,
		modes:     []tokenMode{fresh, fixed},
		take: func(c *cluster, i int, other string) {
			k, _ := c.eng.semKeys("s")
			f := c.nodes[i]
			f.set(k.base, strconv.Itoa(limit), time.Minute)
			// limit-count+1 taken slots leave count-1 free, starting at
			// a slot that depends on the master.
			for j := range limit - count + 1 {
				s := (i + j) % limit
				f.set(fmt.Sprintf("%s:s:%d", k.base, s), fmt.Sprintf("%s-m%d-s%d", other, i, s), time.Minute)
			}
		},
		acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
			lease, err := c.eng.Acquire(ctx, Request{Primitive: Semaphore, Resources: []string{"s"}, TTL: 10 * time.Second, Token: mode.token(), Options: SemaphoreOptions{Limit: limit, Count: count}})
			res := subsetResult{granted: lease != nil, err: err, lease: lease}
			if lease == nil {
				return res
			}
			k, _ := c.eng.semKeys("s")
			res.holders = func() int {
				least := len(c.nodes)
				for _, s := range lease.Slots {
					least = min(least, c.holders(fmt.Sprintf("%s:s:%d", k.base, s), lease.Token))
				}
				return least
			}
			res.check = func() error {
				if len(lease.Slots) != count || lease.Count != count || !slices.Equal(lease.Resources, []string{"s"}) || lease.Primitive != Semaphore {
					return fmt.Errorf("lease %+v for %d permits", lease, count)
				}
				return nil
			}
			return res
		},
	}
}

// subsetRows is TestEverySubset's table: one row per primitive (and per
// shape of a primitive whose refusals differ).
func subsetRows() []subsetRow {
	// lockRow: Lock, or SetNX in exclusive mode, over resources, where
	// a taken master has the lock key taken held by the other holder.
	lockRow := func(name string, resources []string, taken string, sizes []int, modes []tokenMode) subsetRow {
		prim := Lock
		if slices.Equal(modes, []tokenMode{exclusive}) {
			prim = SetNX
		}
		return subsetRow{
			name: name, primitive: prim, sizes: sizes, modes: modes,
			take: func(c *cluster, i int, other string) { c.nodes[i].set(taken, other, time.Minute) },
			acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
				p := Lock
				if mode == exclusive {
					p = SetNX
				}
				lease, err := c.eng.Acquire(ctx, Request{Primitive: p, Resources: resources, TTL: 10 * time.Second, Token: mode.token()})
				return lockResult(c, lease, err, p, resources)
			},
		}
	}
	fairRow := func(name string, take func(c *cluster, i int, other string)) subsetRow {
		return subsetRow{
			name: name, primitive: Fair, sizes: []int{3}, modes: []tokenMode{fresh, fixed},
			take: take,
			acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
				lease, err := c.eng.Acquire(ctx, Request{Primitive: Fair, Resources: []string{"r"}, TTL: 10 * time.Second, Token: mode.token()})
				return lockResult(c, lease, err, Fair, []string{"r"})
			},
		}
	}
	return []subsetRow{
		// "taken": another holds the lock key.
		lockRow("lock", []string{"r"}, "r", []int{3, 5}, []tokenMode{fresh, fixed}),
		// Three resources, not in canonical order; "taken": the one in the
		// middle is held. Exclusive mode is SET NX's rule over a set.
		lockRow("multi", []string{"c", "a", "b"}, "b", []int{3, 5}, []tokenMode{fresh, fixed, exclusive}),
		// Drop-in's SET NX: the other holder set the key with the very
		// value this attempt asks with (the classic bug of a constant
		// value), and a refused attempt must not delete it.
		lockRow("setnx", []string{"r"}, "r", []int{3, 5}, []tokenMode{exclusive}),
		// "taken": a plain lock holds the resource (fair and plain locks
		// exclude each other through the lock key).
		fairRow("fair/held", func(c *cluster, i int, other string) { c.nodes[i].set("r", other, time.Minute) }),
		// "taken": another waiter heads the resource's queue there (a
		// live deadline, the lowest ticket), the lock key being free.
		fairRow("fair/queued", func(c *cluster, i int, other string) {
			fk := c.eng.fairKeys("r")
			f := c.nodes[i]
			f.m.ZAdd(fk[0], 1, other)
			f.m.ZAdd(fk[1], float64(time.Now().Add(time.Minute).UnixMilli()), other)
			f.m.SetTTL(fk[0], time.Minute)
			f.m.SetTTL(fk[1], time.Minute)
		}),
		{
			// A reader; "taken": a writer holds the lock key.
			name: "read", primitive: Read, sizes: []int{3}, modes: []tokenMode{fresh, fixed},
			take: func(c *cluster, i int, other string) { c.nodes[i].set("r", other, time.Minute) },
			acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
				lease, err := c.eng.Acquire(ctx, Request{Primitive: Read, Resources: []string{"r"}, TTL: 10 * time.Second, Token: mode.token()})
				res := subsetResult{granted: lease != nil, err: err, lease: lease}
				if lease == nil {
					return res
				}
				res.holders = func() int { return c.readers("r", lease.Token) }
				res.check = func() error {
					if !slices.Equal(lease.Resources, []string{"r"}) || len(lease.Fences) != 0 || lease.Primitive != Read {
						return fmt.Errorf("read lease %+v", lease)
					}
					return nil
				}
				return res
			},
		},
		{
			// A writer (a plain lock); "taken": readers hold the resource
			// (the lock key holds "", the reader is in the readers' set).
			name: "write", primitive: Lock, sizes: []int{3}, modes: []tokenMode{fresh, fixed},
			take: func(c *cluster, i int, other string) {
				f := c.nodes[i]
				f.set("r", "", time.Minute)
				readers := c.eng.rwKeys("r").readers
				f.m.ZAdd(readers, float64(time.Now().Add(time.Minute).UnixMilli()), other)
				f.m.SetTTL(readers, time.Minute)
			},
			acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
				lease, err := c.eng.Acquire(ctx, Request{Primitive: Lock, Resources: []string{"r"}, TTL: 10 * time.Second, Token: mode.token()})
				return lockResult(c, lease, err, Lock, []string{"r"})
			},
		},
		semSubsetRow(1, 1, []int{3}),
		semSubsetRow(2, 1, []int{3, 5}),
		semSubsetRow(2, 2, []int{3}),
		latchCreateRow(),
		latchDownRow(),
		electSubsetRow(),
	}
}

// electSubsetRow: a campaign for election "e" advertising "v"; "taken":
// another leader holds the election's lock key there (with its own
// advertisement). A grant holds the key and the advertisement (token,
// "v") on a quorum, with the first term 1, and Info reads it back as
// the leader; a refused campaign leaves the other leader's keys as they
// were.
func electSubsetRow() subsetRow {
	keys := func(c *cluster) (lock, advert string) {
		ls, _ := c.eng.electSet("e")
		return ls.keys[0], ls.advert
	}
	return subsetRow{
		name: "election", primitive: Election, sizes: []int{3}, modes: []tokenMode{fresh, fixed},
		take: func(c *cluster, i int, other string) {
			lock, advert := keys(c)
			f := c.nodes[i]
			f.set(lock, other, time.Minute)
			f.m.HSet(advert, "token", other, "value", "theirs")
			f.m.SetTTL(advert, time.Minute)
		},
		acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
			lease, err := c.eng.Acquire(ctx, Request{Primitive: Election, Resources: []string{"e"}, TTL: 10 * time.Second, Token: mode.token(), Options: ElectionOptions{Value: "v"}})
			res := subsetResult{granted: lease != nil, err: err, lease: lease}
			if lease == nil {
				return res
			}
			lock, advert := keys(c)
			res.holders = func() int {
				n := 0
				for _, f := range c.nodes {
					v, _ := f.value(lock)
					if v == lease.Token && f.m.HGet(advert, "token") == lease.Token && f.m.HGet(advert, "value") == "v" {
						n++
					}
				}
				return n
			}
			res.check = func() error {
				if !slices.Equal(lease.Resources, []string{"e"}) || !slices.Equal(lease.Fences, []uint64{1}) || lease.Primitive != Election {
					return fmt.Errorf("election lease %+v", lease)
				}
				info, err := c.eng.Info(ctx, Election, "e")
				if err != nil || !info.Held || info.Holder != lease.Token || info.Value != "v" || info.Fence != 1 || info.TTL <= 0 {
					return fmt.Errorf("leader = %v, %v", info, err)
				}
				return nil
			}
			return res
		},
	}
}

// latchCreateRow: the attempt creates a latch of count 3. A taken
// master has it already, with the same count and one arrival ("first"):
// another coordinator created it and a worker arrived there. The create
// is "granted" (created) when a quorum answered and fewer than a quorum
// had the latch; "refused" (it existed: 0, nil) when a quorum had it;
// no quorum when fewer than a quorum answered. Nothing is rolled back: a
// create leaves the latch (its count key) where it made it, and never
// touches a taken master's latch. Once every request landed, the count
// the engine reports is never below what a quorum of the masters that
// answer agree on (2 left when a quorum had the latch, else 3).
func latchCreateRow() subsetRow {
	return subsetRow{
		name: "latch/create", primitive: Latch, sizes: []int{3}, modes: []tokenMode{fixed},
		take: func(c *cluster, i int, _ string) {
			k, _ := c.eng.latchKeys("l")
			c.nodes[i].set(k.count, "3", time.Minute)
			c.nodes[i].m.SAdd(k.arrivals, "first")
			c.nodes[i].m.SetTTL(k.arrivals, time.Minute)
		},
		expect: func(_, taken, answered, _, q int) outcome {
			switch {
			case answered < q:
				return wantNoQuorum
			case taken >= q:
				return wantRefusal
			}
			return wantGrant
		},
		mayChange: func(c *cluster, st masterState, key string) bool {
			k, _ := c.eng.latchKeys("l")
			return st != stTaken && key == k.count
		},
		acquire: func(ctx context.Context, c *cluster, _ tokenMode) subsetResult {
			created, err := c.eng.Latch(ctx, LatchRequest{Op: LatchCreate, Name: "l", TTL: time.Minute, Count: 3})
			k, _ := c.eng.latchKeys("l")
			res := subsetResult{granted: err == nil && created == 1, err: err}
			res.holders = func() int {
				n := 0
				for _, f := range c.nodes {
					if v, ok := f.value(k.count); ok && v == "3" {
						n++
					}
				}
				return n
			}
			res.check = func() error {
				if err != nil {
					return nil
				}
				// What each master that answers misses; a count is the
				// largest of a quorum's answers (the first quorum's):
				// never below what a quorum agrees on.
				var left []int
				for _, f := range c.nodes {
					f.mu.Lock()
					down := f.down
					f.mu.Unlock()
					v, ok := f.value(k.count)
					if !ok || down {
						continue
					}
					arrived, _ := f.m.Members(k.arrivals)
					n, _ := strconv.Atoi(v)
					left = append(left, n-len(arrived))
				}
				if len(left) < c.eng.quorum {
					return nil // no quorum answers Info
				}
				slices.Sort(left)
				info, err := c.eng.Info(ctx, Latch, "l")
				if err != nil {
					return fmt.Errorf("count after the create: %v", err)
				}
				if info.Count < left[c.eng.quorum-1] || info.Count > left[len(left)-1] {
					return fmt.Errorf("count after the create = %d; the masters miss %v", info.Count, left)
				}
				return nil
			}
			return res
		},
	}
}

// latchDownRow: a latch of count 3 is created through the engine on
// every master, and one arrival ("first") recorded; then the attempt is
// the arrival "mine", "granted" when it is counted on a quorum (the
// answer is 1 left). A taken master lost the latch (it expired there, or
// the master restarted empty): it answers "no such latch", and the
// arrival must not create it there. The latch is refused (ErrNoLatch)
// only when N - quorum + 1 masters lack it; with fewer than a quorum of
// masters that have it answering and fewer than that lacking it, it is
// no quorum. An arrival is not rolled back (it counts once, however often
// it is sent): on the masters that have the latch it stays.
func latchDownRow() subsetRow {
	return subsetRow{
		name: "latch/down", primitive: Latch, sizes: []int{3}, modes: []tokenMode{fixed},
		setup: func(c *cluster) error {
			ctx := context.Background()
			if created, err := c.eng.Latch(ctx, LatchRequest{Op: LatchCreate, Name: "l", TTL: time.Minute, Count: 3}); created != 1 || err != nil {
				return fmt.Errorf("create: %v %v", created, err)
			}
			if left, err := c.eng.Latch(ctx, LatchRequest{Op: LatchDown, Name: "l", Token: "first"}); left != 2 || err != nil {
				return fmt.Errorf("first arrival: %d %v", left, err)
			}
			// Both reached every master.
			c.eng.bg.Wait()
			return nil
		},
		take: func(c *cluster, i int, _ string) {
			k, _ := c.eng.latchKeys("l")
			c.nodes[i].del(k.count)
			c.nodes[i].del(k.arrivals)
		},
		expect: func(ok, taken, _, n, q int) outcome {
			switch {
			case ok >= q:
				return wantGrant
			case taken >= n-q+1:
				return wantRefusal
			}
			return wantNoQuorum
		},
		refusal: ErrNoLatch,
		mayChange: func(c *cluster, st masterState, key string) bool {
			k, _ := c.eng.latchKeys("l")
			return st != stTaken && key == k.arrivals
		},
		acquire: func(ctx context.Context, c *cluster, mode tokenMode) subsetResult {
			token := mode.token()
			left, err := c.eng.Latch(ctx, LatchRequest{Op: LatchDown, Name: "l", Token: token})
			k, _ := c.eng.latchKeys("l")
			res := subsetResult{granted: err == nil, err: err}
			res.holders = func() int {
				n := 0
				for _, f := range c.nodes {
					if in, _ := f.m.SIsMember(k.arrivals, token); in {
						n++
					}
				}
				return n
			}
			res.check = func() error {
				if err != nil {
					return nil
				}
				if left != 1 {
					return fmt.Errorf("%d left after the second of 3 arrivals", left)
				}
				// A retry of the arrival counts once.
				if again, err := c.eng.Latch(ctx, LatchRequest{Op: LatchDown, Name: "l", Token: token}); again != 1 || err != nil {
					return fmt.Errorf("the arrival again: %d left, %v", again, err)
				}
				return nil
			}
			return res
		},
	}
}

// readers counts the masters where token is a live reader of r (its lock
// key holds "").
func (c *cluster) readers(r, token string) int {
	k := c.eng.rwKeys(r)
	n := 0
	for _, f := range c.nodes {
		v, held := f.value(k.lock)
		if _, err := f.m.ZScore(k.readers, token); err == nil && held && v == "" {
			n++
		}
	}
	return n
}

// dump is every live key of the master with its value (members and
// scores for sorted sets, members for sets, fields for hashes), for
// comparing states.
func (f *fakeNode) dump() map[string]string {
	out := map[string]string{}
	for _, k := range f.m.Keys() {
		switch typ := f.m.Type(k); typ {
		case "string":
			v, _ := f.m.Get(k)
			out[k] = "string " + strconv.Quote(v)
		case "zset":
			ss, _ := f.m.SortedSet(k)
			var ms []string
			for _, m := range slices.Sorted(maps.Keys(ss)) {
				ms = append(ms, fmt.Sprintf("%q=%v", m, ss[m]))
			}
			out[k] = "zset " + strings.Join(ms, " ")
		case "set":
			ms, _ := f.m.Members(k)
			out[k] = "set " + strings.Join(ms, " ")
		case "hash":
			fs, _ := f.m.HKeys(k)
			slices.Sort(fs)
			var ms []string
			for _, fl := range fs {
				ms = append(ms, fmt.Sprintf("%q=%q", fl, f.m.HGet(k, fl)))
			}
			out[k] = "hash " + strings.Join(ms, " ")
		default:
			out[k] = typ
		}
	}
	return out
}

// quiesce lets every held request land and waits until every request the
// engine sent (rollbacks included) returned and landed.
func (c *cluster) quiesce() {
	for _, f := range c.nodes {
		f.unhold()
	}
	c.eng.bg.Wait()
	for _, f := range c.nodes {
		f.drain()
	}
}

// TestEverySubset runs every primitive (subsetRows, one row each) under
// every assignment of {ok, down, taken, slow} to the masters, in every
// token mode of the row, and checks:
//
//   - the outcome: granted iff a quorum of masters are ok; otherwise not
//     granted (nil, nil) when a quorum answered, else a *QuorumError with
//     the number that answered (the latch rows have their own rules, see
//     latchCreateRow and latchDownRow);
//   - after a grant, once every request landed (slow masters' included):
//     the grant holds on at least a quorum, the lease has the expected
//     shape (first fences 1), Extend answers the new validity, and
//     Release answers held and leaves nothing of it on any master;
//   - after a refusal or no quorum, once every request landed (late
//     acquires to slow masters and their rollbacks included): every
//     master holds exactly what it held before the attempt (the other
//     holder's state intact), plus the master-wide fence bounds and
//     lease high-water mark (which expires): nothing of the attempt.
//
// The rows: lock (fresh and TOKEN), multi (three resources; fresh,
// TOKEN and SET NX's rule), setnx, fair/held, fair/queued, read, write,
// semaphore with limit 1 and 2 (one permit, and two), latch/create and
// latch/down; each row's comment says what "taken" means for it. Every
// primitive the engine serves (Primitives) must have a row
// (TestPrimitiveChecklist checks it).
//
// Sizes: N=3 for every row (64 assignments), and also N=5 (1024) for
// the plain lock, the multi-resource lock, SET NX and the limit-2
// semaphore; the other rows at N=5 would add about 5 s per token mode
// under -race on two cores, for no new shape of quorum. Under -race only
// N=3 runs (the N=5 rows took 20 s each there, a third of the package's
// time in make test, and run the same code); make test runs the test
// again without -race, N=5 included.
func TestEverySubset(t *testing.T) {
	// The attempts of every row share one pool: the rows' subtests run
	// in parallel (as many at once as -parallel allows), so that one
	// row's last attempts, waiting on slow masters, overlap the next
	// row's.
	sem := make(chan struct{}, subsetParallel)
	warmFakes(t, subsetParallel*5)
	var started atomic.Int32
	for _, row := range subsetRows() {
		for _, n := range row.sizes {
			if raceOn && n > 3 {
				continue
			}
			t.Run(fmt.Sprintf("%s/N=%d", row.name, n), func(t *testing.T) {
				t.Parallel()
				total := 1
				for range n {
					total *= 4
				}
				var wg sync.WaitGroup
				for combo := range total {
					states := make([]masterState, n)
					for i, x := 0, combo; i < n; i, x = i+1, x/4 {
						states[i] = masterState(x % 4)
					}
					for _, mode := range row.modes {
						wg.Add(1)
						sem <- struct{}{}
						if started.Add(1) <= subsetParallel {
							// Ramp up: all the clusters starting at
							// once under -race starve their own first
							// rounds.
							time.Sleep(2500 * time.Microsecond)
						}
						go func() {
							defer wg.Done()
							defer func() { <-sem }()
							checkSubset(t, row, states, mode)
						}()
					}
				}
				wg.Wait()
			})
		}
	}
}

// subsetParallel is how many attempts TestEverySubset runs at once, and
// subsetTimeout their MasterTimeout. Most attempts wait for a slow master
// to time out, so the test takes about attempts * subsetTimeout /
// subsetParallel; without -race the attempts cost little CPU and three
// times as many run at once (idleFakes keeps 1024 fakes, five per
// attempt). The fakes answer requests to ok masters at
// once (see fakeNode.Send, inline), so that only the slow masters time
// out however busy the machine is. (subsetParallel is in sim_race_test.go
// and sim_norace_test.go.)
const subsetTimeout = 250 * time.Millisecond

// checkSubset runs one attempt of row on masters in states.
func checkSubset(t *testing.T, row subsetRow, states []masterState, mode tokenMode) {
	// Only the "slow" masters time out: they hold every request until
	// the attempt returned, then let them land.
	const timeout = subsetTimeout
	n := len(states)
	c := buildCluster(t, n, Options{MasterTimeout: timeout})
	defer c.close()
	for _, f := range c.nodes {
		f.mu.Lock()
		f.inline = true
		f.mu.Unlock()
	}
	name := fmt.Sprintf("%s %v mode=%v", row.name, states, mode)
	if row.setup != nil {
		if err := row.setup(c); err != nil {
			t.Errorf("%s: setup: %v", name, err)
			return
		}
	}
	other := "other"
	if mode == exclusive {
		// The classic bug of a constant value: another client holds the
		// lock with the very value this one asks with.
		other = "mine"
	}
	var ok, taken int
	for i, s := range states {
		switch s {
		case stOK:
			ok++
		case stTaken:
			taken++
			row.take(c, i, other)
		}
	}
	before := make([]map[string]string, n)
	for i, f := range c.nodes {
		before[i] = f.dump()
	}
	for i, s := range states {
		switch s {
		case stDown:
			c.nodes[i].setDown(true)
		case stSlow:
			c.nodes[i].hold()
		}
	}
	q := n/2 + 1
	ctx := context.Background()
	res := row.acquire(ctx, c, mode)
	c.quiesce()
	expect := row.expect
	if expect == nil {
		expect = grantExpect
	}
	want := expect(ok, taken, ok+taken, n, q)
	switch want {
	case wantGrant:
		if !res.granted || res.err != nil {
			t.Errorf("%s: want a grant, got granted=%v err=%v", name, res.granted, res.err)
			return
		}
		if h := res.holders(); h < q {
			t.Errorf("%s: granted but held on %d masters", name, h)
		}
	case wantRefusal:
		if res.granted || (row.refusal == nil && res.err != nil) || (row.refusal != nil && !errors.Is(res.err, row.refusal)) {
			t.Errorf("%s: want not granted (%v), got granted=%v err=%v", name, row.refusal, res.granted, res.err)
			return
		}
	case wantNoQuorum:
		var qe *QuorumError
		if res.granted || !errors.As(res.err, &qe) {
			t.Errorf("%s: want *QuorumError, got granted=%v err=%v", name, res.granted, res.err)
			return
		} else if qe.Got != ok+taken || qe.Need != q || qe.Total != n {
			t.Errorf("%s: QuorumError %+v, want got=%d need=%d", name, qe, ok+taken, q)
		}
	}
	if res.check != nil {
		if err := res.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	what := "a refused attempt"
	switch l := res.lease; {
	case res.granted && l == nil:
		what = "a " + row.name + " (nothing gives it back)"
	case res.granted:
		if v, err := c.eng.Extend(ctx, l, 20*time.Second); v <= 10*time.Second || err != nil {
			t.Errorf("%s: extend = %v, %v; want a validity above the first ttl", name, v, err)
		}
		c.quiesce()
		what = "a released grant"
		if held, err := c.eng.Release(ctx, l); !held || err != nil {
			t.Errorf("%s: release = %v, %v; want held", name, held, err)
		}
	}
	c.quiesce()
	// Each master holds what it held before (the other owner's state),
	// the master-wide fence bounds and lease high-water mark (a master
	// that granted raised it; it expires with the ttl), and nothing of
	// this attempt.
	lag, seq := c.eng.fenceKeys("")
	hwm := c.eng.leaseKey("")
	for i, f := range c.nodes {
		now := f.dump()
		for k, v := range now {
			switch {
			case v == before[i][k]:
			case k == lag || k == seq:
			case k == hwm && f.m.TTL(k) > 0:
			case row.mayChange != nil && row.mayChange(c, states[i], k):
			case before[i][k] != "":
				t.Errorf("%s: master %d: %s changed %q from %s to %s", name, i, what, k, before[i][k], v)
			default:
				t.Errorf("%s: master %d: key %q = %s left behind by %s", name, i, k, v, what)
			}
		}
		for k, v := range before[i] {
			if _, kept := now[k]; !kept && !(row.mayChange != nil && row.mayChange(c, states[i], k)) {
				t.Errorf("%s: master %d: %s deleted %q (%s)", name, i, what, k, v)
			}
		}
	}
}
