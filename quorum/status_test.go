package quorum

import (
	"context"
	"testing"
	"time"
)

// TestLastErrorClearedWhenBackUp: a master that fails shows the failure
// in its status while it is down, and none once it answers again (INFO
// masters must not show a healthy master's old error). pingAll records
// every master's answer before it returns.
func TestLastErrorClearedWhenBackUp(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, Options{})
	ctx := context.Background()
	c.nodes[0].setDown(true)
	c.eng.pingAll(ctx, time.Second)
	st := c.eng.nodeStatus()[0]
	if st.State != StateDown || st.LastError == "" || st.LastErrorAt.IsZero() {
		t.Fatalf("a master that failed: %+v", st)
	}
	c.nodes[0].setDown(false)
	c.eng.pingAll(ctx, time.Second)
	st = c.eng.nodeStatus()[0]
	if st.State != StateUp || st.LastError != "" || !st.LastErrorAt.IsZero() {
		t.Fatalf("a master back up: %+v", st)
	}
}
