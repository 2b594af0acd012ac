package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Scripted answers the rows share. Leases are valid 10 s from when the
// fake returns them (see matches: "V").
var (
	noQuorum     = &quorum.QuorumError{Op: "lock", Got: 1, Need: 2, Total: 3, Errs: []error{context.DeadlineExceeded}}
	noQuorumText = "-NOQUORUM 1 of 3 masters answered, 2 needed"
	granted      = answer{v: &quorum.Lease{Resources: []string{"r"}, Token: "tok", Fences: []uint64{7}, Validity: 10 * time.Second}}
	grantedMulti = answer{v: &quorum.Lease{Resources: []string{"a", "b"}, Token: "tok", Fences: []uint64{7, 8}, Validity: 10 * time.Second}}
	// lapsed is a grant whose validity ended before its reply was written.
	lapsed      = answer{v: &quorum.Lease{Resources: []string{"r"}, Token: "tok", Fences: []uint64{7}, Validity: 0}}
	semGranted  = answer{v: &quorum.Lease{Resources: []string{"s"}, Token: "tok", Count: 2, Slots: []int{0, 1}, Validity: 10 * time.Second}}
	semLapsed   = answer{v: &quorum.Lease{Resources: []string{"s"}, Token: "tok", Count: 1, Slots: []int{0}, Validity: 0}}
	valid10s    = answer{v: 10 * time.Second}
	yes         = answer{v: true}
	no          = answer{v: false}
	failNoQuo   = answer{err: noQuorum}
	canceled    = answer{err: fmt.Errorf("lock r: %w", context.Canceled)}
	badRequest  = answer{err: fmt.Errorf("%w: no resources", quorum.ErrBadRequest)}
	reserved    = answer{err: fmt.Errorf("lock: %w", quorum.ErrReservedResource)}
	unknownErr  = answer{err: errors.New("engine exploded")}
	noLatch     = answer{err: fmt.Errorf("latch l: %w", quorum.ErrNoLatch)}
	heldByTok   = answer{v: &quorum.Info{Held: true, Holder: "tok", TTL: 5 * time.Second, Fence: 7, Holds: 1}}
	heldReaders = answer{v: &quorum.Info{Held: true, Readers: []string{"tok", "other"}, TTL: 4 * time.Second}}
	notHeld     = answer{v: &quorum.Info{}}
)

// grantOf is a grant of resources with token tok, fences from 7.
func grantOf(resources ...string) answer {
	l := &quorum.Lease{Resources: resources, Token: "tok", Validity: 10 * time.Second}
	for i := range resources {
		l.Fences = append(l.Fences, uint64(7+i))
	}
	return answer{v: l}
}

// row is one command run on a fresh harness: the engine scripted with on,
// the commands pre run first (their replies not checked), then cmd, whose
// reply must be want on a RESP2 connection and want3 on a RESP3 one (want
// when empty). calls are exactly the engine calls all of them made (none
// for bad input: it never reaches the engine).
type row struct {
	name   string
	dropin bool
	on     map[string][]answer
	pre    [][]string
	cmd    []string
	want   string
	want3  string
	calls  []string
}

func cmd(s ...string) []string { return s }

// acquire is the engine call of an acquire of primitive p.
func acquire(p quorum.Primitive, resources []string, ttl, wait time.Duration, token string) string {
	return "Acquire " + req(quorum.Request{Primitive: p, Resources: resources, TTL: ttl, Wait: wait, Token: token})
}

const (
	ms  = time.Millisecond
	sec = time.Second
)

// runRows runs each row on RESP2 and RESP3, each on its own harness.
func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", r.name, proto), func(t *testing.T) {
				eng := newFakeEngine()
				for m, as := range r.on {
					eng.on(m, as...)
				}
				lim := harnessLimits
				lim.DropIn = r.dropin
				h := newHarness(t, eng, lim)
				c := h.dial(t, proto)
				for _, p := range r.pre {
					c.do(p...)
				}
				got := c.do(r.cmd...)
				want := r.want
				if proto == 3 && r.want3 != "" {
					want = r.want3
				}
				if !matches(got, want) {
					t.Errorf("%q answered\n  %q, want\n  %q", r.cmd, got, want)
				}
				if calls := eng.Calls(); !slices.Equal(calls, r.calls) {
					t.Errorf("%q: engine calls\n  %q, want\n  %q", r.cmd, calls, r.calls)
				}
			})
		}
	}
}

// TestLockCommandReplies: RLOCK, RFAIRLOCK, RLOCKINFO, RUNLOCK and REXTEND
// answer what PROTOCOL.md promises for each outcome the engine can give,
// and refuse bad input in Redis's wording before it reaches the engine.
func TestLockCommandReplies(t *testing.T) {
	rlock := acquire(quorum.Lock, []string{"r"}, sec, 0, "")
	runRows(t, []row{
		// RLOCK
		{name: "rlock granted", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RLOCK", "r", "1000"),
			want: "*3 $3 tok :V :7", calls: []string{rlock}},
		{name: "rlock options", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("rlock", "r", "1000", "token", "t", "WAIT", "250"),
			want: "*3 $3 tok :V :7", calls: []string{acquire(quorum.Lock, []string{"r"}, sec, 250*ms, "t")}},
		{name: "rlock autoextend", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RLOCK", "r", "60000", "AUTOEXTEND"),
			want: "*3 $3 tok :V :7", calls: []string{acquire(quorum.Lock, []string{"r"}, time.Minute, 0, "")}},
		{name: "rlock held", cmd: cmd("RLOCK", "r", "1000"), want: "$-1", want3: "_", calls: []string{rlock}},
		{name: "rlock no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RLOCK", "r", "1000"), want: noQuorumText, calls: []string{rlock}},
		{name: "rlock validity lapsed", on: map[string][]answer{"Acquire": {lapsed}}, cmd: cmd("RLOCK", "r", "1000"),
			want: "$-1", want3: "_", calls: []string{rlock, `Abandon lock ["r"] tok`}},
		{name: "rlock reserved", on: map[string][]answer{"Acquire": {reserved}}, cmd: cmd("RLOCK", "r", "1000"), want: "-ERR resource name is reserved", calls: []string{rlock}},
		{name: "rlock bad request", on: map[string][]answer{"Acquire": {badRequest}}, cmd: cmd("RLOCK", "r", "1000"), want: "-ERR syntax error", calls: []string{rlock}},
		{name: "rlock canceled", on: map[string][]answer{"Acquire": {canceled}}, cmd: cmd("RLOCK", "r", "1000"), want: "-ERR wait canceled: server shutting down", calls: []string{rlock}},
		{name: "rlock unknown error", on: map[string][]answer{"Acquire": {unknownErr}}, cmd: cmd("RLOCK", "r", "1000"), want: "-ERR internal error", calls: []string{rlock}},
		{name: "rlock arity", cmd: cmd("RLOCK", "r"), want: "-ERR wrong number of arguments for 'rlock' command"},
		{name: "rlock ttl not a number", cmd: cmd("RLOCK", "r", "1s"), want: "-ERR value is not an integer or out of range"},
		{name: "rlock ttl zero", cmd: cmd("RLOCK", "r", "0"), want: "-ERR invalid expire time in 'rlock' command"},
		{name: "rlock ttl over max", cmd: cmd("RLOCK", "r", "3600001"), want: "-ERR invalid expire time in 'rlock' command (limits.max_ttl is 1h0m0s)"},
		{name: "rlock empty resource", cmd: cmd("RLOCK", "", "1000"), want: "-ERR resource name must not be empty"},
		{name: "rlock wait missing", cmd: cmd("RLOCK", "r", "1000", "WAIT"), want: "-ERR syntax error"},
		{name: "rlock wait negative", cmd: cmd("RLOCK", "r", "1000", "WAIT", "-1"), want: "-ERR timeout is negative"},
		{name: "rlock wait over max", cmd: cmd("RLOCK", "r", "1000", "WAIT", "300001"), want: "-ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{name: "rlock token too long", cmd: cmd("RLOCK", "r", "1000", "TOKEN", strings.Repeat("x", 129)), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rlock token twice", cmd: cmd("RLOCK", "r", "1000", "TOKEN", "a", "TOKEN", "a"), want: "-ERR syntax error"},
		{name: "rlock unknown option", cmd: cmd("RLOCK", "r", "1000", "NX"), want: "-ERR syntax error"},
		{name: "rlock too many autoextend", on: map[string][]answer{"Acquire": {grantOf("a"), grantOf("b")}},
			pre: [][]string{{"RLOCK", "a", "60000", "AUTOEXTEND"}, {"RLOCK", "b", "60000", "AUTOEXTEND"}},
			cmd: cmd("RLOCK", "c", "60000", "AUTOEXTEND"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.Lock, []string{"a"}, time.Minute, 0, ""), acquire(quorum.Lock, []string{"b"}, time.Minute, 0, "")}},

		// RFAIRLOCK
		{name: "rfairlock granted", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RFAIRLOCK", "r", "1000", "WAIT", "10"),
			want: "*3 $3 tok :V :7", calls: []string{acquire(quorum.Fair, []string{"r"}, sec, 10*ms, "")}},
		{name: "rfairlock held", cmd: cmd("RFAIRLOCK", "r", "1000"), want: "$-1", want3: "_", calls: []string{acquire(quorum.Fair, []string{"r"}, sec, 0, "")}},
		{name: "rfairlock no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RFAIRLOCK", "r", "1000"), want: noQuorumText,
			calls: []string{acquire(quorum.Fair, []string{"r"}, sec, 0, "")}},
		{name: "rfairlock validity lapsed", on: map[string][]answer{"Acquire": {lapsed}}, cmd: cmd("RFAIRLOCK", "r", "1000"), want: "$-1", want3: "_",
			calls: []string{acquire(quorum.Fair, []string{"r"}, sec, 0, ""), `Abandon fair ["r"] tok`}},
		{name: "rfairlock bad ttl", cmd: cmd("RFAIRLOCK", "r", "-5"), want: "-ERR invalid expire time in 'rfairlock' command"},
		{name: "rfairlock too many autoextend", on: map[string][]answer{"Acquire": {grantOf("a"), grantOf("b")}},
			pre: [][]string{{"RLOCK", "a", "60000", "AUTOEXTEND"}, {"RLOCK", "b", "60000", "AUTOEXTEND"}},
			cmd: cmd("RFAIRLOCK", "c", "60000", "AUTOEXTEND"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.Lock, []string{"a"}, time.Minute, 0, ""), acquire(quorum.Lock, []string{"b"}, time.Minute, 0, "")}},

		// REENTRANT
		{name: "rlock reentrant", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RLOCK", "r", "60000", "TOKEN", "tok", "REENTRANT"),
			want: "*3 $3 tok :V :7", calls: []string{acquire(quorum.Lock, []string{"r"}, time.Minute, 0, "tok") + " reentrant"}},
		{name: "rlock reentrant too many holds", on: map[string][]answer{"Acquire": {{err: quorum.ErrTooManyHolds}}}, cmd: cmd("rlock", "r", "60000", "reentrant", "token", "tok"),
			want: "-ERR too many re-entrant holds of the lock", calls: []string{acquire(quorum.Lock, []string{"r"}, time.Minute, 0, "tok") + " reentrant"}},
		{name: "rlock reentrant without token", cmd: cmd("RLOCK", "r", "60000", "REENTRANT"), want: "-ERR REENTRANT needs TOKEN"},
		{name: "rlock reentrant autoextend", cmd: cmd("RLOCK", "r", "60000", "TOKEN", "t", "REENTRANT", "AUTOEXTEND"), want: "-ERR REENTRANT and AUTOEXTEND cannot be combined"},
		{name: "rlock reentrant twice", cmd: cmd("RLOCK", "r", "60000", "TOKEN", "t", "REENTRANT", "REENTRANT"), want: "-ERR syntax error"},
		{name: "rfairlock reentrant", cmd: cmd("RFAIRLOCK", "r", "60000", "TOKEN", "t", "REENTRANT"), want: "-ERR syntax error"},
		{name: "rmultilock reentrant", cmd: cmd("RMULTILOCK", "60000", "1", "r", "TOKEN", "t", "REENTRANT"), want: "-ERR syntax error"},
		{name: "rrlock reentrant", cmd: cmd("RRLOCK", "r", "60000", "TOKEN", "t", "REENTRANT"), want: "-ERR syntax error"},
		{name: "rlockinfo holds", on: map[string][]answer{"Info": {{v: &quorum.Info{Held: true, Holder: "tok", TTL: 5 * time.Second, Fence: 7, Holds: 3}}}}, cmd: cmd("RLOCKINFO", "r"),
			want:  "*10 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :3 $7 waiters :0",
			want3: "%5 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :3 $7 waiters :0", calls: []string{"Info lock r", `Waiters lock r ""`}},

		// RLOCKINFO
		{name: "rlockinfo held", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("RLOCKINFO", "r"),
			want:  "*10 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $7 waiters :0",
			want3: "%5 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $7 waiters :0", calls: []string{"Info lock r", `Waiters lock r ""`}},
		{name: "rlockinfo mine", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("RLOCKINFO", "r", "tok"),
			want:  "*16 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0",
			want3: "%8 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0", calls: []string{"Info lock r", `Waiters lock r "tok"`}},
		{name: "rlockinfo mine autoextended", on: map[string][]answer{"Acquire": {granted}, "Info": {heldByTok}},
			pre: [][]string{{"RLOCK", "r", "60000", "TOKEN", "tok", "AUTOEXTEND"}}, cmd: cmd("RLOCKINFO", "r", "tok"),
			want:  "*16 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :1 $7 waiters :0 $5 place :0",
			want3: "%8 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :1 $7 waiters :0 $5 place :0",
			calls: []string{acquire(quorum.Lock, []string{"r"}, time.Minute, 0, "tok"), "Info lock r", `Waiters lock r "tok"`}},
		{name: "rlockinfo not mine", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("RLOCKINFO", "r", "other"),
			want:  "*16 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :0 $10 autoextend :0 $7 waiters :0 $5 place :0",
			want3: "%8 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :0 $10 autoextend :0 $7 waiters :0 $5 place :0", calls: []string{"Info lock r", `Waiters lock r "other"`}},
		{name: "rlockinfo readers", on: map[string][]answer{"Info": {heldReaders}}, cmd: cmd("RLOCKINFO", "r", "tok"),
			want:  "*14 $4 held :1 $6 ttl_ms :4000 $7 readers :2 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0",
			want3: "%7 $4 held :1 $6 ttl_ms :4000 $7 readers :2 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0", calls: []string{"Info lock r", `Waiters lock r "tok"`}},
		{name: "rlockinfo not held", on: map[string][]answer{"Info": {notHeld}}, cmd: cmd("RLOCKINFO", "r"),
			want: "*6 $4 held :0 $6 ttl_ms :-1 $7 waiters :0", want3: "%3 $4 held :0 $6 ttl_ms :-1 $7 waiters :0", calls: []string{"Info lock r", `Waiters lock r ""`}},
		{name: "rlockinfo waiters and place", on: map[string][]answer{"Info": {notHeld}, "Waiters": {{v: [2]int{3, 2}}}}, cmd: cmd("RLOCKINFO", "r", "tok"),
			want:  "*12 $4 held :0 $6 ttl_ms :-1 $4 mine :0 $10 autoextend :0 $7 waiters :3 $5 place :2",
			want3: "%6 $4 held :0 $6 ttl_ms :-1 $4 mine :0 $10 autoextend :0 $7 waiters :3 $5 place :2", calls: []string{"Info lock r", `Waiters lock r "tok"`}},
		{name: "rlockinfo waiters no quorum", on: map[string][]answer{"Info": {heldByTok}, "Waiters": {failNoQuo}}, cmd: cmd("RLOCKINFO", "r"), want: noQuorumText,
			calls: []string{"Info lock r", `Waiters lock r ""`}},
		{name: "rlockinfo no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("RLOCKINFO", "r"), want: noQuorumText, calls: []string{"Info lock r"}},
		{name: "rlockinfo extra argument", cmd: cmd("RLOCKINFO", "r", "tok", "x"), want: "-ERR syntax error"},
		{name: "rlockinfo empty token", cmd: cmd("RLOCKINFO", "r", ""), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rlockinfo empty resource", cmd: cmd("RLOCKINFO", ""), want: "-ERR resource name must not be empty"},
		{name: "rlockinfo arity", cmd: cmd("RLOCKINFO"), want: "-ERR wrong number of arguments for 'rlockinfo' command"},

		// RUNLOCK
		{name: "runlock held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("RUNLOCK", "r", "tok"), want: ":1", calls: []string{`Release lock ["r"] tok`}},
		{name: "runlock not held", on: map[string][]answer{"Release": {no}}, cmd: cmd("RUNLOCK", "r", "tok"), want: ":0", calls: []string{`Release lock ["r"] tok`}},
		{name: "runlock no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("RUNLOCK", "r", "tok"), want: noQuorumText, calls: []string{`Release lock ["r"] tok`}},
		{name: "runlock arity", cmd: cmd("RUNLOCK", "r"), want: "-ERR wrong number of arguments for 'runlock' command"},
		{name: "runlock empty token", cmd: cmd("RUNLOCK", "r", ""), want: "-ERR token must be 1 to 128 bytes"},
		{name: "runlock empty resource", cmd: cmd("RUNLOCK", "", "tok"), want: "-ERR resource name must not be empty"},
		{name: "runlock stops the autoextension", on: map[string][]answer{"Acquire": {granted}, "Release": {yes}, "Info": {heldByTok}},
			pre: [][]string{{"RLOCK", "r", "60000", "TOKEN", "tok", "AUTOEXTEND"}, {"RUNLOCK", "r", "tok"}}, cmd: cmd("RLOCKINFO", "r", "tok"),
			want:  "*16 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0",
			want3: "%8 $4 held :1 $6 ttl_ms :5000 $5 fence :7 $5 holds :1 $4 mine :1 $10 autoextend :0 $7 waiters :0 $5 place :0",
			calls: []string{acquire(quorum.Lock, []string{"r"}, time.Minute, 0, "tok"), `Release lock ["r"] tok`, "Info lock r", `Waiters lock r "tok"`}},

		// REXTEND
		{name: "rextend extended", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("REXTEND", "r", "tok", "1000"), want: ":V", calls: []string{`Extend lock ["r"] tok 1s`}},
		{name: "rextend lost", cmd: cmd("REXTEND", "r", "tok", "1000"), want: "$-1", want3: "_", calls: []string{`Extend lock ["r"] tok 1s`}},
		{name: "rextend no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("REXTEND", "r", "tok", "1000"), want: noQuorumText, calls: []string{`Extend lock ["r"] tok 1s`}},
		{name: "rextend bad ttl", cmd: cmd("REXTEND", "r", "tok", "0"), want: "-ERR invalid expire time in 'rextend' command"},
		{name: "rextend ttl not a number", cmd: cmd("REXTEND", "r", "tok", "ten"), want: "-ERR value is not an integer or out of range"},
		{name: "rextend empty token", cmd: cmd("REXTEND", "r", "", "1000"), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rextend arity", cmd: cmd("REXTEND", "r", "tok"), want: "-ERR wrong number of arguments for 'rextend' command"},
	})
}

// TestMultiLockCommandReplies: RMULTILOCK, RMULTIUNLOCK and RMULTIEXTEND.
func TestMultiLockCommandReplies(t *testing.T) {
	multi := acquire(quorum.Lock, []string{"a", "b"}, sec, 0, "")
	runRows(t, []row{
		{name: "rmultilock granted", on: map[string][]answer{"Acquire": {grantedMulti}}, cmd: cmd("RMULTILOCK", "1000", "2", "a", "b"),
			want: "*3 $3 tok :V *2 :7 :8", calls: []string{multi}},
		{name: "rmultilock options", on: map[string][]answer{"Acquire": {grantedMulti}}, cmd: cmd("RMULTILOCK", "60000", "2", "a", "b", "WAIT", "5", "TOKEN", "t", "AUTOEXTEND"),
			want: "*3 $3 tok :V *2 :7 :8", calls: []string{acquire(quorum.Lock, []string{"a", "b"}, time.Minute, 5*ms, "t")}},
		{name: "rmultilock held", cmd: cmd("RMULTILOCK", "1000", "2", "a", "b"), want: "$-1", want3: "_", calls: []string{multi}},
		{name: "rmultilock no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RMULTILOCK", "1000", "2", "a", "b"), want: noQuorumText, calls: []string{multi}},
		{name: "rmultilock validity lapsed", on: map[string][]answer{"Acquire": {{v: &quorum.Lease{Resources: []string{"a", "b"}, Token: "tok", Fences: []uint64{7, 8}}}}},
			cmd: cmd("RMULTILOCK", "1000", "2", "a", "b"), want: "$-1", want3: "_", calls: []string{multi, `Abandon lock ["a" "b"] tok`}},
		{name: "rmultilock numkeys zero", cmd: cmd("RMULTILOCK", "1000", "0", "a"), want: "-ERR numkeys should be greater than 0"},
		{name: "rmultilock numkeys over", cmd: cmd("RMULTILOCK", "1000", "3", "a", "b"), want: "-ERR syntax error"},
		{name: "rmultilock numkeys not a number", cmd: cmd("RMULTILOCK", "1000", "x", "a"), want: "-ERR value is not an integer or out of range"},
		{name: "rmultilock empty resource", cmd: cmd("RMULTILOCK", "1000", "2", "a", ""), want: "-ERR resource name must not be empty"},
		{name: "rmultilock bad ttl", cmd: cmd("RMULTILOCK", "0", "1", "a"), want: "-ERR invalid expire time in 'rmultilock' command"},
		{name: "rmultilock bad option", cmd: cmd("RMULTILOCK", "1000", "1", "a", "b"), want: "-ERR syntax error"},
		{name: "rmultilock arity", cmd: cmd("RMULTILOCK", "1000", "1"), want: "-ERR wrong number of arguments for 'rmultilock' command"},
		{name: "rmultilock too many autoextend", on: map[string][]answer{"Acquire": {grantOf("a"), grantOf("b")}},
			pre: [][]string{{"RLOCK", "a", "60000", "AUTOEXTEND"}, {"RLOCK", "b", "60000", "AUTOEXTEND"}},
			cmd: cmd("RMULTILOCK", "60000", "1", "c", "AUTOEXTEND"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.Lock, []string{"a"}, time.Minute, 0, ""), acquire(quorum.Lock, []string{"b"}, time.Minute, 0, "")}},

		{name: "rmultiunlock held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("RMULTIUNLOCK", "tok", "a", "b"), want: ":1", calls: []string{`Release lock ["a" "b"] tok`}},
		{name: "rmultiunlock not held", on: map[string][]answer{"Release": {no}}, cmd: cmd("RMULTIUNLOCK", "tok", "a"), want: ":0", calls: []string{`Release lock ["a"] tok`}},
		{name: "rmultiunlock no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("RMULTIUNLOCK", "tok", "a"), want: noQuorumText, calls: []string{`Release lock ["a"] tok`}},
		{name: "rmultiunlock empty token", cmd: cmd("RMULTIUNLOCK", "", "a"), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rmultiunlock empty resource", cmd: cmd("RMULTIUNLOCK", "tok", "a", ""), want: "-ERR resource name must not be empty"},
		{name: "rmultiunlock arity", cmd: cmd("RMULTIUNLOCK", "tok"), want: "-ERR wrong number of arguments for 'rmultiunlock' command"},

		{name: "rmultiextend extended", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("RMULTIEXTEND", "tok", "1000", "a", "b"), want: ":V", calls: []string{`Extend lock ["a" "b"] tok 1s`}},
		{name: "rmultiextend lost", cmd: cmd("RMULTIEXTEND", "tok", "1000", "a"), want: "$-1", want3: "_", calls: []string{`Extend lock ["a"] tok 1s`}},
		{name: "rmultiextend no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("RMULTIEXTEND", "tok", "1000", "a"), want: noQuorumText, calls: []string{`Extend lock ["a"] tok 1s`}},
		{name: "rmultiextend bad ttl", cmd: cmd("RMULTIEXTEND", "tok", "0", "a"), want: "-ERR invalid expire time in 'rmultiextend' command"},
		{name: "rmultiextend empty token", cmd: cmd("RMULTIEXTEND", "", "10", "a"), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rmultiextend empty resource", cmd: cmd("RMULTIEXTEND", "tok", "10", ""), want: "-ERR resource name must not be empty"},
		{name: "rmultiextend arity", cmd: cmd("RMULTIEXTEND", "tok", "10"), want: "-ERR wrong number of arguments for 'rmultiextend' command"},
	})
}

// TestReadLockCommandReplies: RRLOCK, RRUNLOCK and RREXTEND.
func TestReadLockCommandReplies(t *testing.T) {
	rr := acquire(quorum.Read, []string{"r"}, sec, 0, "")
	runRows(t, []row{
		{name: "rrlock granted", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RRLOCK", "r", "1000"), want: "*2 $3 tok :V", calls: []string{rr}},
		{name: "rrlock options", on: map[string][]answer{"Acquire": {granted}}, cmd: cmd("RRLOCK", "r", "60000", "AUTOEXTEND", "WAIT", "7", "TOKEN", "t"),
			want: "*2 $3 tok :V", calls: []string{acquire(quorum.Read, []string{"r"}, time.Minute, 7*ms, "t")}},
		{name: "rrlock held", cmd: cmd("RRLOCK", "r", "1000"), want: "$-1", want3: "_", calls: []string{rr}},
		{name: "rrlock no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RRLOCK", "r", "1000"), want: noQuorumText, calls: []string{rr}},
		{name: "rrlock validity lapsed", on: map[string][]answer{"Acquire": {lapsed}}, cmd: cmd("RRLOCK", "r", "1000"), want: "$-1", want3: "_",
			calls: []string{rr, `Abandon read ["r"] tok`}},
		{name: "rrlock bad ttl", cmd: cmd("RRLOCK", "r", "0"), want: "-ERR invalid expire time in 'rrlock' command"},
		{name: "rrlock too many autoextend", on: map[string][]answer{"Acquire": {grantOf("a"), grantOf("b")}},
			pre: [][]string{{"RLOCK", "a", "60000", "AUTOEXTEND"}, {"RLOCK", "b", "60000", "AUTOEXTEND"}},
			cmd: cmd("RRLOCK", "c", "60000", "AUTOEXTEND"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.Lock, []string{"a"}, time.Minute, 0, ""), acquire(quorum.Lock, []string{"b"}, time.Minute, 0, "")}},

		{name: "rrunlock held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("RRUNLOCK", "r", "tok"), want: ":1", calls: []string{`Release read ["r"] tok`}},
		{name: "rrunlock not held", cmd: cmd("RRUNLOCK", "r", "tok"), want: ":0", calls: []string{`Release read ["r"] tok`}},
		{name: "rrunlock no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("RRUNLOCK", "r", "tok"), want: noQuorumText, calls: []string{`Release read ["r"] tok`}},
		{name: "rrunlock empty token", cmd: cmd("RRUNLOCK", "r", ""), want: "-ERR token must be 1 to 128 bytes"},

		{name: "rrextend extended", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("RREXTEND", "r", "tok", "1000"), want: ":V", calls: []string{`Extend read ["r"] tok 1s`}},
		{name: "rrextend lost", cmd: cmd("RREXTEND", "r", "tok", "1000"), want: "$-1", want3: "_", calls: []string{`Extend read ["r"] tok 1s`}},
		{name: "rrextend no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("RREXTEND", "r", "tok", "1000"), want: noQuorumText, calls: []string{`Extend read ["r"] tok 1s`}},
		{name: "rrextend bad ttl", cmd: cmd("RREXTEND", "r", "tok", "3600001"), want: "-ERR invalid expire time in 'rrextend' command (limits.max_ttl is 1h0m0s)"},
		{name: "rrextend empty resource", cmd: cmd("RREXTEND", "", "tok", "10"), want: "-ERR resource name must not be empty"},
	})
}

// TestSemaphoreCommandReplies: RSEMACQUIRE, RSEMRELEASE, RSEMEXTEND and
// RSEMCOUNT.
func TestSemaphoreCommandReplies(t *testing.T) {
	sem := "Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: sec, Options: quorum.SemaphoreOptions{Limit: 3, Count: 1}})
	runRows(t, []row{
		{name: "rsemacquire granted", on: map[string][]answer{"Acquire": {semGranted}}, cmd: cmd("RSEMACQUIRE", "s", "3", "1000"), want: "*2 $3 tok :V", calls: []string{sem}},
		{name: "rsemacquire options", on: map[string][]answer{"Acquire": {semGranted}}, cmd: cmd("RSEMACQUIRE", "s", "3", "60000", "count", "2", "WAIT", "9", "TOKEN", "t", "AUTOEXTEND"),
			want: "*2 $3 tok :V", calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: time.Minute, Wait: 9 * ms, Token: "t", Options: quorum.SemaphoreOptions{Limit: 3, Count: 2}})}},
		{name: "rsemacquire not granted", cmd: cmd("RSEMACQUIRE", "s", "3", "1000"), want: "$-1", want3: "_", calls: []string{sem}},
		{name: "rsemacquire no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RSEMACQUIRE", "s", "3", "1000"), want: noQuorumText, calls: []string{sem}},
		{name: "rsemacquire validity lapsed", on: map[string][]answer{"Acquire": {semLapsed}}, cmd: cmd("RSEMACQUIRE", "s", "3", "1000"), want: "$-1", want3: "_",
			calls: []string{sem, `Abandon semaphore ["s"] tok`}},
		{name: "rsemacquire other limit", on: map[string][]answer{"Acquire": {{err: fmt.Errorf("acquire: %w", &quorum.LimitError{Name: "s", Limit: 5})}}},
			cmd: cmd("RSEMACQUIRE", "s", "3", "1000"), want: "-ERR semaphore 's' has limit 5", calls: []string{sem}},
		{name: "rsemacquire limit zero", cmd: cmd("RSEMACQUIRE", "s", "0", "1000"), want: fmt.Sprintf("-ERR limit must be 1 to %d", quorum.MaxSemaphoreLimit)},
		{name: "rsemacquire limit over", cmd: cmd("RSEMACQUIRE", "s", fmt.Sprint(quorum.MaxSemaphoreLimit+1), "1000"), want: fmt.Sprintf("-ERR limit must be 1 to %d", quorum.MaxSemaphoreLimit)},
		{name: "rsemacquire limit not a number", cmd: cmd("RSEMACQUIRE", "s", "many", "1000"), want: "-ERR value is not an integer or out of range"},
		{name: "rsemacquire count over limit", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "COUNT", "4"), want: "-ERR count must be 1 to the limit"},
		{name: "rsemacquire count zero", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "COUNT", "0"), want: "-ERR count must be 1 to the limit"},
		{name: "rsemacquire count not a number", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "COUNT", "x"), want: "-ERR value is not an integer or out of range"},
		{name: "rsemacquire count missing", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "COUNT"), want: "-ERR syntax error"},
		{name: "rsemacquire count twice", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "COUNT", "1", "COUNT", "1"), want: "-ERR syntax error"},
		{name: "rsemacquire wait negative", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "WAIT", "-1"), want: "-ERR timeout is negative"},
		{name: "rsemacquire empty token", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "TOKEN", ""), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rsemacquire unknown option", cmd: cmd("RSEMACQUIRE", "s", "3", "1000", "PX"), want: "-ERR syntax error"},
		{name: "rsemacquire bad ttl", cmd: cmd("RSEMACQUIRE", "s", "3", "0"), want: "-ERR invalid expire time in 'rsemacquire' command"},
		{name: "rsemacquire empty name", cmd: cmd("RSEMACQUIRE", "", "3", "1000"), want: "-ERR semaphore name must not be empty"},
		{name: "rsemacquire arity", cmd: cmd("RSEMACQUIRE", "s"), want: "-ERR wrong number of arguments for 'rsemacquire' command"},
		{name: "rsemacquire stored limit", on: map[string][]answer{"Acquire": {semGranted}}, cmd: cmd("RSEMACQUIRE", "s", "1000", "COUNT", "2", "WAIT", "9"), want: "*2 $3 tok :V",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: sec, Wait: 9 * ms, Options: quorum.SemaphoreOptions{Count: 2}})}},
		{name: "rsemacquire stored limit, ttl only", cmd: cmd("RSEMACQUIRE", "s", "1000"), want: "$-1", want3: "_",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: sec, Options: quorum.SemaphoreOptions{Count: 1}})}},
		{name: "rsemacquire no stored limit", on: map[string][]answer{"Acquire": {{err: fmt.Errorf("acquire: %w", quorum.ErrNoSemLimit)}}}, cmd: cmd("RSEMACQUIRE", "s", "1000"),
			want:  "-ERR no limit stored for the semaphore on a quorum of masters: give one, or set it with RSEMSET",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: sec, Options: quorum.SemaphoreOptions{Count: 1}})}},
		{name: "rsemacquire count over the stored limit", on: map[string][]answer{"Acquire": {{err: &quorum.CountError{Limit: 3}}}}, cmd: cmd("RSEMACQUIRE", "s", "1000", "COUNT", "4"),
			want:  "-ERR count must be 1 to the limit (the semaphore's limit is 3)",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"s"}, TTL: sec, Options: quorum.SemaphoreOptions{Count: 4}})}},
		{name: "rsemacquire stored limit, count over any limit", cmd: cmd("RSEMACQUIRE", "s", "1000", "COUNT", fmt.Sprint(quorum.MaxSemaphoreLimit+1)), want: "-ERR count must be 1 to the limit"},
		{name: "rsemacquire stored limit, bad ttl", cmd: cmd("RSEMACQUIRE", "s", "0", "WAIT", "10"), want: "-ERR invalid expire time in 'rsemacquire' command"},

		{name: "rlockbreak held", on: map[string][]answer{"Break": {yes}}, cmd: cmd("RLOCKBREAK", "doc"), want: ":1", calls: []string{"Break doc"}},
		{name: "rlockbreak not held", cmd: cmd("RLOCKBREAK", "doc"), want: ":0", calls: []string{"Break doc"}},
		{name: "rlockbreak no quorum", on: map[string][]answer{"Break": {failNoQuo}}, cmd: cmd("RLOCKBREAK", "doc"), want: noQuorumText, calls: []string{"Break doc"}},
		{name: "rlockbreak empty resource", cmd: cmd("RLOCKBREAK", ""), want: "-ERR resource name must not be empty"},
		{name: "rlockbreak arity", cmd: cmd("RLOCKBREAK", "a", "b"), want: "-ERR wrong number of arguments for 'rlockbreak' command"},

		{name: "rsemset", cmd: cmd("RSEMSET", "s", "3"), want: "+OK", calls: []string{"SemSet s 3 0s"}},
		{name: "rsemset keep", cmd: cmd("RSEMSET", "s", "3", "keep", "60000"), want: "+OK", calls: []string{"SemSet s 3 1m0s"}},
		{name: "rsemset no quorum", on: map[string][]answer{"SemSet": {failNoQuo}}, cmd: cmd("RSEMSET", "s", "3"), want: noQuorumText, calls: []string{"SemSet s 3 0s"}},
		{name: "rsemset limit zero", cmd: cmd("RSEMSET", "s", "0"), want: fmt.Sprintf("-ERR limit must be 1 to %d", quorum.MaxSemaphoreLimit)},
		{name: "rsemset limit not a number", cmd: cmd("RSEMSET", "s", "x"), want: "-ERR value is not an integer or out of range"},
		{name: "rsemset keep zero", cmd: cmd("RSEMSET", "s", "3", "KEEP", "0"), want: "-ERR invalid expire time in 'rsemset' command (KEEP is 1 to 2592000000 ms)"},
		{name: "rsemset keep missing", cmd: cmd("RSEMSET", "s", "3", "KEEP"), want: "-ERR syntax error"},
		{name: "rsemset unknown option", cmd: cmd("RSEMSET", "s", "3", "PX", "10"), want: "-ERR syntax error"},
		{name: "rsemset extra argument", cmd: cmd("RSEMSET", "s", "3", "KEEP", "10", "KEEP", "10"), want: "-ERR syntax error"},
		{name: "rsemset empty name", cmd: cmd("RSEMSET", "", "3"), want: "-ERR semaphore name must not be empty"},
		{name: "rsemset arity", cmd: cmd("RSEMSET", "s"), want: "-ERR wrong number of arguments for 'rsemset' command"},
		{name: "rsemacquire too many autoextend", on: map[string][]answer{"Acquire": {grantOf("a"), grantOf("b")}},
			pre: [][]string{{"RLOCK", "a", "60000", "AUTOEXTEND"}, {"RLOCK", "b", "60000", "AUTOEXTEND"}},
			cmd: cmd("RSEMACQUIRE", "s", "3", "60000", "AUTOEXTEND"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.Lock, []string{"a"}, time.Minute, 0, ""), acquire(quorum.Lock, []string{"b"}, time.Minute, 0, "")}},

		{name: "rsemrelease held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("RSEMRELEASE", "s", "tok"), want: ":1", calls: []string{`Release semaphore ["s"] tok`}},
		{name: "rsemrelease not held", cmd: cmd("RSEMRELEASE", "s", "tok"), want: ":0", calls: []string{`Release semaphore ["s"] tok`}},
		{name: "rsemrelease no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("RSEMRELEASE", "s", "tok"), want: noQuorumText, calls: []string{`Release semaphore ["s"] tok`}},
		{name: "rsemrelease empty token", cmd: cmd("RSEMRELEASE", "s", ""), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rsemrelease empty name", cmd: cmd("RSEMRELEASE", "", "tok"), want: "-ERR semaphore name must not be empty"},

		{name: "rsemextend extended", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("RSEMEXTEND", "s", "tok", "1000"), want: ":V", calls: []string{`Extend semaphore ["s"] tok 1s`}},
		{name: "rsemextend lost", cmd: cmd("RSEMEXTEND", "s", "tok", "1000"), want: "$-1", want3: "_", calls: []string{`Extend semaphore ["s"] tok 1s`}},
		{name: "rsemextend no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("RSEMEXTEND", "s", "tok", "1000"), want: noQuorumText, calls: []string{`Extend semaphore ["s"] tok 1s`}},
		{name: "rsemextend bad ttl", cmd: cmd("RSEMEXTEND", "s", "tok", "-1"), want: "-ERR invalid expire time in 'rsemextend' command"},
		{name: "rsemextend empty token", cmd: cmd("RSEMEXTEND", "s", "", "10"), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rsemextend empty name", cmd: cmd("RSEMEXTEND", "", "tok", "10"), want: "-ERR semaphore name must not be empty"},

		{name: "rsemcount", on: map[string][]answer{"Info": {{v: &quorum.Info{Count: 2}}}}, cmd: cmd("RSEMCOUNT", "s"), want: ":2", calls: []string{"Info semaphore s"}},
		{name: "rsemcount no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("RSEMCOUNT", "s"), want: noQuorumText, calls: []string{"Info semaphore s"}},
		{name: "rsemcount empty name", cmd: cmd("RSEMCOUNT", ""), want: "-ERR semaphore name must not be empty"},
		{name: "rsemcount arity", cmd: cmd("RSEMCOUNT", "s", "x"), want: "-ERR wrong number of arguments for 'rsemcount' command"},
	})
}

// TestLatchCommandReplies: RLATCH, RLATCHDOWN, RLATCHWAIT and RLATCHCOUNT.
func TestLatchCommandReplies(t *testing.T) {
	runRows(t, []row{
		{name: "rlatch created", on: map[string][]answer{"Latch": {{v: 1}}}, cmd: cmd("RLATCH", "l", "3", "1000"), want: ":1", calls: []string{`Latch op=0 l count=3 ttl=1s token="" wait=0s`}},
		{name: "rlatch exists", cmd: cmd("RLATCH", "l", "3", "1000"), want: ":0", calls: []string{`Latch op=0 l count=3 ttl=1s token="" wait=0s`}},
		{name: "rlatch other count", on: map[string][]answer{"Latch": {{err: &quorum.LatchCountError{Name: "l", Count: 4}}}}, cmd: cmd("RLATCH", "l", "3", "1000"),
			want: "-ERR latch 'l' has count 4", calls: []string{`Latch op=0 l count=3 ttl=1s token="" wait=0s`}},
		{name: "rlatch no quorum", on: map[string][]answer{"Latch": {failNoQuo}}, cmd: cmd("RLATCH", "l", "3", "1000"), want: noQuorumText, calls: []string{`Latch op=0 l count=3 ttl=1s token="" wait=0s`}},
		{name: "rlatch count zero", cmd: cmd("RLATCH", "l", "0", "1000"), want: "-ERR count must be 1 to 1024 (limits.max_args)"},
		{name: "rlatch count over", cmd: cmd("RLATCH", "l", "1025", "1000"), want: "-ERR count must be 1 to 1024 (limits.max_args)"},
		{name: "rlatch count not a number", cmd: cmd("RLATCH", "l", "x", "1000"), want: "-ERR value is not an integer or out of range"},
		{name: "rlatch bad ttl", cmd: cmd("RLATCH", "l", "3", "0"), want: "-ERR invalid expire time in 'rlatch' command"},
		{name: "rlatch empty name", cmd: cmd("RLATCH", "", "3", "1000"), want: "-ERR latch name must not be empty"},
		{name: "rlatch arity", cmd: cmd("RLATCH", "l", "3"), want: "-ERR wrong number of arguments for 'rlatch' command"},

		{name: "rlatchdown", on: map[string][]answer{"Latch": {{v: 2}}}, cmd: cmd("RLATCHDOWN", "l", "tok"), want: ":2", calls: []string{`Latch op=1 l count=0 ttl=0s token="tok" wait=0s`}},
		{name: "rlatchdown open", cmd: cmd("RLATCHDOWN", "l", "tok"), want: ":0", calls: []string{`Latch op=1 l count=0 ttl=0s token="tok" wait=0s`}},
		{name: "rlatchdown no latch", on: map[string][]answer{"Latch": {noLatch}}, cmd: cmd("RLATCHDOWN", "l", "tok"), want: "-ERR no such latch", calls: []string{`Latch op=1 l count=0 ttl=0s token="tok" wait=0s`}},
		{name: "rlatchdown no quorum", on: map[string][]answer{"Latch": {failNoQuo}}, cmd: cmd("RLATCHDOWN", "l", "tok"), want: noQuorumText, calls: []string{`Latch op=1 l count=0 ttl=0s token="tok" wait=0s`}},
		{name: "rlatchdown empty token", cmd: cmd("RLATCHDOWN", "l", ""), want: "-ERR token must be 1 to 128 bytes"},
		{name: "rlatchdown empty name", cmd: cmd("RLATCHDOWN", "", "tok"), want: "-ERR latch name must not be empty"},

		{name: "rlatchwait open", on: map[string][]answer{"Latch": {{v: 1}}}, cmd: cmd("RLATCHWAIT", "l", "100"), want: ":1", calls: []string{`Latch op=2 l count=0 ttl=0s token="" wait=100ms`}},
		{name: "rlatchwait ran out", cmd: cmd("RLATCHWAIT", "l", "100"), want: ":0", calls: []string{`Latch op=2 l count=0 ttl=0s token="" wait=100ms`}},
		{name: "rlatchwait no latch", on: map[string][]answer{"Latch": {noLatch}}, cmd: cmd("RLATCHWAIT", "l", "100"), want: "-ERR no such latch", calls: []string{`Latch op=2 l count=0 ttl=0s token="" wait=100ms`}},
		{name: "rlatchwait no quorum", on: map[string][]answer{"Latch": {failNoQuo}}, cmd: cmd("RLATCHWAIT", "l", "100"), want: noQuorumText, calls: []string{`Latch op=2 l count=0 ttl=0s token="" wait=100ms`}},
		{name: "rlatchwait negative", cmd: cmd("RLATCHWAIT", "l", "-1"), want: "-ERR timeout is negative"},
		{name: "rlatchwait over max", cmd: cmd("RLATCHWAIT", "l", "300001"), want: "-ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{name: "rlatchwait empty name", cmd: cmd("RLATCHWAIT", "", "1"), want: "-ERR latch name must not be empty"},

		{name: "rlatchcount", on: map[string][]answer{"Info": {{v: &quorum.Info{Count: 1}}}}, cmd: cmd("RLATCHCOUNT", "l"), want: ":1", calls: []string{"Info latch l"}},
		{name: "rlatchcount no latch", on: map[string][]answer{"Info": {noLatch}}, cmd: cmd("RLATCHCOUNT", "l"), want: "-ERR no such latch", calls: []string{"Info latch l"}},
		{name: "rlatchcount no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("RLATCHCOUNT", "l"), want: noQuorumText, calls: []string{"Info latch l"}},
		{name: "rlatchcount empty name", cmd: cmd("RLATCHCOUNT", ""), want: "-ERR latch name must not be empty"},
	})
}

// grantTok is a grant of resources holding token (a drop-in lock's value).
func grantTok(token string, validity time.Duration, resources ...string) answer {
	return answer{v: &quorum.Lease{Resources: resources, Token: token, Fences: make([]uint64, len(resources)), Validity: validity}}
}

// Lock scripts as the libraries send them (go-redsync, bsm/redislock,
// redis-semaphore), and one that is no lock operation.
const (
	acquireScript = `return redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2])`
	releaseScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`
	extendScript  = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) else return 0 end`
	checkScript   = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pttl", KEYS[1]) end
return -3`
	semScript = `local key = KEYS[1]
local limit = tonumber(ARGV[1])
local id = ARGV[2]
local timeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zcard', key) < limit then
  redis.call('zadd', key, now, id)
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`
	otherScript = `return redis.call("INCR", KEYS[1])`
	// A re-entrant acquire answering status and error replies.
	statusScript = `local v = redis.call('get', KEYS[1])
if not v then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return redis.status_reply('OK')
elseif v == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return redis.status_reply('OK')
end
return redis.error_reply('WRONGTYPE held by another')`
	checkValueScript = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return {v, redis.call('pttl', KEYS[1])} end
return {}`
	semRefreshScript = `local key = KEYS[1]
local id = ARGV[2]
local timeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zscore', key, id) then
  redis.call('zadd', key, now, id)
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`
	semReleaseScript = `return redis.call('zrem', KEYS[1], ARGV[1])`
)

// TestDropinCommandReplies: with dropin on, the Redis commands of lock
// libraries answer what one Redis holding the quorum's state would, and
// every write is the quorum operation of PROTOCOL.md's Drop-in mode.
func TestDropinCommandReplies(t *testing.T) {
	setnx := acquire(quorum.SetNX, []string{"k"}, sec, 0, "v")
	now := fmt.Sprint(time.Now().UnixMilli())
	past := fmt.Sprint(time.Now().Add(-time.Hour).UnixMilli())
	v := grantTok("v", 10*sec, "k")
	notLockScript := "-ERR drop-in: script " + shaOf([]byte(otherScript)) + ` is not a lock operation the proxy can run on a quorum (line 1: return redis.call("INCR", KEYS[1]): calls INCR, which is not a lock operation) (see docs/dropin.md, Refused scripts)`
	rows := []row{
		// SET NX
		{name: "set granted", on: map[string][]answer{"Acquire": {v}}, cmd: cmd("SET", "k", "v", "NX", "PX", "1000"), want: "+OK", calls: []string{setnx}},
		{name: "set ex", on: map[string][]answer{"Acquire": {v}}, cmd: cmd("set", "k", "v", "ex", "2", "nx"), want: "+OK", calls: []string{acquire(quorum.SetNX, []string{"k"}, 2*sec, 0, "v")}},
		{name: "set held", cmd: cmd("SET", "k", "v", "NX", "PX", "1000"), want: "$-1", want3: "_", calls: []string{setnx}},
		{name: "set no quorum is not acquired", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("SET", "k", "v", "NX", "PX", "1000"), want: "$-1", want3: "_", calls: []string{setnx}},
		{name: "set validity lapsed", on: map[string][]answer{"Acquire": {grantTok("v", 0, "k")}}, cmd: cmd("SET", "k", "v", "NX", "PX", "1000"), want: "$-1", want3: "_",
			calls: []string{setnx, `Abandon setnx ["k"] v`}},
		{name: "set reserved", on: map[string][]answer{"Acquire": {reserved}}, cmd: cmd("SET", "k", "v", "NX", "PX", "1000"), want: "-ERR resource name is reserved", calls: []string{setnx}},
		{name: "set kept lease", on: map[string][]answer{"Acquire": {v}}, cmd: cmd("SET", "k", "v", "NX"), want: "+OK", calls: []string{acquire(quorum.SetNX, []string{"k"}, keptLeaseTTL, 0, "v")}},
		{name: "set too many kept leases", on: map[string][]answer{"Acquire": {grantTok("v", 10*sec, "a"), grantTok("v", 10*sec, "b")}},
			pre: [][]string{{"SET", "a", "v", "NX"}, {"SET", "b", "v", "NX"}}, cmd: cmd("SET", "c", "v", "NX"), want: "-ERR too many auto-extended leases",
			calls: []string{acquire(quorum.SetNX, []string{"a"}, keptLeaseTTL, 0, "v"), acquire(quorum.SetNX, []string{"b"}, keptLeaseTTL, 0, "v")}},
		{name: "set pxat in the past, free", cmd: cmd("SET", "k", "v", "NX", "PXAT", past), want: "+OK", calls: []string{"Info lock k"}},
		{name: "set pxat in the past, held", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("SET", "k", "v", "NX", "PXAT", past), want: "$-1", want3: "_", calls: []string{"Info lock k"}},
		// An acquire one Redis would answer: never NOQUORUM.
		{name: "set pxat in the past, no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("SET", "k", "v", "NX", "PXAT", past), want: "$-1", want3: "_", calls: []string{"Info lock k"}},
		{name: "set pxat in the past, engine error", on: map[string][]answer{"Info": {reserved}}, cmd: cmd("SET", "k", "v", "NX", "PXAT", past), want: "-ERR resource name is reserved", calls: []string{"Info lock k"}},
		{name: "set without nx", cmd: cmd("SET", "k", "v", "PX", "1000"),
			want: "-ERR drop-in mode: SET on a lock key must be SET key value NX [PX|EX|PXAT|EXAT ttl] (or XX with a ttl, by the value holding it): a SET without NX would overwrite the lock of another client (see docs/PROTOCOL.md, Drop-in mode)"},
		{name: "set bad expire", cmd: cmd("SET", "k", "v", "NX", "PX", "0"), want: "-ERR invalid expire time in 'set' command"},
		{name: "set syntax", cmd: cmd("SET", "k", "v", "NX", "PX"), want: "-ERR syntax error"},
		{name: "set arity", cmd: cmd("SET", "k"), want: "-ERR wrong number of arguments for 'set' command"},

		// Reads
		{name: "get held", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("GET", "k"), want: "$3 tok", calls: []string{"Info lock k"}},
		{name: "get free", cmd: cmd("GET", "k"), want: "$-1", want3: "_", calls: []string{"Info lock k"}},
		{name: "get readers", on: map[string][]answer{"Info": {heldReaders}}, cmd: cmd("GET", "k"), want: "$-1", want3: "_", calls: []string{"Info lock k"}},
		{name: "get no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("GET", "k"), want: noQuorumText, calls: []string{"Info lock k"}},
		{name: "get arity", cmd: cmd("GET", "k", "x"), want: "-ERR wrong number of arguments for 'get' command"},
		{name: "mget", on: map[string][]answer{"Info": {heldByTok, notHeld, heldReaders}}, cmd: cmd("MGET", "a", "b", "c"), want: "*3 $3 tok $-1 $-1", want3: "*3 $3 tok _ _",
			calls: []string{"Info lock a", "Info lock b", "Info lock c"}},
		{name: "mget no quorum", on: map[string][]answer{"Info": {heldByTok, failNoQuo}}, cmd: cmd("MGET", "a", "b"), want: noQuorumText,
			calls: []string{"Info lock a", "Info lock b"}},
		{name: "pexpiretime free", cmd: cmd("PEXPIRETIME", "k"), want: ":-2", calls: []string{"Info lock k"}},
		{name: "expiretime arity", cmd: cmd("EXPIRETIME"), want: "-ERR wrong number of arguments for 'expiretime' command"},
		{name: "pttl held", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("PTTL", "k"), want: ":5000", calls: []string{"Info lock k"}},
		{name: "pttl free", cmd: cmd("PTTL", "k"), want: ":-2", calls: []string{"Info lock k"}},
		{name: "pttl no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("PTTL", "k"), want: noQuorumText, calls: []string{"Info lock k"}},
		{name: "ttl rounds", on: map[string][]answer{"Info": {{v: &quorum.Info{Held: true, Holder: "v", TTL: 1499 * ms}}}}, cmd: cmd("TTL", "k"), want: ":1", calls: []string{"Info lock k"}},
		{name: "ttl free", cmd: cmd("TTL", "k"), want: ":-2", calls: []string{"Info lock k"}},
		{name: "exists", on: map[string][]answer{"Info": {heldByTok, notHeld, heldReaders}}, cmd: cmd("EXISTS", "a", "b", "c"), want: ":2",
			calls: []string{"Info lock a", "Info lock b", "Info lock c"}},
		{name: "exists no quorum", on: map[string][]answer{"Info": {heldByTok, failNoQuo}}, cmd: cmd("EXISTS", "a", "b"), want: noQuorumText,
			calls: []string{"Info lock a", "Info lock b"}},

		// Deletes
		{name: "del", on: map[string][]answer{"Release": {yes, no, yes}}, cmd: cmd("DEL", "a", "b", "c"), want: ":2",
			calls: []string{`Release setnx ["a"] `, `Release setnx ["b"] `, `Release setnx ["c"] `}},
		{name: "del no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("DEL", "a", "b"), want: noQuorumText, calls: []string{`Release setnx ["a"] `}},
		{name: "unlink", on: map[string][]answer{"Release": {yes}}, cmd: cmd("UNLINK", "a"), want: ":1", calls: []string{`Release setnx ["a"] `}},
		{name: "del ends the kept lease", on: map[string][]answer{"Acquire": {v}, "Release": {yes}, "Info": {heldByTok}},
			pre: [][]string{{"SET", "k", "v", "NX"}, {"DEL", "k"}}, cmd: cmd("SET", "k2", "v", "NX"), want: "+OK",
			calls: []string{acquire(quorum.SetNX, []string{"k"}, keptLeaseTTL, 0, "v"), `Release setnx ["k"] `, acquire(quorum.SetNX, []string{"k2"}, keptLeaseTTL, 0, "v")}},
		{name: "delifeq held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("DELIFEQ", "k", "v"), want: ":1", calls: []string{`Release setnx ["k"] v`}},
		{name: "delifeq not held", cmd: cmd("DELIFEQ", "k", "v"), want: ":0", calls: []string{`Release setnx ["k"] v`}},
		{name: "delifeq no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("DELIFEQ", "k", "v"), want: noQuorumText, calls: []string{`Release setnx ["k"] v`}},
		{name: "delex ifeq", on: map[string][]answer{"Release": {yes}}, cmd: cmd("DELEX", "k", "ifeq", "v"), want: ":1", calls: []string{`Release setnx ["k"] v`}},
		{name: "delex", on: map[string][]answer{"Release": {yes}}, cmd: cmd("DELEX", "k"), want: ":1", calls: []string{`Release setnx ["k"] `}},
		{name: "delex no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("DELEX", "k"), want: noQuorumText, calls: []string{`Release setnx ["k"] `}},
		{name: "delex ifne", cmd: cmd("DELEX", "k", "IFNE", "v"),
			want: "-ERR drop-in mode: DELEX IFNE is not a lock release the proxy can run on a quorum; use IFEQ (see docs/PROTOCOL.md, Drop-in mode)"},
		{name: "delex bad condition", cmd: cmd("DELEX", "k", "IFXX", "v"), want: "-ERR syntax error"},
		{name: "delex missing value", cmd: cmd("DELEX", "k", "IFEQ"), want: "-ERR syntax error"},
		{name: "zrem", on: map[string][]answer{"Release": {yes, no}}, cmd: cmd("ZREM", "s", "tok", "", "other"), want: ":1",
			calls: []string{`Release semaphore ["s"] tok`, `Release semaphore ["s"] other`}},
		{name: "zrem no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("ZREM", "s", "tok"), want: noQuorumText, calls: []string{`Release semaphore ["s"] tok`}},

		// Scripts
		{name: "eval acquire granted", on: map[string][]answer{"Acquire": {v}}, cmd: cmd("EVAL", acquireScript, "1", "k", "v", "1000"), want: "+OK", calls: []string{setnx}},
		{name: "eval acquire held", cmd: cmd("EVAL", acquireScript, "1", "k", "v", "1000"), want: "$-1", want3: "_", calls: []string{setnx}},
		{name: "eval acquire no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("EVAL", acquireScript, "1", "k", "v", "1000"), want: "$-1", want3: "_", calls: []string{setnx}},
		{name: "eval acquire validity lapsed", on: map[string][]answer{"Acquire": {grantTok("v", 0, "k")}}, cmd: cmd("EVAL", acquireScript, "1", "k", "v", "1000"),
			want: "$-1", want3: "_", calls: []string{setnx, `Abandon setnx ["k"] v`}},
		{name: "eval acquire empty value", cmd: cmd("EVAL", acquireScript, "1", "k", "", "1000"),
			want: "-ERR drop-in mode: a lock's value must be 1 to 128 bytes (see docs/PROTOCOL.md, Drop-in mode)"},
		{name: "eval release held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("EVAL", releaseScript, "1", "k", "v"), want: ":1", calls: []string{`Release setnx ["k"] v`}},
		{name: "eval release other", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("EVAL", releaseScript, "1", "k", "v"), want: ":0",
			calls: []string{`Release setnx ["k"] v`, "Info lock k"}},
		{name: "eval release no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("EVAL", releaseScript, "1", "k", "v"), want: noQuorumText, calls: []string{`Release setnx ["k"] v`}},
		{name: "eval extend held", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("EVAL", extendScript, "1", "k", "v", "1000"), want: ":1", calls: []string{`Extend setnx ["k"] v 1s`}},
		{name: "eval extend lost", cmd: cmd("EVAL", extendScript, "1", "k", "v", "1000"), want: ":0", calls: []string{`Extend setnx ["k"] v 1s`, "Info lock k"}},
		{name: "eval extend no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("EVAL", extendScript, "1", "k", "v", "1000"), want: noQuorumText, calls: []string{`Extend setnx ["k"] v 1s`}},
		{name: "eval check mine", on: map[string][]answer{"Info": {{v: &quorum.Info{Held: true, Holder: "v", TTL: 5 * sec}}}}, cmd: cmd("EVAL", checkScript, "1", "k", "v"), want: ":5000", calls: []string{"Info lock k"}},
		{name: "eval check other", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("EVAL", checkScript, "1", "k", "v"), want: ":-3", calls: []string{"Info lock k"}},
		{name: "eval semaphore acquire", on: map[string][]answer{"Acquire": {{v: &quorum.Lease{Resources: []string{"sem"}, Token: "tok", Validity: 10 * sec}}}},
			cmd: cmd("EVAL", semScript, "1", "sem", "3", "tok", "20000", now), want: ":1",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"sem"}, TTL: 20 * sec, Token: "tok", Options: quorum.SemaphoreOptions{Limit: 3, Count: 1}})}},
		{name: "eval semaphore full", cmd: cmd("EVAL", semScript, "1", "sem", "3", "tok", "20000", now), want: ":0",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"sem"}, TTL: 20 * sec, Token: "tok", Options: quorum.SemaphoreOptions{Limit: 3, Count: 1}})}},
		{name: "eval semaphore validity lapsed", on: map[string][]answer{"Acquire": {{v: &quorum.Lease{Resources: []string{"sem"}, Token: "tok"}}}},
			cmd: cmd("EVAL", semScript, "1", "sem", "3", "tok", "20000", now), want: ":0",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Semaphore, Resources: []string{"sem"}, TTL: 20 * sec, Token: "tok", Options: quorum.SemaphoreOptions{Limit: 3, Count: 1}}), `Abandon semaphore ["sem"] tok`}},
		{name: "eval status reply", on: map[string][]answer{"Acquire": {v}}, cmd: cmd("EVAL", statusScript, "1", "k", "v", "1000"), want: "+OK",
			calls: []string{acquire(quorum.Lock, []string{"k"}, sec, 0, "v")}},
		// A script's error reply reaches the client with its own code.
		{name: "eval error reply", cmd: cmd("EVAL", statusScript, "1", "k", "v", "1000"), want: "-WRONGTYPE held by another",
			calls: []string{acquire(quorum.Lock, []string{"k"}, sec, 0, "v")}},
		{name: "eval array reply", on: map[string][]answer{"Info": {{v: &quorum.Info{Held: true, Holder: "v", TTL: 5 * sec}}}}, cmd: cmd("EVAL", checkValueScript, "1", "k", "v"),
			want: "*2 $1 v :5000", calls: []string{"Info lock k"}},
		{name: "eval empty array reply", on: map[string][]answer{"Info": {heldByTok}}, cmd: cmd("EVAL", checkValueScript, "1", "k", "v"), want: "*0", calls: []string{"Info lock k"}},
		{name: "eval semaphore refresh", on: map[string][]answer{"Extend": {valid10s}}, cmd: cmd("EVAL", semRefreshScript, "1", "sem", "3", "tok", "20000", now), want: ":1",
			calls: []string{`Extend semaphore ["sem"] tok 20s`}},
		{name: "eval semaphore refresh lost", cmd: cmd("EVAL", semRefreshScript, "1", "sem", "3", "tok", "20000", now), want: ":0", calls: []string{`Extend semaphore ["sem"] tok 20s`}},
		{name: "eval semaphore refresh no quorum", on: map[string][]answer{"Extend": {failNoQuo}}, cmd: cmd("EVAL", semRefreshScript, "1", "sem", "3", "tok", "20000", now), want: noQuorumText,
			calls: []string{`Extend semaphore ["sem"] tok 20s`}},
		{name: "eval semaphore release", on: map[string][]answer{"Release": {yes}}, cmd: cmd("EVAL", semReleaseScript, "1", "sem", "tok"), want: ":1", calls: []string{`Release semaphore ["sem"] tok`}},
		{name: "eval semaphore release not held", cmd: cmd("EVAL", semReleaseScript, "1", "sem", "tok"), want: ":0", calls: []string{`Release semaphore ["sem"] tok`}},
		{name: "eval not a lock script", cmd: cmd("EVAL", otherScript, "1", "k"), want: notLockScript},
		{name: "eval numkeys negative", cmd: cmd("EVAL", releaseScript, "-1", "k"), want: "-ERR Number of keys can't be negative"},
		{name: "eval numkeys over", cmd: cmd("EVAL", releaseScript, "3", "k", "v"), want: "-ERR Number of keys can't be greater than number of args"},
		{name: "eval numkeys not a number", cmd: cmd("EVAL", releaseScript, "x", "k", "v"), want: "-ERR value is not an integer or out of range"},
		{name: "evalsha unknown", cmd: cmd("EVALSHA", shaOf([]byte(releaseScript)), "1", "k", "v"), want: "-NOSCRIPT No matching script. Please use EVAL."},
		{name: "evalsha after script load", on: map[string][]answer{"Release": {yes}}, pre: [][]string{{"SCRIPT", "LOAD", releaseScript}},
			cmd: cmd("EVALSHA", strings.ToUpper(shaOf([]byte(releaseScript))), "1", "k", "v"), want: ":1", calls: []string{`Release setnx ["k"] v`}},
		{name: "script load", cmd: cmd("SCRIPT", "LOAD", releaseScript), want: "$40 " + shaOf([]byte(releaseScript))},
		{name: "script load refused", cmd: cmd("SCRIPT", "LOAD", otherScript), want: notLockScript},
		{name: "script load arity", cmd: cmd("SCRIPT", "LOAD"), want: "-ERR wrong number of arguments for 'script|load' command"},
		{name: "script exists", pre: [][]string{{"SCRIPT", "LOAD", releaseScript}, {"SCRIPT", "LOAD", otherScript}},
			cmd: cmd("SCRIPT", "EXISTS", shaOf([]byte(releaseScript)), shaOf([]byte(otherScript)), shaOf([]byte("nothing"))), want: "*3 :1 :0 :0"},
		{name: "script exists arity", cmd: cmd("SCRIPT", "EXISTS"), want: "-ERR wrong number of arguments for 'script|exists' command"},
		{name: "script flush", pre: [][]string{{"SCRIPT", "LOAD", releaseScript}, {"SCRIPT", "FLUSH"}},
			cmd: cmd("SCRIPT", "EXISTS", shaOf([]byte(releaseScript))), want: "*1 :0"},
		{name: "script kill", cmd: cmd("SCRIPT", "KILL"), want: "-ERR drop-in mode: SCRIPT KILL is not served (see docs/PROTOCOL.md, Drop-in mode)"},
		{name: "unknown command", cmd: cmd("HLEN", "h"), want: "-ERR drop-in mode serves lock operations only: 'HLEN' is not one (see docs/PROTOCOL.md, Drop-in mode)"},
		// INCR is a fencing counter: the fence of a momentary lock of the
		// key, released before the answer.
		{name: "incr", on: map[string][]answer{"Acquire": {{v: &quorum.Lease{Resources: []string{"ctr"}, Token: "t1", Validity: sec, Fences: []uint64{41}}}}},
			cmd: cmd("INCR", "ctr"), want: ":41",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Lock, Resources: []string{"ctr"}, TTL: 2 * sec, Wait: 5 * sec}), `Release lock ["ctr"] t1`}},
		{name: "incr answered though its release is not", on: map[string][]answer{"Acquire": {{v: &quorum.Lease{Resources: []string{"ctr"}, Token: "t1", Validity: sec, Fences: []uint64{42}}}}, "Release": {failNoQuo}},
			cmd: cmd("INCR", "ctr"), want: ":42",
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Lock, Resources: []string{"ctr"}, TTL: 2 * sec, Wait: 5 * sec}), `Release lock ["ctr"] t1`}},
		{name: "incr busy", cmd: cmd("INCR", "ctr"), want: `-ERR drop-in mode: INCR "ctr": no fence within 5s: the key is held as a lock, or other INCRs of it kept it busy (see docs/PROTOCOL.md, Drop-in mode)`,
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Lock, Resources: []string{"ctr"}, TTL: 2 * sec, Wait: 5 * sec})}},
		{name: "incr no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("INCR", "ctr"), want: noQuorumText,
			calls: []string{"Acquire " + req(quorum.Request{Primitive: quorum.Lock, Resources: []string{"ctr"}, TTL: 2 * sec, Wait: 5 * sec})}},
		{name: "incr arity", cmd: cmd("INCR"), want: "-ERR wrong number of arguments for 'incr' command"},
		{name: "incrby refused", cmd: cmd("INCRBY", "ctr", "2"), want: "-ERR drop-in mode serves lock operations only: 'INCRBY' is not one (see docs/PROTOCOL.md, Drop-in mode)"},
	}
	for i := range rows {
		rows[i].dropin = true
	}
	runRows(t, rows)
}
