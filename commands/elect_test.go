package commands

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// TestElectCommandReplies: every RELECT subcommand answers what
// docs/PROTOCOL.md ("Leader election") promises for each outcome the
// engine can give, and bad input is refused in Redis's wording before it
// reaches the engine.
func TestElectCommandReplies(t *testing.T) {
	campaign := func(ttl, wait time.Duration) string {
		return "Acquire " + req(quorum.Request{Primitive: quorum.Election, Resources: []string{"e"}, TTL: ttl, Wait: wait, Options: quorum.ElectionOptions{Value: "v"}})
	}
	elected := answer{v: &quorum.Lease{Resources: []string{"e"}, Token: "tok", Fences: []uint64{42}, Validity: 10 * time.Second}}
	electLapsed := answer{v: &quorum.Lease{Resources: []string{"e"}, Token: "tok", Fences: []uint64{42}, Validity: 0}}
	leading := answer{v: &quorum.Info{Held: true, Holder: "tok", Value: "host:1", Fence: 42, TTL: 2500 * time.Millisecond}}
	changed := answer{v: &quorum.Info{Held: true, Holder: "tok2", Value: "host:2", Fence: 43, TTL: 3000 * time.Millisecond}}
	leaderCall := "Info election e"
	runRows(t, []row{
		// CAMPAIGN
		{name: "campaign elected", on: map[string][]answer{"Acquire": {elected}}, cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v"),
			want: "*3 $3 tok :V :42", calls: []string{campaign(sec, 0)}},
		{name: "campaign options", on: map[string][]answer{"Acquire": {elected}}, cmd: cmd("relect", "campaign", "e", "1000", "v", "autoextend", "wait", "250"),
			want: "*3 $3 tok :V :42", calls: []string{campaign(sec, 250*ms)}},
		{name: "campaign another leads", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v"), want: "$-1", want3: "_", calls: []string{campaign(sec, 0)}},
		{name: "campaign no quorum", on: map[string][]answer{"Acquire": {failNoQuo}}, cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v"), want: noQuorumText, calls: []string{campaign(sec, 0)}},
		{name: "campaign validity lapsed", on: map[string][]answer{"Acquire": {electLapsed}}, cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v"),
			want: "$-1", want3: "_", calls: []string{campaign(sec, 0), `Abandon election ["e"] tok`}},
		{name: "campaign canceled", on: map[string][]answer{"Acquire": {canceled}}, cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v"), want: "-ERR wait canceled: server shutting down", calls: []string{campaign(sec, 0)}},
		{name: "campaign arity", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000"), want: "-ERR wrong number of arguments for 'relect|campaign' command"},
		{name: "campaign empty election", cmd: cmd("RELECT", "CAMPAIGN", "", "1000", "v"), want: "-ERR election name must not be empty"},
		{name: "campaign ttl zero", cmd: cmd("RELECT", "CAMPAIGN", "e", "0", "v"), want: "-ERR invalid expire time in 'relect' command"},
		{name: "campaign ttl not a number", cmd: cmd("RELECT", "CAMPAIGN", "e", "x", "v"), want: "-ERR value is not an integer or out of range"},
		{name: "campaign value too long", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", strings.Repeat("v", 4097)), want: "-ERR value must be at most 4096 bytes"},
		{name: "campaign token refused", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v", "TOKEN", "t"), want: "-ERR syntax error"},
		{name: "campaign wait twice", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v", "WAIT", "1", "WAIT", "1"), want: "-ERR syntax error"},
		{name: "campaign wait negative", cmd: cmd("RELECT", "CAMPAIGN", "e", "1000", "v", "WAIT", "-1"), want: "-ERR timeout is negative"},
		// PROCLAIM
		{name: "proclaim leads", on: map[string][]answer{"Proclaim": {yes}}, cmd: cmd("RELECT", "PROCLAIM", "e", "tok", "host:9"), want: ":1", calls: []string{"Proclaim e tok host:9"}},
		{name: "proclaim not leader", on: map[string][]answer{"Proclaim": {no}}, cmd: cmd("RELECT", "PROCLAIM", "e", "tok", "host:9"), want: ":0", calls: []string{"Proclaim e tok host:9"}},
		{name: "proclaim no quorum", on: map[string][]answer{"Proclaim": {failNoQuo}}, cmd: cmd("RELECT", "PROCLAIM", "e", "tok", "host:9"), want: noQuorumText, calls: []string{"Proclaim e tok host:9"}},
		{name: "proclaim empty value", on: map[string][]answer{"Proclaim": {yes}}, cmd: cmd("RELECT", "PROCLAIM", "e", "tok", ""), want: ":1", calls: []string{"Proclaim e tok "}},
		{name: "proclaim arity", cmd: cmd("RELECT", "PROCLAIM", "e", "tok"), want: "-ERR wrong number of arguments for 'relect|proclaim' command"},
		{name: "proclaim empty token", cmd: cmd("RELECT", "PROCLAIM", "e", "", "v"), want: "-ERR token must be 1 to 128 bytes"},
		{name: "proclaim value too long", cmd: cmd("RELECT", "PROCLAIM", "e", "tok", strings.Repeat("v", 4097)), want: "-ERR value must be at most 4096 bytes"},
		// RESIGN
		{name: "resign held", on: map[string][]answer{"Release": {yes}}, cmd: cmd("RELECT", "RESIGN", "e", "tok"), want: ":1", calls: []string{`Release election ["e"] tok`}},
		{name: "resign not held", on: map[string][]answer{"Release": {no}}, cmd: cmd("RELECT", "RESIGN", "e", "tok"), want: ":0", calls: []string{`Release election ["e"] tok`}},
		{name: "resign no quorum", on: map[string][]answer{"Release": {failNoQuo}}, cmd: cmd("RELECT", "RESIGN", "e", "tok"), want: noQuorumText, calls: []string{`Release election ["e"] tok`}},
		{name: "resign arity", cmd: cmd("RELECT", "RESIGN", "e"), want: "-ERR wrong number of arguments for 'relect|resign' command"},
		{name: "resign empty election", cmd: cmd("RELECT", "RESIGN", "", "tok"), want: "-ERR election name must not be empty"},
		// LEADER
		{name: "leader", on: map[string][]answer{"Info": {leading}}, cmd: cmd("RELECT", "LEADER", "e"), want: "*3 $6 host:1 :42 :2500", calls: []string{leaderCall}},
		{name: "leader none", on: map[string][]answer{"Info": {notHeld}}, cmd: cmd("RELECT", "LEADER", "e"), want: "$-1", want3: "_", calls: []string{leaderCall}},
		{name: "leader no quorum", on: map[string][]answer{"Info": {failNoQuo}}, cmd: cmd("RELECT", "LEADER", "e"), want: noQuorumText, calls: []string{leaderCall}},
		{name: "leader arity", cmd: cmd("RELECT", "LEADER", "e", "x"), want: "-ERR wrong number of arguments for 'relect|leader' command"},
		{name: "leader empty election", cmd: cmd("RELECT", "LEADER", ""), want: "-ERR election name must not be empty"},
		// OBSERVE, UNOBSERVE: RESP2 is refused; pushes in TestElectObserve.
		{name: "unobserve not observed", cmd: cmd("RELECT", "UNOBSERVE", "e"), want: ":0"},
		{name: "observe arity", cmd: cmd("RELECT", "OBSERVE", "e", "f"), want: "-ERR wrong number of arguments for 'relect|observe' command"},
		// WAITCHANGE: the reads of the watch, until the term differs.
		{name: "waitchange changed", on: map[string][]answer{"WatchElection": {leading, leading, changed}}, cmd: cmd("RELECT", "WAITCHANGE", "e", "42", "WAIT", "5000"),
			want: "*3 $6 host:2 :43 :3000", calls: []string{"WatchElection e"}},
		{name: "waitchange a leader", on: map[string][]answer{"WatchElection": {notHeld, leading}}, cmd: cmd("RELECT", "WAITCHANGE", "e", "0", "WAIT", "5000"),
			want: "*3 $6 host:1 :42 :2500", calls: []string{"WatchElection e"}},
		{name: "waitchange lapsed", on: map[string][]answer{"WatchElection": {leading, notHeld}}, cmd: cmd("RELECT", "WAITCHANGE", "e", "42", "WAIT", "5000"),
			want: "$-1", want3: "_", calls: []string{"WatchElection e"}},
		{name: "waitchange ran out", on: map[string][]answer{"WatchElection": {leading}}, cmd: cmd("RELECT", "WAITCHANGE", "e", "42", "WAIT", "50"),
			want: "*3 $6 host:1 :42 :2500", calls: []string{"WatchElection e"}},
		{name: "waitchange no quorum", on: map[string][]answer{"WatchElection": {failNoQuo}}, cmd: cmd("RELECT", "WAITCHANGE", "e", "42", "WAIT", "50"),
			want: noQuorumText, calls: []string{"WatchElection e"}},
		{name: "waitchange no wait keyword", cmd: cmd("RELECT", "WAITCHANGE", "e", "42", "WAITS", "50"), want: "-ERR syntax error"},
		{name: "waitchange term negative", cmd: cmd("RELECT", "WAITCHANGE", "e", "-1", "WAIT", "50"), want: "-ERR value is not an integer or out of range"},
		{name: "waitchange wait over max", cmd: cmd("RELECT", "WAITCHANGE", "e", "1", "WAIT", "300001"), want: "-ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{name: "waitchange arity", cmd: cmd("RELECT", "WAITCHANGE", "e", "1", "WAIT"), want: "-ERR wrong number of arguments for 'relect|waitchange' command"},
		// RELECT itself
		{name: "unknown subcommand", cmd: cmd("RELECT", "ELECT", "e"), want: "-ERR unknown subcommand 'ELECT'. Try RELECT CAMPAIGN, PROCLAIM, RESIGN, LEADER, OBSERVE, UNOBSERVE or WAITCHANGE."},
		{name: "arity", cmd: cmd("RELECT", "LEADER"), want: "-ERR wrong number of arguments for 'relect' command"},
	})
}

// TestElectObserve: an observer is pushed the state when it began, then
// every change, and never a term that goes back: the watch's reads (a
// repeat, a new value, an older term read late, the end, the end again,
// the ended term read late, a new term, a newer one with no end read
// between: its predecessor's end is pushed first) become exactly the
// pushes below;
// UNOBSERVE stops them, and observing twice is one observation.
func TestElectObserve(t *testing.T) {
	held := func(term uint64, value string) answer {
		return answer{v: &quorum.Info{Held: true, Holder: "tok", Value: value, Fence: term, TTL: sec}, delay: 5 * ms}
	}
	ended := answer{v: &quorum.Info{}, delay: 5 * ms}
	eng := newFakeEngine().on("WatchElection",
		held(5, "a"), held(5, "a"), held(5, "b"), held(3, "old"), answer{err: noQuorum, delay: 5 * ms},
		ended, ended, held(5, "b"), held(9, "c"), held(12, "d"))
	h := newHarness(t, eng, harnessLimits)
	if got := h.dial(t, 2).do("RELECT", "OBSERVE", "e"); got != "-ERR RELECT OBSERVE needs RESP3 (HELLO 3); RESP2 clients use RELECT WAITCHANGE" {
		t.Fatalf("OBSERVE on RESP2: %q", got)
	}
	if calls := eng.Calls(); len(calls) != 0 {
		t.Fatalf("OBSERVE on RESP2 reached the engine: %q", calls)
	}
	c := h.dial(t, 3)
	c.send("RELECT", "OBSERVE", "e")
	want := []string{
		">4 $6 leader $1 e $1 a $1 5",
		">4 $6 leader $1 e $1 b $1 5",
		">3 $4 none $1 e $1 5",
		">4 $6 leader $1 e $1 c $1 9",
		">3 $4 none $1 e $1 9",
		">4 $6 leader $1 e $1 d $2 12",
	}
	var pushes []string
	replied := false
	for len(pushes) < len(want) || !replied {
		switch v := c.read(); {
		case v == "+OK" && !replied:
			replied = true
		case strings.HasPrefix(v, ">"):
			pushes = append(pushes, v)
		default:
			t.Fatalf("read %q; pushes so far %q", v, pushes)
		}
	}
	if !slices.Equal(pushes, want) {
		t.Fatalf("pushes\n  %q, want\n  %q", pushes, want)
	}
	if got := c.do("RELECT", "OBSERVE", "e"); got != "+OK" {
		t.Fatalf("observing again: %q", got)
	}
	if got := c.do("RELECT", "UNOBSERVE", "e"); got != ":1" {
		t.Fatalf("UNOBSERVE: %q", got)
	}
	if got := c.do("RELECT", "UNOBSERVE", "e"); got != ":0" {
		t.Fatalf("UNOBSERVE again: %q", got)
	}
	if n := strings.Count(fmt.Sprint(eng.Calls()), "WatchElection e"); n != 1 {
		t.Fatalf("%d watches for one election observed twice: %q", n, eng.Calls())
	}
}

// TestElectObserveCap: a connection observes at most
// limits.max_autoextend_per_conn elections.
func TestElectObserveCap(t *testing.T) {
	lim := harnessLimits
	lim.MaxAutoExtend = 2
	eng := newFakeEngine().on("WatchElection", answer{v: &quorum.Info{}, delay: time.Hour})
	c := newHarness(t, eng, lim).dial(t, 3)
	for _, e := range []string{"a", "b"} {
		if got := c.do("RELECT", "OBSERVE", e); got != "+OK" {
			t.Fatalf("OBSERVE %s: %q", e, got)
		}
	}
	if got := c.do("RELECT", "OBSERVE", "c"); got != "-ERR too many observed elections" {
		t.Fatalf("a third OBSERVE: %q", got)
	}
}
