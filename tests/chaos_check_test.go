package tests

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The checker of `make chaos` (chaos_test.go): what the contract promises,
// checked over the grants the workers recorded. Every rule is stated from
// the clients' side, so that a violation is something two clients really
// relied on, never an artefact of the measure.

// chaosGrant is one grant as its client saw it. Its window [got, end) is
// when the client relied on it: from the moment the reply arrived to the
// moment it sent the release, or to sent + validity if that came first
// (validity counts from the start of the attempt that succeeded, which is
// no earlier than the request was sent). A grant whose validity ran out
// before its reply arrived has an empty window: granted, never relied on.
type chaosGrant struct {
	kind      string   // the acquiring command: RLOCK, RFAIRLOCK, RMULTILOCK, RRLOCK or RSEMACQUIRE
	row       string   // its row in the availability table
	worker    string   // who asked
	token     string   // the grant's token
	resources []string // the resources it holds (the semaphore's name for RSEMACQUIRE)
	fences    []int64  // one per resource; none for RRLOCK and RSEMACQUIRE
	permits   int      // RSEMACQUIRE: permits taken (COUNT)
	limit     int      // RSEMACQUIRE: the semaphore's limit

	sent, got, end time.Duration // since the run began
}

// exclusive reports whether g excludes every other holder of its
// resources: locks, fair locks, multi-resource locks (the writers of a
// read-write lock are plain locks).
func (g chaosGrant) exclusive() bool { return g.kind != "RRLOCK" && g.kind != "RSEMACQUIRE" }

// held reports whether the client relied on g at all.
func (g chaosGrant) held() bool { return g.end > g.got }

func (g chaosGrant) String() string {
	s := fmt.Sprintf("%s %s token %s", g.kind, g.worker, g.token)
	if len(g.fences) > 0 {
		s += fmt.Sprintf(" fences %v", g.fences)
	}
	if g.permits > 0 {
		s += fmt.Sprintf(" permits %d/%d", g.permits, g.limit)
	}
	return s + fmt.Sprintf(" (sent %v, held %v-%v)", ms(g.sent), ms(g.got), ms(g.end))
}

// ms prints a time since the run began to the tenth of a millisecond.
func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// chaosHistory is what a run recorded: the grants, and for fair waiters
// (by token) when a sample of the masters first saw them queued on a
// quorum.
type chaosHistory struct {
	grants []chaosGrant
	queued map[string]time.Duration
}

// checkHistory returns every violation of the contract in h, each with
// the grants involved.
func checkHistory(h chaosHistory) []string {
	var bad []string
	bad = append(bad, checkExclusion(h.grants)...)
	bad = append(bad, checkPermits(h.grants)...)
	bad = append(bad, checkFences(h.grants)...)
	bad = append(bad, checkFairOrder(h.grants, h.queued)...)
	return bad
}

// byResource groups the grants that hold a resource, with the index of
// that resource in each grant's list (for its fence).
type holdOf struct {
	g chaosGrant
	i int // index of the resource in g.resources and g.fences
}

func byResource(grants []chaosGrant, keep func(chaosGrant) bool) map[string][]holdOf {
	out := map[string][]holdOf{}
	for _, g := range grants {
		if !keep(g) {
			continue
		}
		for i, r := range g.resources {
			out[r] = append(out[r], holdOf{g, i})
		}
	}
	return out
}

// checkExclusion: on each resource, no two exclusive holders and no
// exclusive holder beside a reader, at any instant. In order of arrival,
// each hold must start after every earlier exclusive hold ended (and an
// exclusive one after every earlier reader's); the earlier hold that ends
// last is the one to compare with.
func checkExclusion(grants []chaosGrant) []string {
	var bad []string
	for r, holds := range byResource(grants, func(g chaosGrant) bool { return g.kind != "RSEMACQUIRE" && g.held() }) {
		sort.SliceStable(holds, func(i, j int) bool { return holds[i].g.got < holds[j].g.got })
		var lastWriter, lastReader *chaosGrant
		for _, h := range holds {
			g := h.g
			if lastWriter != nil && g.got < lastWriter.end {
				what := "two holders at once"
				if !g.exclusive() {
					what = "a reader beside a writer"
				}
				bad = append(bad, fmt.Sprintf("%s: %s: %v and %v", r, what, *lastWriter, g))
			}
			if g.exclusive() && lastReader != nil && g.got < lastReader.end {
				bad = append(bad, fmt.Sprintf("%s: a writer beside a reader: %v and %v", r, *lastReader, g))
			}
			last := &lastReader
			if g.exclusive() {
				last = &lastWriter
			}
			if *last == nil || g.end > (*last).end {
				*last = &g
			}
		}
	}
	return bad
}

// checkPermits: at no instant do a semaphore's live grants hold more
// permits than its limit.
func checkPermits(grants []chaosGrant) []string {
	var bad []string
	for name, holds := range byResource(grants, func(g chaosGrant) bool { return g.kind == "RSEMACQUIRE" && g.held() }) {
		type edge struct {
			at time.Duration
			g  chaosGrant
			in bool
		}
		var edges []edge
		for _, h := range holds {
			edges = append(edges, edge{h.g.got, h.g, true}, edge{h.g.end, h.g, false})
		}
		// Ends before starts at the same instant: the windows are half open.
		sort.SliceStable(edges, func(i, j int) bool {
			return edges[i].at < edges[j].at || edges[i].at == edges[j].at && !edges[i].in && edges[j].in
		})
		var live []chaosGrant
		for _, e := range edges {
			if !e.in {
				live = slices.DeleteFunc(live, func(x chaosGrant) bool { return x.token == e.g.token && x.got == e.g.got })
				continue
			}
			live = append(live, e.g)
			n := 0
			for _, x := range live {
				n += x.permits
			}
			if n > e.g.limit {
				bad = append(bad, fmt.Sprintf("%s: %d permits held at %v, limit %d: %v", name, n, ms(e.at), e.g.limit, live))
			}
		}
	}
	return bad
}

// earlierFences answers "the highest fence among the points before t":
// points (when, fence) sorted by when, with running maxima.
type earlierFences struct {
	at  []time.Duration
	max []int64
	who []chaosGrant // the grant with that maximum
}

func newEarlierFences(when func(holdOf) (time.Duration, bool), holds []holdOf) earlierFences {
	var pts []holdOf
	var at []time.Duration
	for _, h := range holds {
		if t, ok := when(h); ok {
			pts = append(pts, h)
			at = append(at, t)
		}
	}
	idx := make([]int, len(pts))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return at[idx[a]] < at[idx[b]] })
	var e earlierFences
	for _, i := range idx {
		h := pts[i]
		f := h.g.fences[h.i]
		if n := len(e.max); n > 0 && e.max[n-1] >= f {
			f, h.g = e.max[n-1], e.who[n-1]
		}
		e.at, e.max, e.who = append(e.at, at[i]), append(e.max, f), append(e.who, h.g)
	}
	return e
}

// before returns the highest fence of a point at or before t (inclusive
// says whether at t counts), and its grant; 0 if none.
func (e earlierFences) before(t time.Duration, inclusive bool) (int64, chaosGrant) {
	n := sort.Search(len(e.at), func(i int) bool { return e.at[i] > t || !inclusive && e.at[i] == t })
	if n == 0 {
		return 0, chaosGrant{}
	}
	return e.max[n-1], e.who[n-1]
}

// checkFences: on each resource, an exclusive grant's fence exceeds the
// fence of every grant known from the clients' side to be earlier: one
// whose reply arrived before this one was asked for, or whose window
// ended before this one's began (with both windows non-empty, the other
// order would mean two live grants at once).
func checkFences(grants []chaosGrant) []string {
	var bad []string
	for r, holds := range byResource(grants, func(g chaosGrant) bool { return g.exclusive() && len(g.fences) > 0 }) {
		answered := newEarlierFences(func(h holdOf) (time.Duration, bool) { return h.g.got, true }, holds)
		ended := newEarlierFences(func(h holdOf) (time.Duration, bool) { return h.g.end, h.g.held() }, holds)
		for _, h := range holds {
			f := h.g.fences[h.i]
			if top, a := answered.before(h.g.sent, false); top >= f {
				bad = append(bad, fmt.Sprintf("%s: fence %d after fence %d, granted before it was asked for: %v then %v", r, f, top, a, h.g))
			}
			if !h.g.held() {
				continue
			}
			if top, a := ended.before(h.g.got, true); top >= f {
				bad = append(bad, fmt.Sprintf("%s: fence %d after fence %d, held before it: %v then %v", r, f, top, a, h.g))
			}
		}
	}
	return bad
}

// checkFairOrder: RFAIRLOCK waiters are granted in arrival order. What a
// client can tell of arrival: if A was queued on a quorum of masters (a
// sample of the masters saw it) before B sent its request, B's ticket is
// above A's (docs/design/fair-locks.md), so if both are granted, A's
// grant comes first: its fence is lower.
func checkFairOrder(grants []chaosGrant, queued map[string]time.Duration) []string {
	var bad []string
	for _, inv := range fairInversions(grants, queued) {
		if inv.lead > fairOrderBound {
			bad = append(bad, fmt.Sprintf("%s: fair order: %v was sent %v before %v and granted after it (the bound is %v)",
				inv.a.resources[0], inv.a, inv.lead, inv.b, fairOrderBound))
		}
	}
	for r, holds := range byResource(grants, func(g chaosGrant) bool { return g.kind == "RFAIRLOCK" }) {
		first := newEarlierFences(func(h holdOf) (time.Duration, bool) { t, ok := queued[h.g.token]; return t, ok }, holds)
		for _, h := range holds {
			if top, a := first.before(h.g.sent, false); top >= h.g.fences[h.i] {
				bad = append(bad, fmt.Sprintf("%s: fair order: %v was queued on a quorum at %v, before %v was sent, and granted after it",
					r, a, ms(queued[a.token]), h.g))
			}
		}
	}
	return bad
}

// fairOrderBound is the contract's bound on fair order
// (docs/design/fair-locks.md, "Arrival"): of two RFAIRLOCK waiters, the
// one whose command reached its proxy more than this before the other's
// is granted first. The checker applies it to when the clients sent
// their commands, which on this machine is when the proxies read them
// but for the scheduling of a loaded machine.
const fairOrderBound = 50 * time.Millisecond

// fairInversion is a pair of fair grants of one resource granted against
// the order of their requests: a was sent lead before b, queued, and
// granted after b.
type fairInversion struct {
	a, b chaosGrant
	lead time.Duration
}

// fairInversions lists the RFAIRLOCK grants of one resource granted
// before a request sent earlier and seen queued (a higher fence): for
// each such grant b, the earliest such request a (the largest lead). In
// O(n log n): going through the grants in the order sent, the earliest
// queued request with a fence above f is the first of the running fence
// maxima above f.
func fairInversions(grants []chaosGrant, queued map[string]time.Duration) []fairInversion {
	var out []fairInversion
	for _, holds := range byResource(grants, func(g chaosGrant) bool { return g.kind == "RFAIRLOCK" }) {
		sort.SliceStable(holds, func(i, j int) bool { return holds[i].g.sent < holds[j].g.sent })
		var maxima []holdOf // queued, fences rising, in the order sent
		for _, b := range holds {
			f := b.g.fences[b.i]
			k := sort.Search(len(maxima), func(k int) bool { return maxima[k].g.fences[maxima[k].i] > f })
			if k < len(maxima) && maxima[k].g.sent < b.g.sent {
				a := maxima[k]
				out = append(out, fairInversion{a.g, b.g, b.g.sent - a.g.sent})
			}
			if _, ok := queued[b.g.token]; ok && (len(maxima) == 0 || f > maxima[len(maxima)-1].g.fences[maxima[len(maxima)-1].i]) {
				maxima = append(maxima, b)
			}
		}
	}
	return out
}

// TestChaosChecker runs the checker on hand-made histories: clean ones,
// and one of each kind of violation.
func TestChaosChecker(t *testing.T) {
	at := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	lock := func(who string, fence int64, sent, got, end int, res ...string) chaosGrant {
		if len(res) == 0 {
			res = []string{"r"}
		}
		fences := make([]int64, len(res))
		for i := range fences {
			fences[i] = fence
		}
		kind := "RLOCK"
		if len(res) > 1 {
			kind = "RMULTILOCK"
		}
		return chaosGrant{kind: kind, worker: who, token: who, resources: res, fences: fences, sent: at(sent), got: at(got), end: at(end)}
	}
	fair := func(who string, fence int64, sent, got, end int) chaosGrant {
		g := lock(who, fence, sent, got, end)
		g.kind = "RFAIRLOCK"
		return g
	}
	read := func(who string, sent, got, end int) chaosGrant {
		return chaosGrant{kind: "RRLOCK", worker: who, token: who, resources: []string{"r"}, sent: at(sent), got: at(got), end: at(end)}
	}
	sem := func(who string, permits, sent, got, end int) chaosGrant {
		return chaosGrant{kind: "RSEMACQUIRE", worker: who, token: who, resources: []string{"s"}, permits: permits, limit: 3, sent: at(sent), got: at(got), end: at(end)}
	}
	for _, tc := range []struct {
		name   string
		grants []chaosGrant
		queued map[string]time.Duration
		want   []string // a substring of each violation, in order; none for a clean history
	}{
		{name: "clean", grants: []chaosGrant{
			lock("a", 1, 0, 1, 10),
			lock("b", 2, 5, 11, 20), // asked while a held it, granted after
			lock("c", 3, 21, 22, 30, "r", "q"),
			read("r1", 30, 31, 40), read("r2", 30, 32, 45), // readers share
			lock("w", 4, 31, 46, 50),
			lock("lapsed", 5, 40, 48, 47), // validity ran out before the reply: never held
			lock("d", 6, 49, 51, 60),
			sem("s1", 1, 0, 1, 10), sem("s2", 2, 0, 2, 10), sem("s3", 1, 0, 10, 20), // 3 of 3, the third as the first leaves
			fair("f1", 7, 60, 61, 70), fair("f2", 8, 62, 71, 80),
		}, queued: map[string]time.Duration{"f2": at(63), "f1": at(64)}},
		{name: "two holders", grants: []chaosGrant{
			lock("a", 1, 0, 1, 10), lock("b", 2, 5, 9, 20),
		}, want: []string{"r: two holders at once: RLOCK a token a fences [1] (sent 0s, held 1ms-10ms) and RLOCK b"}},
		{name: "multi over a lock", grants: []chaosGrant{
			lock("a", 1, 0, 1, 10, "q"), lock("m", 2, 0, 5, 15, "r", "q"),
		}, want: []string{"q: two holders at once: RLOCK a token a fences [1] (sent 0s, held 1ms-10ms) and RMULTILOCK m"}},
		{name: "reader beside writer", grants: []chaosGrant{
			lock("w", 1, 0, 1, 10), read("r1", 0, 5, 12), lock("w2", 2, 11, 11, 20),
		}, want: []string{"r: a reader beside a writer: RLOCK w", "r: a writer beside a reader: RRLOCK r1"}},
		{name: "over limit", grants: []chaosGrant{
			sem("s1", 2, 0, 1, 10), sem("s2", 1, 0, 2, 10), sem("s3", 1, 0, 9, 20),
		}, want: []string{"s: 4 permits held at 9ms, limit 3"}},
		{name: "fence lower than one granted before the ask", grants: []chaosGrant{
			lock("a", 5, 0, 1, 10), lock("b", 4, 11, 12, 20),
		}, want: []string{"r: fence 4 after fence 5, granted before it was asked for: RLOCK a", "r: fence 4 after fence 5, held before it"}},
		{name: "fence lower than one held before", grants: []chaosGrant{
			lock("a", 5, 1, 2, 10), lock("b", 4, 0, 12, 20),
		}, want: []string{"r: fence 4 after fence 5, held before it: RLOCK a"}},
		{name: "fair order past the bound", grants: []chaosGrant{
			fair("early", 5, 0, 80, 90), fair("late", 4, 60, 61, 70),
		}, queued: map[string]time.Duration{"early": at(70), "late": at(62)},
			want: []string{"r: fair order: RFAIRLOCK early token early fences [5] (sent 0s, held 80ms-90ms) was sent 60ms before RFAIRLOCK late"}},
		{name: "fair order", grants: []chaosGrant{
			fair("early", 5, 0, 20, 30), fair("late", 4, 5, 10, 19),
		}, queued: map[string]time.Duration{"early": at(3), "late": at(6)},
			want: []string{"r: fair order: RFAIRLOCK early token early fences [5] (sent 0s, held 20ms-30ms) was queued on a quorum at 3ms, before RFAIRLOCK late"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := checkHistory(chaosHistory{grants: tc.grants, queued: tc.queued})
			if len(bad) != len(tc.want) {
				t.Fatalf("%d violations, want %d:\n%s", len(bad), len(tc.want), strings.Join(bad, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(bad[i], w) {
					t.Errorf("violation %d:\n%s\nwant it to contain\n%s", i, bad[i], w)
				}
			}
		})
	}
}
