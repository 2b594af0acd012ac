package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

// engineOn starts an engine of its own on the cluster's masters, as a
// proxy started later would be, and closes it when the test ends.
func engineOn(t *testing.T, c *cluster, opts Options) *Engine {
	t.Helper()
	e := c.newEngine(t, opts)
	t.Cleanup(e.Close)
	return e
}

const intactMark = "redlock-proxy:intact"

// TestIntactMarkUnseenRestart: a master that restarted empty while no
// proxy ran is quarantined by the proxy started after it, though that
// proxy never saw its earlier run_id. The classic bug: the lock held on
// exactly a quorum (masters 0-2, with 3 and 4 down), master 0 restarted
// empty, 3 and 4 back: a proxy that counted master 0 at once would grant
// the held lock to a second client with masters 0, 3 and 4.
func TestIntactMarkUnseenRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	for i, f := range c.nodes {
		if _, ok := f.value(intactMark); !ok {
			t.Fatalf("master %d has no intact mark after the first engine met it", i)
		}
	}
	c.nodes[3].setDown(true)
	c.nodes[4].setDown(true)
	l, err := c.eng.Acquire(ctx, Request{Resources: []string{"r"}, TTL: 2 * time.Second})
	if err != nil || l == nil {
		t.Fatalf("grant with masters 0-2: %v %v", l, err)
	}
	c.eng.Close() // every proxy down
	c.nodes[0].restart()
	c.nodes[3].setDown(false)
	c.nodes[4].setDown(false)

	e := engineOn(t, c, Options{Quarantine: time.Hour})
	st := e.nodeStatus()
	if st[0].State != StateQuarantined {
		t.Fatalf("master 0, restarted unseen: %+v, want quarantined", st[0])
	}
	for i := 1; i < 5; i++ {
		if st[i].State != StateUp {
			t.Fatalf("master %d: %+v, want up", i, st[i])
		}
	}
	l2, err := e.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second})
	if l2 != nil {
		t.Fatalf("the held lock granted again by masters 0, 3 and 4: %+v (first %+v)", l2, l)
	}
	if err != nil && !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("second grant: %v", err)
	}
	// Its quarantine is sized by the live grant (2 s here), not max_ttl,
	// and its rejoin marks it.
	if !eventually(6*time.Second, func() bool { return e.nodeStatus()[0].State == StateUp }) {
		t.Fatalf("master 0 did not rejoin: %+v", e.nodeStatus()[0])
	}
	if _, ok := c.nodes[0].value(intactMark); !ok {
		t.Fatal("master 0 rejoined without its intact mark")
	}
}

// TestIntactMarkNewMasters: masters no proxy marked yet are new only when
// every one of them answers: with one down, an engine counts none of them
// (a master down while the others were marked lacks the mark too); once
// it answers, all are marked and vote.
func TestIntactMarkNewMasters(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	ctx := context.Background()
	c.eng.Close()
	for _, f := range c.nodes {
		f.restart() // empty, new run_ids: masters no proxy met
	}
	c.nodes[4].setDown(true)
	e := engineOn(t, c, Options{HealthInterval: 20 * time.Millisecond})
	for i, st := range e.nodeStatus() {
		if st.State == StateUp {
			t.Fatalf("master %d votes before every master answered: %+v", i, st)
		}
	}
	if l, err := e.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second}); l != nil || !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("a grant before the masters were checked: %v %v", l, err)
	}
	if _, ok := c.nodes[0].value(intactMark); ok {
		t.Fatal("marked before every master answered")
	}
	c.nodes[4].setDown(false)
	if !eventually(5*time.Second, func() bool { return e.up() == 5 }) {
		t.Fatalf("not every master votes once all answered: %+v", e.nodeStatus())
	}
	for i, f := range c.nodes {
		if _, ok := f.value(intactMark); !ok {
			t.Errorf("master %d not marked", i)
		}
	}
	if l, err := e.Acquire(ctx, Request{Resources: []string{"r"}, TTL: time.Second}); l == nil || err != nil {
		t.Fatalf("grant once marked: %v %v", l, err)
	}
}

// TestIntactMarkEndedByOperator: RQUARANTINE END of a master not checked
// yet (no master marked, one down) takes the operator's word that the
// masters are new: those that answer are marked and vote. The master
// that was down comes back without the mark while the others have it: it
// is quarantined as restarted (sized by the live grants: none) and then
// rejoins, marked.
func TestIntactMarkEndedByOperator(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 5, Options{})
	c.eng.Close()
	for _, f := range c.nodes {
		f.restart()
	}
	c.nodes[4].setDown(true)
	e := engineOn(t, c, Options{HealthInterval: 20 * time.Millisecond, Quarantine: time.Hour})
	if e.up() != 0 {
		t.Fatalf("masters vote before they were checked: %+v", e.nodeStatus())
	}
	if _, err := e.endQuarantine(context.Background(), 4, "test"); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("END of the master that is down: %v, want it to say it does not answer", err)
	}
	if st, err := e.endQuarantine(context.Background(), 0, "test"); err != nil || st.State != StateUp {
		t.Fatalf("END of master 0: %+v %v", st, err)
	}
	if e.up() != 4 {
		t.Fatalf("masters 0-3 do not vote after the operator's word: %+v", e.nodeStatus())
	}
	c.nodes[4].setDown(false)
	if !eventually(5*time.Second, func() bool { return e.up() == 5 }) {
		t.Fatalf("master 4 did not rejoin: %+v", e.nodeStatus()[4])
	}
	if e.nodeStatus()[4].Restarts != 0 {
		t.Fatalf("master 4: %+v", e.nodeStatus()[4])
	}
	for i, f := range c.nodes {
		if _, ok := f.value(intactMark); !ok {
			t.Errorf("master %d not marked", i)
		}
	}
}
