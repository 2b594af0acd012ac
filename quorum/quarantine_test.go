package quorum

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestMajorityRestartEndQuarantine: two of three masters restart empty,
// so neither quarantine can be sized (one other master kept its data, a
// quorum is two) and both last Quarantine: every grant is NOQUORUM, the
// status says why, and the failure to size is logged once per master
// however many health ticks pass. An operator's EndQuarantine lets one
// rejoin (its fence floor raised from the others first), the service
// grants again, and the end is logged with who did it.
func TestMajorityRestartEndQuarantine(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	c := newCluster(t, 3, Options{HealthInterval: 5 * time.Millisecond, Quarantine: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := context.Background()
	before, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"r"}, TTL: time.Minute})
	if err != nil || before == nil {
		t.Fatalf("lock: %v %v", before, err)
	}
	// Together: the health loop (every 5 ms) must not see master 0
	// restarted while master 1 still has its data, which would size
	// master 0's quarantine from it.
	restartTogether(c.nodes[0], c.nodes[1])
	if !eventually(5*time.Second, func() bool {
		st := c.eng.nodeStatus()
		return strings.Contains(st[0].Why, "cannot be sized") && strings.Contains(st[1].Why, "cannot be sized")
	}) {
		t.Fatalf("status does not say why: %+v", c.eng.nodeStatus())
	}
	// Many health ticks (5 ms each) try to size it again.
	ticks := c.nodes[2].calls("lease_left")
	if !eventually(5*time.Second, func() bool { return c.nodes[2].calls("lease_left") >= ticks+20 }) {
		t.Fatal("the health loop stopped trying to size the quarantine")
	}
	if n := logs.count("cannot size the quarantine"); n != 2 {
		t.Fatalf("%d log lines about sizing the quarantine, want one per restarted master", n)
	}
	for i, st := range c.eng.nodeStatus()[:2] {
		if st.State != StateQuarantined || st.QuarantineLeft < 59*time.Minute {
			t.Fatalf("master %d: %+v, want quarantined for about an hour", i, st)
		}
	}
	var qe *QuorumError
	if l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"other"}, TTL: time.Second}); l != nil || !errors.As(err, &qe) {
		t.Fatalf("lock during the quarantine: %v %v, want NOQUORUM", l, err)
	}

	if _, err := c.eng.endQuarantine(ctx, 2, "tester"); !errors.Is(err, ErrNotQuarantined) {
		t.Fatalf("ending the quarantine of a master that kept its data: %v", err)
	}
	st, err := c.eng.endQuarantine(ctx, 0, "tester")
	if err != nil || st.State == StateQuarantined || st.Why != "" {
		t.Fatalf("end quarantine: %+v %v", st, err)
	}
	if n := logs.count("QUARANTINE ENDED BY AN OPERATOR"); n != 1 || logs.count("by=tester") != 1 {
		t.Fatalf("the end is not logged once with who did it (%d lines)", n)
	}
	if st := c.eng.nodeStatus()[1]; st.State != StateQuarantined {
		t.Fatalf("master 1 left its quarantine too: %+v", st)
	}
	// Another resource than the refused try's: that try's rollback may
	// still be on its way (the fakes do not keep a master's requests in
	// order), and its key would refuse this lock.
	l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"after"}, TTL: time.Second})
	if err != nil || l == nil {
		t.Fatalf("lock after the quarantine ended: %v %v", l, err)
	}
	if l.Fences[0] <= before.Fences[0] {
		t.Fatalf("fence %d after %d: the floor was not raised", l.Fences[0], before.Fences[0])
	}
}

// TestMasterByName: a master is named by its index in the configuration
// or its address, nothing else.
func TestMasterByName(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	for _, tc := range []struct {
		name string
		want int
		ok   bool
	}{{"0", 0, true}, {"2", 2, true}, {c.nodes[1].Addr(), 1, true}, {"3", 0, false}, {"-1", 0, false}, {"01", 0, false}, {"", 0, false}, {"m9", 0, false}} {
		i, err := c.eng.master(tc.name)
		if tc.ok != (err == nil) || (tc.ok && i != tc.want) || (!tc.ok && !errors.Is(err, ErrNoSuchMaster)) {
			t.Errorf("Master(%q) = %d %v", tc.name, i, err)
		}
	}
}

// TestMaxGrantedTTL: the longest ttl granted or extended, across
// primitives; a refused request does not count.
func TestMaxGrantedTTL(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	if d := c.eng.maxGrantedTTL(); d != 0 {
		t.Fatalf("before any grant: %v", d)
	}
	l, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: 2 * time.Second})
	if err != nil || l == nil {
		t.Fatal(err)
	}
	if l2, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"a"}, TTL: time.Hour}); l2 != nil || err != nil {
		t.Fatalf("second lock: %v %v", l2, err)
	}
	if d := c.eng.maxGrantedTTL(); d != 2*time.Second {
		t.Fatalf("after a grant of 2s and a refusal: %v", d)
	}
	if v, err := c.eng.extend(ctx, &Lease{Primitive: Lock, Resources: []string{"a"}, Token: l.Token}, 5*time.Second, false); v <= 0 || err != nil {
		t.Fatalf("extend: %v %v", v, err)
	}
	if _, err := c.eng.lockAcquire(ctx, Request{Resources: []string{"b"}, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := c.eng.maxGrantedTTL(); d != 5*time.Second {
		t.Fatalf("after an extension to 5s: %v", d)
	}
}
