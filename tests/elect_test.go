package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// electEvent is one change a campaigner made and saw acknowledged: what
// an observer must be pushed ("leader <value> <term>" or "none <term>"),
// and when the campaigner's reply arrived.
type electEvent struct {
	push string
	at   time.Time
	term int64 // the leadership's term, then its changes in order (seq)
	seq  int
}

// electPush is one push an observer read, and when.
type electPush struct {
	push string
	at   time.Time
}

// TestElectionTwoProxies: three campaigners on two proxies over 5 real
// masters take turns leading one election while a master is paused and
// another restarted empty. Each leadership proclaims a new value through
// the other proxy, then resigns or lets its ttl lapse. From the replies
// alone: no two leaderships' validity windows overlap (a window runs from
// the CAMPAIGN reply to the end of its validity or the RESIGN sent,
// whichever is first), and the terms strictly increase. An observer on
// the second proxy (RESP3, RELECT OBSERVE) is pushed every change in
// order, never a term that goes back, each within 200 ms of the reply
// that made it (a lapse: within 200 ms of the ttl's end); a RESP2 client
// following with RELECT WAITCHANGE never sees a term go back either.
func TestElectionTwoProxies(t *testing.T) {
	waits(t) // mostly waits (expiries, retries, restarts): overlaps the other waiting tests
	redistest.RequireReal(t, "SIGSTOP and restarts need real masters")
	const (
		workers = 3
		ttl     = 600 * time.Millisecond
		hold    = 120 * time.Millisecond // between two changes of one leadership
		// bound is how late a push may be. A change whose announcement
		// the proxy missed would be pushed only at the leader's ttl end
		// (the next read), 480 ms after a resignation; 200 ms leaves
		// room for a 2-core machine loaded by the parallel tests, where
		// pushes arrive up to 90 ms late.
		bound = 200 * time.Millisecond
	)
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = 2 * time.Second // the quarantine of the restarted master
	pa, pb := startProxy(t, cfg), startProxy(t, cfg)
	proxies := []*redis.Client{pa.Client(), pb.Client()}
	ctx := context.Background()

	// The observer, on the second proxy.
	obs := dialRaw(t, pb.Addr)
	obs.send("HELLO", "3")
	if _, err := obs.read(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	obs.send("RELECT", "OBSERVE", "job")
	var (
		pmu    sync.Mutex
		pushes []electPush
	)
	obsDone := make(chan error, 1)
	go func() {
		for {
			v, err := obs.read(30 * time.Second)
			if err != nil {
				obsDone <- err
				return
			}
			at := time.Now()
			switch {
			case len(v) == 1 && v[0] == "+OK":
			case len(v) == 5 && v[0] == ">4" && v[1] == "leader" && v[2] == "job":
				pmu.Lock()
				pushes = append(pushes, electPush{"leader " + v[3] + " " + v[4], at})
				pmu.Unlock()
			case len(v) == 4 && v[0] == ">3" && v[1] == "none" && v[2] == "job":
				pmu.Lock()
				pushes = append(pushes, electPush{"none " + v[3], at})
				pmu.Unlock()
			default:
				obsDone <- fmt.Errorf("observer read %q", v)
				return
			}
		}
	}()

	// A RESP2 follower on the first proxy.
	follower := redis.NewClient(&redis.Options{Addr: pa.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { follower.Close() })

	type leadership struct {
		term       int64
		from, to   time.Time
		sent       time.Time
		validityMS int64
	}
	var (
		mu     sync.Mutex
		leads  []leadership
		events []electEvent
		lapses []electEvent // "none <term>" due by at
		wg     sync.WaitGroup
		errs   = make(chan error, workers+2)
		runFor = time.Duration(soak(t)) * 7 * time.Second
	)
	runCtx, cancel := context.WithTimeout(ctx, runFor)
	defer cancel()
	wg.Add(1)
	go func() { // the chaos
		defer wg.Done()
		time.Sleep(1500 * time.Millisecond)
		cl.servers[1].Pause()
		time.Sleep(1500 * time.Millisecond)
		cl.servers[1].Resume()
		time.Sleep(500 * time.Millisecond)
		cl.servers[3].Restart()
	}()
	wg.Add(1)
	go func() { // the RESP2 follower
		defer wg.Done()
		var last int64
		for runCtx.Err() == nil {
			v, err := follower.Do(ctx, "RELECT", "WAITCHANGE", "job", last, "WAIT", 1000).Result()
			if err != nil && strings.HasPrefix(err.Error(), "NOQUORUM ") {
				continue
			}
			if err == redis.Nil {
				continue // nobody leads: compare with the last term seen
			}
			if err != nil {
				errs <- fmt.Errorf("WAITCHANGE: %w", err)
				return
			}
			term := v.([]any)[1].(int64)
			if term < last {
				errs <- fmt.Errorf("WAITCHANGE went back from term %d to %d", last, term)
				return
			}
			last = term
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own, other := proxies[w%2], proxies[(w+1)%2]
			for n := 0; runCtx.Err() == nil; n++ {
				value := fmt.Sprintf("w%d-%d", w, n)
				sent := time.Now()
				v, err := own.Do(ctx, "RELECT", "CAMPAIGN", "job", ttl.Milliseconds(), value, "WAIT", 2000).Result()
				got := time.Now()
				if err == redis.Nil || err != nil && strings.HasPrefix(err.Error(), "NOQUORUM ") {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d: CAMPAIGN: %w", w, err)
					return
				}
				g := v.([]any)
				token, validity, term := g[0].(string), g[1].(int64), g[2].(int64)
				end := sent.Add(time.Duration(validity) * time.Millisecond)
				ts := strconv.FormatInt(term, 10)
				mine := []electEvent{{"leader " + value + " " + ts, got, term, 0}}
				time.Sleep(hold)
				value2 := value + "-p"
				pv, err := other.Do(ctx, "RELECT", "PROCLAIM", "job", token, value2).Result()
				pgot := time.Now()
				if err == nil && pv == int64(1) && pgot.Before(end) {
					mine = append(mine, electEvent{"leader " + value2 + " " + ts, pgot, term, 1})
				}
				time.Sleep(hold)
				resignAt := time.Now()
				if n%3 == 2 {
					// Let it lapse: the observer must say so once the
					// masters' keys expired, at the latest ttl after
					// the reply (the keys were set before it).
					mu.Lock()
					leads = append(leads, leadership{term, got, earlier(end, resignAt), sent, validity})
					events = append(events, mine...)
					lapses = append(lapses, electEvent{"none " + ts, got.Add(ttl), term, 2})
					mu.Unlock()
					time.Sleep(time.Until(got.Add(ttl + bound)))
					continue
				}
				rv, err := own.Do(ctx, "RELECT", "RESIGN", "job", token).Result()
				rgot := time.Now()
				if err == nil && rv == int64(1) && rgot.Before(end) {
					mine = append(mine, electEvent{"none " + ts, rgot, term, 2})
				}
				mu.Lock()
				leads = append(leads, leadership{term, got, earlier(end, resignAt), sent, validity})
				events = append(events, mine...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	time.Sleep(2 * bound) // the last pushes
	select {
	case err := <-obsDone:
		t.Fatalf("observer: %v", err)
	default:
	}

	slices.SortFunc(leads, func(a, b leadership) int { return a.from.Compare(b.from) })
	if len(leads) < 10 {
		t.Fatalf("only %d leaderships", len(leads))
	}
	for i := 1; i < len(leads); i++ {
		p, l := leads[i-1], leads[i]
		if l.from.Before(p.to) {
			t.Errorf("leaderships overlap: term %d valid %v..%v, term %d from %v", p.term, p.from.Format("15:04:05.000"), p.to.Format("15:04:05.000"), l.term, l.from.Format("15:04:05.000"))
		}
		if l.term <= p.term {
			t.Errorf("term %d after term %d", l.term, p.term)
		}
	}

	pmu.Lock()
	got := slices.Clone(pushes)
	pmu.Unlock()
	// Terms never go back, and the pushes are in order.
	var last int64
	for _, p := range got {
		f := strings.Fields(p.push)
		term, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		if term < last {
			t.Errorf("the observer was pushed term %d after term %d (%q)", term, last, p.push)
		}
		last = term
	}
	// Every change acknowledged to a campaigner was pushed, within the
	// bound, in the order made: by term (leaderships do not overlap, and
	// terms increase), then in the order of the leadership's changes
	// (replies to different clients may arrive in another order).
	slices.SortFunc(events, func(a, b electEvent) int {
		if a.term != b.term {
			return int(a.term - b.term)
		}
		return a.seq - b.seq
	})
	at := 0
	var slowest time.Duration
	for _, e := range events {
		i := slices.IndexFunc(got[at:], func(p electPush) bool { return p.push == e.push })
		if i < 0 {
			t.Errorf("%q (acknowledged at %v) was never pushed after the push %d; pushes %q", e.push, e.at.Format("15:04:05.000"), at, pushList(got))
			continue
		}
		p := got[at+i]
		late := p.at.Sub(e.at)
		if late > bound {
			t.Errorf("%q pushed %v after its reply", e.push, late)
		}
		slowest = max(slowest, late)
		at += i + 1
	}
	for _, e := range lapses {
		i := slices.IndexFunc(got, func(p electPush) bool { return p.push == e.push })
		if i < 0 {
			t.Errorf("the lapse %q was never pushed", e.push)
			continue
		}
		if late := got[i].at.Sub(e.at); late > bound {
			t.Errorf("the lapse %q was pushed %v after the ttl ended", e.push, late)
		}
	}
	t.Logf("%d leaderships, %d changes acknowledged, %d pushes, the slowest %v after its reply", len(leads), len(events), len(got), slowest)
}

func pushList(ps []electPush) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.push
	}
	return out
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
