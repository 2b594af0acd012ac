package scripts

import (
	"errors"
	"reflect"
	"testing"
)

// TestLockAcquirePlain checks the plain acquire's commands and what each
// set of replies leads to. (What the commands do on a master, and the
// fence and restart guarantees they keep, the engine's tests and the
// simulation check, on embedded masters that run the plain form.)
func TestLockAcquirePlain(t *testing.T) {
	keys := []string{"r", "redlock-proxy:fence:r", "redlock-proxy:fence-lag", "redlock-proxy:fence-hwm", "redlock-proxy:lease-hwm"}
	args := []string{"tok", "8000", "12", "5000"}
	st := LockAcquire.Plain(keys, args)
	if st == nil {
		t.Fatal("no plain form for one resource")
	}
	want := [][]string{
		{"SET", "r", "tok", "NX", "PX", "8000", "GET"},
		{"INCR", "redlock-proxy:fence-hwm"},
		{"PTTL", "redlock-proxy:lease-hwm"},
	}
	if !reflect.DeepEqual(st.Commands, want) {
		t.Fatalf("commands %q, want %q", st.Commands, want)
	}
	wrongType := errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")
	raise := [][]string{
		{"SET", "redlock-proxy:lease-hwm", "1", "NX", "PX", "9000"},
		{"PEXPIRE", "redlock-proxy:lease-hwm", "9000", "GT"},
	}
	for _, tc := range []struct {
		name    string
		replies []any
		reply   any
		err     bool
		next    [][]string
		lua     bool
	}{
		{"free, mark lives long enough", []any{nil, int64(7), int64(8000)}, []any{int64(1), int64(7), int64(7)}, false, nil, false},
		{"free, mark too short", []any{nil, int64(7), int64(7999)}, nil, false, raise, false},
		{"free, no mark", []any{nil, int64(7), int64(-2)}, nil, false, raise, false},
		{"taken by another token", []any{"other", int64(9), int64(8000)}, []any{int64(0), int64(9)}, false, nil, false},
		{"held by readers", []any{"", int64(9), int64(8000)}, []any{int64(0), int64(9)}, false, nil, false},
		{"held by the token", []any{"tok", int64(9), int64(8000)}, nil, false, nil, true},
		{"not a string", []any{wrongType, int64(9), int64(8000)}, nil, true, nil, false},
		{"sequence not a number", []any{nil, errors.New("ERR value is not an integer or out of range"), int64(8000)}, nil, true, nil, false},
		{"garbled", []any{nil, "7", int64(8000)}, nil, true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := st.Then(tc.replies)
			if (o.Err != nil) != tc.err || o.Lua != tc.lua || !reflect.DeepEqual(o.Reply, tc.reply) {
				t.Fatalf("outcome %+v", o)
			}
			if tc.next == nil {
				if o.Next != nil {
					t.Fatalf("unexpected next step %q", o.Next.Commands)
				}
				return
			}
			if o.Next == nil || !reflect.DeepEqual(o.Next.Commands, tc.next) {
				t.Fatalf("next step %+v, want %q", o.Next, tc.next)
			}
			if got := o.Next.Then([]any{nil, int64(1)}); !reflect.DeepEqual(got.Reply, []any{int64(1), int64(7), int64(7)}) || got.Err != nil {
				t.Fatalf("after the raise: %+v", got)
			}
			if got := o.Next.Then([]any{wrongType, int64(0)}); got.Err == nil {
				t.Fatalf("a failed raise grants: %+v", got)
			}
		})
	}
	for _, tc := range []struct {
		name       string
		keys, args []string
	}{
		{"two resources", []string{"a", "b", "fa", "fb", "lag", "seq", "lease"}, args},
		{"slotted layout", []string{"r", "f", "redlock-proxy:{x}:fence-lag", "redlock-proxy:{x}:fence-hwm", "redlock-proxy:{x}:lease-hwm"}, args},
		{"bad ttl", keys, []string{"tok", "0", "12", "5000"}},
	} {
		if LockAcquire.Plain(tc.keys, tc.args) != nil {
			t.Errorf("%s: a plain form", tc.name)
		}
	}
	if LockRelease.Plain([]string{"r", "w", "rd", "h"}, []string{"tok"}) != nil {
		t.Error("lock_release has a plain form")
	}
}
