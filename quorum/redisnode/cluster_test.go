package redisnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestClusterRejoinKeepsProgress: a raise of fence floors that fails
// part-way (a timeout under load, a master that stops answering) still
// lets the slots it raised vote again, and the next pass raises only the
// rest, the slots requests asked for first: a loaded proxy whose raises
// time out now and then still brings the whole shard back.
func TestClusterRejoinKeepsProgress(t *testing.T) {
	redistest.RequireReal(t, "cluster masters are real Redis Clusters")
	cl := redistest.StartCluster(t, 3, 0)
	c, err := NewCluster(ClusterOptions{Seeds: cl.Seeds(), RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := c.anyShard(c.table.Load())
	if s == nil {
		t.Fatal("no shard serves a slot")
	}
	slots := c.slotsOf(s)
	// No quarantine (ClusterOptions.Quarantine 0): the slots are out
	// until their floors are raised, by the test's calls to rejoin (the
	// rejoin loop waits for RefreshInterval, an hour).
	s.mu.Lock()
	c.quarantine(s, "test", slots)
	s.mu.Unlock()

	// The test calls rejoin itself, as the rejoin loop would (it waits
	// for RefreshInterval, an hour, or a kick, which nothing here sends).
	budget := rejoinChunk + rejoinChunk/2 // then every slot fails
	var asked [][]int
	raise := func(ctx context.Context, ss []int, raised func(int)) error {
		asked = append(asked, append([]int(nil), ss...))
		for _, slot := range ss {
			if budget == 0 {
				return errors.New("slot timed out")
			}
			budget--
			raised(slot)
		}
		return nil
	}
	c.AttachFloors(raise)
	outSlots := func() (n int) {
		for _, slot := range slots {
			if c.out(slot) {
				n++
			}
		}
		return n
	}
	// A chunk, half of the next (cut short), then a chunk that raises
	// nothing ends the pass.
	c.rejoin()
	left := len(slots) - rejoinChunk - rejoinChunk/2
	if got := outSlots(); got != left {
		t.Fatalf("after a pass cut short: %d of %d slots out, want %d", got, len(slots), left)
	}
	if len(asked) != 3 {
		t.Fatalf("%d raises in the pass, want 3 (the last raising nothing)", len(asked))
	}
	for _, slot := range append(asked[0], asked[1][:rejoinChunk/2]...) {
		if c.out(slot) {
			t.Fatalf("slot %d was raised and is still out", slot)
		}
	}
	// A slot a request asked for (sendTo marks it, see want) goes first
	// in the next pass, which raises only the slots still out.
	last := slots[len(slots)-1]
	if !c.out(last) {
		t.Fatalf("slot %d is not out", last)
	}
	c.q[last].wanted.Store(true)
	budget, asked = len(slots), nil
	c.rejoin()
	if len(asked) == 0 || asked[0][0] != last {
		t.Fatalf("the slot asked for was not raised first: the first raise was %v", asked[:min(1, len(asked))])
	}
	n := 0
	for _, a := range asked {
		n += len(a)
	}
	if n != left {
		t.Fatalf("the second pass raised %d slots, want the %d still out", n, left)
	}
	if got := outSlots(); got != 0 {
		t.Fatalf("%d slots still out after a full pass", got)
	}
}
