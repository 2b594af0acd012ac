package quorum

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestAlarms: alarms run at their times, in the order of their times (then
// the order they were set), never when cancelled, and the one timer is
// re-armed for what is left after each firing.
func TestAlarms(t *testing.T) {
	t.Parallel()
	type set struct {
		name   string
		at     time.Duration // from the start
		cancel bool
	}
	cases := []struct {
		name  string
		sets  []set
		steps []time.Duration // clock advances
		want  [][]string      // what has run after each step
	}{
		{
			name:  "in order of time",
			sets:  []set{{"c", 30 * time.Millisecond, false}, {"a", 10 * time.Millisecond, false}, {"b", 20 * time.Millisecond, false}},
			steps: []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond},
			want:  [][]string{nil, {"a"}, {"a", "b", "c"}},
		},
		{
			name:  "same time: order set",
			sets:  []set{{"x", 10 * time.Millisecond, false}, {"y", 10 * time.Millisecond, false}},
			steps: []time.Duration{10 * time.Millisecond},
			want:  [][]string{{"x", "y"}},
		},
		{
			name:  "cancelled never run, the next still does",
			sets:  []set{{"a", 10 * time.Millisecond, true}, {"b", 40 * time.Millisecond, false}},
			steps: []time.Duration{20 * time.Millisecond, 20 * time.Millisecond},
			want:  [][]string{nil, {"b"}},
		},
		{
			name:  "all cancelled",
			sets:  []set{{"a", 10 * time.Millisecond, true}, {"b", 10 * time.Millisecond, true}},
			steps: []time.Duration{time.Second},
			want:  [][]string{nil},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newTestClock()
			a := newAlarms(clk)
			var mu sync.Mutex
			var ran []string
			runs := make(chan struct{}, len(tc.sets))
			start := clk.Now()
			for _, s := range tc.sets {
				al := a.set(start.Add(s.at), func() {
					mu.Lock()
					ran = append(ran, s.name)
					mu.Unlock()
					runs <- struct{}{}
				})
				if s.cancel {
					a.cancel(al)
					a.cancel(al) // twice is fine
				}
			}
			for k, d := range tc.steps {
				clk.Advance(d)
				// The test clock runs AfterFunc's function on a goroutine:
				// wait for the alarms this step should have run.
				mu.Lock()
				had := len(ran)
				mu.Unlock()
				for range len(tc.want[k]) - had {
					select {
					case <-runs:
					case <-time.After(5 * time.Second):
						t.Fatalf("step %d: alarms did not run: %v", k, ran)
					}
				}
				mu.Lock()
				got := slices.Clone(ran)
				mu.Unlock()
				if !slices.Equal(got, tc.want[k]) {
					t.Fatalf("step %d: ran %v, want %v", k, got, tc.want[k])
				}
			}
			a.mu.Lock()
			left := len(a.q)
			a.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d alarms left queued", left)
			}
		})
	}
}

// TestAlarmInThePast: an alarm set for a time that has passed runs at
// once.
func TestAlarmInThePast(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	a := newAlarms(clk)
	done := make(chan struct{})
	a.set(clk.Now().Add(-time.Millisecond), func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an alarm in the past did not run")
	}
}
