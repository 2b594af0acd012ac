package quorum

import (
	"testing"
	"time"
)

// recordingRelay records what New attaches.
type recordingRelay struct {
	calls   int
	nodes   []Node
	quorum  int
	prefix  string
	timeout time.Duration
}

func (r *recordingRelay) Attach(nodes []Node, quorum int, metaPrefix string, timeout time.Duration) {
	r.calls++
	r.nodes, r.quorum, r.prefix, r.timeout = nodes, quorum, metaPrefix, timeout
}

// TestNewAttachesBus: New hands Options.Relay (the pub/sub bus) the
// masters once, with the quorum and the defaults applied.
func TestNewAttachesBus(t *testing.T) {
	t.Parallel()
	nodes := []Node{newFake(t, "m0", nil), newFake(t, "m1", nil), newFake(t, "m2", nil), newFake(t, "m3", nil), newFake(t, "m4", nil)}
	r := &recordingRelay{}
	eng, err := New(nodes, Options{Relay: r})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if r.calls != 1 || len(r.nodes) != 5 || r.nodes[4] != nodes[4] || r.quorum != 3 || r.prefix != "redlock-proxy:" || r.timeout != 50*time.Millisecond {
		t.Fatalf("Attach: %d calls, %d nodes, quorum %d, prefix %q, timeout %v; want 1, 5, 3, redlock-proxy:, 50ms", r.calls, len(r.nodes), r.quorum, r.prefix, r.timeout)
	}
	r2 := &recordingRelay{}
	eng2, err := New(nodes[:3], Options{Relay: r2, Quorum: 3, MetaPrefix: "m:", MasterTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer eng2.Close()
	if r2.calls != 1 || len(r2.nodes) != 3 || r2.quorum != 3 || r2.prefix != "m:" || r2.timeout != time.Second {
		t.Fatalf("Attach: %d calls, %d nodes, quorum %d, prefix %q, timeout %v; want 1, 3, 3, m:, 1s", r2.calls, len(r2.nodes), r2.quorum, r2.prefix, r2.timeout)
	}
}
