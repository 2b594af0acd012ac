package scripts

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// slotOfTest puts a key in the slot named by its last letter, or by its
// hash tag ("{s}" for the per-slot keys), so that the tests choose slots.
func slotOfTest(k string) int {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		return int(k[i+1] - 'a')
	}
	return int(k[len(k)-1] - 'a')
}

func retagTest(k string, slot int) string {
	i := strings.IndexByte(k, '{')
	return k[:i+1] + string(rune('a'+slot)) + k[i+2:]
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name       string
		s          *Script
		keys, args []string
		want       []Part
		err        error
	}{{
		name: "one slot is one part",
		s:    LockAcquire,
		keys: []string{"xb", "yb", "fb", "gb", "m:{b}lag", "m:{b}seq", "m:{b}lease"},
		args: []string{"tok", "1000", "5", "1000"},
		want: []Part{{Slot: 1, Items: []int{0, 1},
			Keys: []string{"xb", "yb", "fb", "gb", "m:{b}lag", "m:{b}seq", "m:{b}lease"},
			Args: []string{"tok", "1000", "5", "1000"}}},
	}, {
		name: "lock_acquire over two slots: ascending slot, per-slot keys retagged",
		s:    LockAcquire,
		keys: []string{"xc", "ya", "zc", "fc", "ga", "hc", "m:{c}lag", "m:{c}seq", "m:{c}lease"},
		args: []string{"tok", "1000", "5", "1000"},
		want: []Part{
			{Slot: 0, Items: []int{1}, Keys: []string{"ya", "ga", "m:{a}lag", "m:{a}seq", "m:{a}lease"}, Args: []string{"tok", "1000", "5", "1000"}},
			{Slot: 2, Items: []int{0, 2}, Keys: []string{"xc", "zc", "fc", "hc", "m:{c}lag", "m:{c}seq", "m:{c}lease"}, Args: []string{"tok", "1000", "5", "1000"}},
		},
	}, {
		name: "lock_release with its channels",
		s:    LockRelease,
		keys: []string{"xb", "ya", "fb", "fa", "rb", "ra", "hb", "ha"},
		args: []string{"tok", "cx", "cy"},
		want: []Part{
			{Slot: 0, Items: []int{1}, Keys: []string{"ya", "fa", "ra", "ha"}, Args: []string{"tok", "cy"}},
			{Slot: 1, Items: []int{0}, Keys: []string{"xb", "fb", "rb", "hb"}, Args: []string{"tok", "cx"}},
		},
	}, {
		name: "lock_release without channels (a rollback)",
		s:    LockRelease,
		keys: []string{"xb", "ya", "fb", "fa", "rb", "ra", "hb", "ha"},
		args: []string{"tok"},
		want: []Part{
			{Slot: 0, Items: []int{1}, Keys: []string{"ya", "fa", "ra", "ha"}, Args: []string{"tok"}},
			{Slot: 1, Items: []int{0}, Keys: []string{"xb", "fb", "rb", "hb"}, Args: []string{"tok"}},
		},
	}, {
		name: "wait_mark: each waiting set is a resource",
		s:    WaitMark,
		keys: []string{"wb", "wa", "vb"},
		args: []string{"id", "100"},
		want: []Part{
			{Slot: 0, Items: []int{1}, Keys: []string{"wa"}, Args: []string{"id", "100"}},
			{Slot: 1, Items: []int{0, 2}, Keys: []string{"wb", "vb"}, Args: []string{"id", "100"}},
		},
	}, {
		name: "a script that cannot be split",
		s:    LockAcquireFair,
		keys: []string{"xb", "ya", "fb", "fa", "m:{b}lag", "m:{b}seq", "m:{b}lease", "mb", "ma", "nb", "na", "ob", "oa", "qb", "db"},
		args: []string{"tok", "1000", "5", "1000", "0", "id", "1000", "0", "id"},
		err:  ErrNoSplit,
	}, {
		name: "one resource with a key elsewhere is left as it is",
		s:    LockRelease,
		keys: []string{"xb", "fb", "rb", "hb", "qa"},
		args: []string{"tok", "cx"},
		want: []Part{{Slot: 1, Items: []int{0}, Keys: []string{"xb", "fb", "rb", "hb", "qa"}, Args: []string{"tok", "cx"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.s.Split(tt.keys, tt.args, slotOfTest, retagTest)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parts:\n got %+v\nwant %+v", got, tt.want)
			}
			for _, p := range got {
				if err := tt.s.Check(p.Keys, p.Args); err != nil {
					t.Errorf("part %+v: %v", p, err)
				}
			}
		})
	}
}

func TestCombine(t *testing.T) {
	parts := []Part{{Slot: 0, Items: []int{1}}, {Slot: 2, Items: []int{0, 2}}}
	tests := []struct {
		name    string
		s       *Script
		answers []any
		want    any
	}{
		{"granted: fences back in resource order, highest sequence", LockAcquire,
			[]any{[]any{int64(1), int64(7), int64(5)}, []any{int64(1), int64(9), int64(8), int64(9)}},
			[]any{int64(1), int64(9), int64(8), int64(5), int64(9)}},
		{"refused by every part", LockAcquire,
			[]any{[]any{int64(0), int64(7)}, []any{int64(0), int64(9)}}, []any{int64(0), int64(9)}},
		{"refused by the first part: the second holds the token", LockAcquire,
			[]any{[]any{int64(0), int64(7)}, []any{int64(1), int64(9), int64(8), int64(9)}}, []any{int64(0), int64(9), int64(1)}},
		{"refused by the second part", LockAcquire,
			[]any{[]any{int64(1), int64(7), int64(5)}, []any{int64(0), int64(3)}}, []any{int64(0), int64(7), int64(1)}},
		{"release: counts add up, longest left", LockRelease,
			[]any{[]any{int64(1), int64(500)}, []any{int64(2), int64(900)}}, []any{int64(3), int64(900)}},
		{"release: counts add up, latest expiry", LockRelease,
			[]any{[]any{int64(1), int64(0), int64(1500)}, []any{int64(2), int64(0), int64(1900)}}, []any{int64(3), int64(0), int64(1900)}},
		{"extend: sum", LockExtend, []any{int64(1), int64(1)}, int64(2)},
		{"fence write-back: all", LockFence, []any{int64(1), int64(0)}, int64(0)},
		{"delete: per resource", LockDelete,
			[]any{[]any{int64(1)}, []any{int64(0), int64(1)}}, []any{int64(0), int64(1), int64(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.s.Combine(parts, 3, tt.answers)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := LockAcquire.Combine(parts, 3, []any{"nonsense"}); err == nil {
		t.Error("a malformed answer combined without error")
	}
}
