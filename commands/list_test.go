package commands

import (
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// TestListReplies: RLOCKLIST's reply (next cursor, then one array per
// entry), its options and their errors, none of which reach the engine.
func TestListReplies(t *testing.T) {
	page := answer{v: listPage{next: 77, entries: []quorum.ListEntry{
		{Name: "r", Kind: quorum.Lock, TTL: 5 * time.Second, Fence: 7, Holders: 1, Waiters: 2},
		{Name: "rr", Kind: quorum.Read, TTL: 4 * time.Second, Holders: 3},
		{Name: "s", Kind: quorum.Semaphore, TTL: -1, Holders: 2, Waiters: 1},
	}}}
	runRows(t, []row{
		{name: "rlocklist page", on: map[string][]answer{"List": {page}}, cmd: cmd("RLOCKLIST", "0"),
			want:  "*2 $2 77 *3 *6 $1 r $4 lock :5000 :7 :1 :2 *6 $2 rr $4 read :4000 :0 :3 :0 *6 $1 s $9 semaphore :-1 :0 :2 :1",
			calls: []string{"List 0 10"}},
		{name: "rlocklist match and count", on: map[string][]answer{"List": {page}}, cmd: cmd("RLOCKLIST", "77", "match", "r*", "COUNT", "500"),
			want:  "*2 $2 77 *2 *6 $1 r $4 lock :5000 :7 :1 :2 *6 $2 rr $4 read :4000 :0 :3 :0",
			calls: []string{"List 77 500"}},
		{name: "rlocklist match with a class", on: map[string][]answer{"List": {page}}, cmd: cmd("RLOCKLIST", "0", "MATCH", "[s]"),
			want: "*2 $2 77 *1 *6 $1 s $9 semaphore :-1 :0 :2 :1", calls: []string{"List 0 10"}},
		{name: "rlocklist end", on: map[string][]answer{"List": {{v: listPage{}}}}, cmd: cmd("RLOCKLIST", "5"), want: "*2 $1 0 *0", calls: []string{"List 5 10"}},
		{name: "rlocklist no quorum", on: map[string][]answer{"List": {failNoQuo}}, cmd: cmd("RLOCKLIST", "0"), want: noQuorumText, calls: []string{"List 0 10"}},
		{name: "rlocklist cursor the engine refuses", on: map[string][]answer{"List": {{err: quorum.ErrBadCursor}}}, cmd: cmd("RLOCKLIST", "3"),
			want: "-ERR invalid cursor", calls: []string{"List 3 10"}},
		{name: "rlocklist bad cursor", cmd: cmd("RLOCKLIST", "x"), want: "-ERR invalid cursor"},
		{name: "rlocklist negative cursor", cmd: cmd("RLOCKLIST", "-1"), want: "-ERR invalid cursor"},
		{name: "rlocklist count 0", cmd: cmd("RLOCKLIST", "0", "COUNT", "0"), want: "-ERR syntax error"},
		{name: "rlocklist count not a number", cmd: cmd("RLOCKLIST", "0", "COUNT", "x"), want: "-ERR value is not an integer or out of range"},
		{name: "rlocklist count too big", cmd: cmd("RLOCKLIST", "0", "COUNT", "10001"), want: "-ERR count must be 1 to 10000"},
		{name: "rlocklist match without pattern", cmd: cmd("RLOCKLIST", "0", "MATCH"), want: "-ERR syntax error"},
		{name: "rlocklist repeated option", cmd: cmd("RLOCKLIST", "0", "COUNT", "5", "COUNT", "6"), want: "-ERR syntax error"},
		{name: "rlocklist unknown option", cmd: cmd("RLOCKLIST", "0", "TYPE", "lock"), want: "-ERR syntax error"},
		{name: "rlocklist arity", cmd: cmd("RLOCKLIST"), want: "-ERR wrong number of arguments for 'rlocklist' command"},
	})
}
