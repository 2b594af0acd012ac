package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// twoMasters is the fake engine's Status in the quarantine and INFO tests.
var twoMasters = quorum.Status{Quorum: 2, Masters: []quorum.NodeStatus{
	{Addr: "m0:1", State: quorum.StateUp, Latency: 1500 * time.Microsecond, RunID: "r0"},
	{Addr: "m1:2", State: quorum.StateQuarantined, QuarantineLeft: 2500 * time.Millisecond, RunID: "r1", Restarts: 1,
		LastError: "dial tcp: refused,\r\nagain", Why: "restarted"},
}}

// TestQuarantineCommand: RQUARANTINE LIST and END answer each master's
// entry (a map in RESP3, a flat array in RESP2) and the engine's errors in
// the operator's words; a bad subcommand never reaches the engine.
func TestQuarantineCommand(t *testing.T) {
	m0 := "$5 index :0 $4 addr $4 m0:1 $5 state $2 up $13 quarantine_ms :0 $3 why $0 "
	m1 := "$5 index :1 $4 addr $4 m1:2 $5 state $11 quarantined $13 quarantine_ms :2500 $3 why $9 restarted"
	m1up := "$5 index :1 $4 addr $4 m1:2 $5 state $2 up $13 quarantine_ms :0 $3 why $0 "
	tests := []struct {
		name         string
		end          answer // EndQuarantine's answer
		cmd          []string
		want, want3  string
		endQuarantin string // the master EndQuarantine was asked to end, "" for none
	}{
		{name: "list", cmd: cmd("RQUARANTINE", "LIST"), want: "*2 *10 " + m0 + " *10 " + m1, want3: "*2 %5 " + m0 + " %5 " + m1},
		{name: "end", end: answer{v: quorum.NodeStatus{Addr: "m1:2", State: quorum.StateUp}}, cmd: cmd("rquarantine", "end", "1"),
			want: "*10 " + m1up, want3: "%5 " + m1up, endQuarantin: "1"},
		{name: "end no such master", end: answer{err: fmt.Errorf("%w: %q", quorum.ErrNoSuchMaster, "m9")}, cmd: cmd("RQUARANTINE", "END", "m9"),
			want: "-ERR no such master: give its index in masters (from 0) or its addr, as RQUARANTINE LIST shows them", endQuarantin: "m9"},
		{name: "end not quarantined", end: answer{err: fmt.Errorf("%w: m0:1", quorum.ErrNotQuarantined)}, cmd: cmd("RQUARANTINE", "END", "m0:1"),
			want: "-ERR master is not quarantined (RQUARANTINE LIST shows each master)", endQuarantin: "m0:1"},
		{name: "end no quorum", end: failNoQuo, cmd: cmd("RQUARANTINE", "END", "1"), want: noQuorumText, endQuarantin: "1"},
		{name: "list arity", cmd: cmd("RQUARANTINE", "LIST", "x"), want: "-ERR wrong number of arguments for 'rquarantine|list' command"},
		{name: "end arity", cmd: cmd("RQUARANTINE", "END"), want: "-ERR wrong number of arguments for 'rquarantine|end' command"},
		{name: "unknown subcommand", cmd: cmd("RQUARANTINE", "STOP"), want: "-ERR unknown subcommand 'STOP'. Try RQUARANTINE LIST or RQUARANTINE END <master>."},
		{name: "arity", cmd: cmd("RQUARANTINE"), want: "-ERR wrong number of arguments for 'rquarantine' command"},
	}
	for _, tc := range tests {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", tc.name, proto), func(t *testing.T) {
				eng := newFakeEngine().on("EndQuarantine", tc.end)
				eng.status = twoMasters
				h := newHarness(t, eng, harnessLimits)
				c := h.dial(t, proto)
				want := tc.want
				if proto == 3 && tc.want3 != "" {
					want = tc.want3
				}
				if got := c.do(tc.cmd...); got != want {
					t.Errorf("%q answered\n  %q, want\n  %q", tc.cmd, got, want)
				}
				calls := eng.Calls()
				if tc.endQuarantin == "" {
					if len(calls) != 0 {
						t.Errorf("engine called: %q", calls)
					}
					return
				}
				// The operator is named for the log: the user, the
				// client's address and its id.
				prefix := fmt.Sprintf("EndQuarantine %s user default from %s (client id ", tc.endQuarantin, c.conn.LocalAddr())
				if len(calls) != 1 || !strings.HasPrefix(calls[0], prefix) {
					t.Errorf("engine calls %q, want one %q...", calls, prefix)
				}
			})
		}
	}
}

// TestInfoSections: INFO masters shows the engine's Status line by line
// (a last error kept on one line, out of the field syntax), INFO leases
// the connection's AUTOEXTEND leases, INFO dropin the scripts seen and
// run.
func TestInfoSections(t *testing.T) {
	eng := newFakeEngine().on("Acquire", granted).on("Release", yes)
	eng.status = twoMasters
	lim := harnessLimits
	lim.DropIn = true
	var ran []string
	lim.DropinScripts = func(shape string) { ran = append(ran, shape) }
	h := newHarness(t, eng, lim)
	c := h.dial(t, 2)
	c.do("RLOCK", "r", "60000", "AUTOEXTEND")
	c.do("EVAL", releaseScript, "1", "k", "v")
	c.do("SCRIPT", "LOAD", otherScript)
	for _, tc := range []struct {
		section string
		want    []string
	}{
		{"masters", []string{"masters:2", "quorum:2", "masters_up:1",
			"master0:addr=m0:1,state=up,quarantine_ms=0,latency_us=1500,run_id=r0,restarts=0,last_error=",
			"master1:addr=m1:2,state=quarantined,quarantine_ms=2500,latency_us=0,run_id=r1,restarts=1,last_error=dial tcp: refused;  again"}},
		{"leases", []string{"autoextend_leases:1", "autoextend_lost:0"}},
		{"dropin", []string{"scripts_recognised:1", "scripts_refused:1", "scripts_declared:0", "shape_release:runs=1"}},
	} {
		got := c.do("INFO", tc.section)
		lines := strings.Split(got, "\r\n")
		for _, w := range tc.want {
			if !slices.Contains(lines, w) {
				t.Errorf("INFO %s: no line %q in %q", tc.section, w, got)
			}
		}
	}
	if !slices.Equal(ran, []string{"release"}) {
		t.Errorf("DropinScripts told %q, want one release", ran)
	}
}

// TestAutoExtendLost: an AUTOEXTEND grant whose extension the engine
// refuses (not held) or cannot decide until its validity ends (NOQUORUM)
// is lost: it is given back, a RESP3 connection is pushed "lost resource
// token" at once, and the next command on the connection that names the
// resource answers -LOST once; the one after reaches the engine again.
func TestAutoExtendLost(t *testing.T) {
	short := func(resources ...string) answer {
		a := grantOf(resources...)
		a.v.(*quorum.Lease).Validity = 300 * time.Millisecond
		return a
	}
	tests := []struct {
		name    string
		acquire answer
		extend  answer
		cmd     []string // the acquire, with AUTOEXTEND and ttl 30 ms (extended every 10 ms)
		release string   // the release of the lost grant (a fair lease is given back as the lock it is)
		next    []string // a command naming a resource of the grant
		after   string   // its reply once -LOST was answered
	}{
		{"rlock not held", grantOf("r"), answer{}, cmd("RLOCK", "r", "30", "AUTOEXTEND"), `Release lock ["r"] tok`, cmd("RUNLOCK", "r", "tok"), ":0"},
		{"rlock no quorum", short("r"), failNoQuo, cmd("RLOCK", "r", "30", "AUTOEXTEND"), `Release lock ["r"] tok`, cmd("REXTEND", "r", "tok", "100"), "$-1"},
		{"rfairlock not held", grantOf("r"), answer{}, cmd("RFAIRLOCK", "r", "30", "AUTOEXTEND"), `Release lock ["r"] tok`, cmd("RLOCKINFO", "r", "tok"),
			"*12 $4 held :0 $6 ttl_ms :-1 $4 mine :0 $10 autoextend :0 $7 waiters :0 $5 place :0"},
		{"rmultilock not held", grantOf("a", "b"), answer{}, cmd("RMULTILOCK", "30", "2", "a", "b", "AUTOEXTEND"), `Release lock ["a" "b"] tok`,
			cmd("RMULTIUNLOCK", "tok", "b", "a"), ":0"},
		{"rrlock no quorum", short("r"), failNoQuo, cmd("RRLOCK", "r", "30", "AUTOEXTEND"), `Release read ["r"] tok`, cmd("RRUNLOCK", "r", "tok"), ":0"},
		{"rsemacquire not held", answer{v: &quorum.Lease{Resources: []string{"s"}, Token: "tok", Count: 1, Validity: 10 * time.Second}}, answer{},
			cmd("RSEMACQUIRE", "s", "2", "30", "AUTOEXTEND"), `Release semaphore ["s"] tok`, cmd("RSEMRELEASE", "s", "tok"), ":0"},
	}
	for _, tc := range tests {
		for _, proto := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", tc.name, proto), func(t *testing.T) {
				eng := newFakeEngine().on("Acquire", tc.acquire).on("Extend", tc.extend)
				h := newHarness(t, eng, harnessLimits)
				c := h.dial(t, proto)
				c.send(tc.cmd...)
				// The grant, and on RESP3 a push per resource as soon as
				// the grant is lost (which may come first).
				n := 1
				if proto == 3 {
					n += len(tc.acquire.v.(*quorum.Lease).Resources)
				}
				for range n {
					switch got := c.read(); {
					case strings.HasPrefix(got, "*") && strings.Contains(got, " $3 tok "): // the grant
					case proto == 3 && strings.HasPrefix(got, ">3 $4 lost ") && strings.HasSuffix(got, " $3 tok"):
					default:
						t.Fatalf("%q: got %q, want its grant or a push >3 lost <resource> tok", tc.cmd, got)
					}
				}
				lost := tc.next[1]
				if tc.next[0] == "RMULTIUNLOCK" {
					lost = tc.next[2]
				}
				if !eng.waitCall("Release") {
					t.Fatalf("the lost grant was not given back; calls %q", eng.Calls())
				}
				if calls := eng.Calls(); calls[len(calls)-1] != tc.release {
					t.Errorf("released %q, want %q (calls %q)", calls[len(calls)-1], tc.release, calls)
				}
				if got, want := c.do(tc.next...), "-LOST "+lost+" lease was not extended in time"; got != want {
					t.Errorf("%q after the loss answered %q, want %q", tc.next, got, want)
				}
				eng.on("Release", no).on("Extend", answer{}).on("Info", notHeld)
				after := tc.after
				if proto == 3 {
					after = strings.Replace(strings.Replace(after, "$-1", "_", 1), "*12 ", "%6 ", 1)
				}
				if got := c.do(tc.next...); got != after {
					t.Errorf("%q the second time answered %q, want %q", tc.next, got, after)
				}
			})
		}
	}
}

// TestHangUpAbandons: a client that hangs up while its acquire waits gets
// no grant: a grant the engine makes as the client leaves is given back
// with Abandon (on the lease of its primitive), and nothing is kept alive.
func TestHangUpAbandons(t *testing.T) {
	sem := &quorum.Lease{Resources: []string{"s"}, Token: "tok", Count: 1, Validity: 10 * time.Second}
	tests := []struct {
		cmd     []string
		lease   *quorum.Lease
		abandon string
	}{
		{cmd("RLOCK", "r", "1000", "WAIT", "60000"), granted.v.(*quorum.Lease), `Abandon lock ["r"] tok`},
		{cmd("RLOCK", "r", "1000", "WAIT", "60000", "AUTOEXTEND"), granted.v.(*quorum.Lease), `Abandon lock ["r"] tok`},
		{cmd("RFAIRLOCK", "r", "1000", "WAIT", "60000"), granted.v.(*quorum.Lease), `Abandon fair ["r"] tok`},
		{cmd("RMULTILOCK", "1000", "2", "a", "b", "WAIT", "60000"), grantedMulti.v.(*quorum.Lease), `Abandon lock ["a" "b"] tok`},
		{cmd("RRLOCK", "r", "1000", "WAIT", "60000"), granted.v.(*quorum.Lease), `Abandon read ["r"] tok`},
		{cmd("RSEMACQUIRE", "s", "2", "1000", "WAIT", "60000"), sem, `Abandon semaphore ["s"] tok`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.cmd, " "), func(t *testing.T) {
			eng := newFakeEngine().on("Acquire", answer{v: tc.lease, block: true})
			h := newHarness(t, eng, harnessLimits)
			c := h.dial(t, 2)
			c.send(tc.cmd...)
			if !eng.waitCall("Acquire") {
				t.Fatal("the acquire did not reach the engine")
			}
			c.conn.Close()
			if !eng.waitCall("Abandon") {
				t.Fatalf("a grant made as its client left was not given back; calls %q", eng.Calls())
			}
			if calls := eng.Calls(); len(calls) != 2 || calls[1] != tc.abandon {
				t.Errorf("calls %q, want the acquire then %q", calls, tc.abandon)
			}
		})
	}
}

// TestShutdownEndsWait: a shutdown ends a waiting acquire; its client
// reads why.
func TestShutdownEndsWait(t *testing.T) {
	eng := newFakeEngine().on("Acquire", answer{err: context.Canceled, block: true})
	h := newHarness(t, eng, harnessLimits)
	c := h.dial(t, 2)
	c.send("RLOCK", "r", "1000", "WAIT", "60000")
	if !eng.waitCall("Acquire") {
		t.Fatal("the acquire did not reach the engine")
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	if got, want := c.read(), "-ERR wait canceled: server shutting down"; got != want {
		t.Errorf("a wait the shutdown ended answered %q, want %q", got, want)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestPipelinedLapsedGrants: acquires pipelined on one connection run
// beside each other; each grant's validity is computed when its reply is
// written, and a grant whose validity ended by then is given back and
// answers nil, the others their grant.
func TestPipelinedLapsedGrants(t *testing.T) {
	eng := newFakeEngine().on("Acquire", grantOf("a"), answer{v: &quorum.Lease{Resources: []string{"b"}, Token: "tok", Fences: []uint64{7}}}, grantOf("c"))
	h := newHarness(t, eng, harnessLimits)
	c := h.dial(t, 2)
	for _, r := range []string{"a", "b", "c"} {
		c.send("RLOCK", r, "1000")
	}
	var got []string
	for range 3 {
		got = append(got, c.read())
	}
	nils := 0
	for _, g := range got {
		switch {
		case g == "$-1":
			nils++
		case !matches(g, "*3 $3 tok :V :7"):
			t.Errorf("reply %q, want a grant or nil", g)
		}
	}
	if nils != 1 {
		t.Errorf("replies %q, want one nil (the lapsed grant)", got)
	}
	if !slices.Contains(eng.Calls(), `Abandon lock ["b"] tok`) {
		t.Errorf("calls %q: the lapsed grant was not given back", eng.Calls())
	}
}

// TestTransactionExtendDecays: an extension's validity is counted down to
// when its reply is written (EXEC answers once every queued command ran),
// not when it ran: an extension valid 30 ms answers nil behind a command
// that took longer.
func TestTransactionExtendDecays(t *testing.T) {
	eng := newFakeEngine().on("Extend", answer{v: 30 * time.Millisecond}, answer{v: 10 * time.Second, delay: 60 * time.Millisecond})
	h := newHarness(t, eng, harnessLimits)
	c := h.dial(t, 2)
	for _, step := range [][]string{{"MULTI"}, {"REXTEND", "a", "tok", "1000"}, {"REXTEND", "b", "tok", "1000"}} {
		c.do(step...)
	}
	if got := c.do("EXEC"); !matches(got, "*2 $-1 :V") {
		t.Errorf("EXEC answered %q, want nil (lapsed while the second ran) and the second validity", got)
	}
}

// waitFor waits until one of the engine's calls is want (or 5 s pass).
func (f *fakeEngine) waitFor(want string) bool {
	deadline := time.After(5 * time.Second)
	for {
		if slices.Contains(f.Calls(), want) {
			return true
		}
		select {
		case <-f.called:
		case <-deadline:
			return false
		}
	}
}

// TestExtendOfAutoExtendedLease: an extension the client makes itself on
// the connection that keeps the lease alive makes the keeper extend with
// the longer ttl from then on (each primitive finds its kept lease).
func TestExtendOfAutoExtendedLease(t *testing.T) {
	for _, tc := range []struct {
		acquire, extend []string
		lease           answer
		kept            string // the keeper's extension with the longer ttl
	}{
		{cmd("RLOCK", "r", "30", "AUTOEXTEND"), cmd("REXTEND", "r", "tok", "90"), grantOf("r"), `Extend lock ["r"] tok 90ms`},
		{cmd("RFAIRLOCK", "r", "30", "AUTOEXTEND"), cmd("REXTEND", "r", "tok", "90"), grantOf("r"), `Extend lock ["r"] tok 90ms`},
		{cmd("RMULTILOCK", "30", "2", "a", "b", "AUTOEXTEND"), cmd("RMULTIEXTEND", "tok", "90", "b", "a"), grantOf("a", "b"), `Extend lock ["a" "b"] tok 90ms`},
		{cmd("RRLOCK", "r", "30", "AUTOEXTEND"), cmd("RREXTEND", "r", "tok", "90"), grantOf("r"), `Extend read ["r"] tok 90ms`},
		{cmd("RSEMACQUIRE", "s", "2", "30", "AUTOEXTEND"), cmd("RSEMEXTEND", "s", "tok", "90"),
			answer{v: &quorum.Lease{Resources: []string{"s"}, Token: "tok", Count: 1, Validity: 10 * time.Second}}, `Extend semaphore ["s"] tok 90ms`},
	} {
		t.Run(tc.acquire[0], func(t *testing.T) {
			eng := newFakeEngine().on("Acquire", tc.lease).on("Extend", valid10s)
			h := newHarness(t, eng, harnessLimits)
			c := h.dial(t, 2)
			if got := c.do(tc.acquire...); !strings.HasPrefix(got, "*") {
				t.Fatalf("%q answered %q", tc.acquire, got)
			}
			if got := c.do(tc.extend...); !matches(got, ":V") {
				t.Fatalf("%q answered %q", tc.extend, got)
			}
			if !eng.waitFor(tc.kept) {
				t.Fatalf("the keeper never extended with the client's longer ttl: calls %q", eng.Calls())
			}
		})
	}
}
