package commands

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// TestEveryPrimitiveHasCommands is the commands' part of "How to add a
// primitive" (quorum/doc.go): every primitive the engine registers
// (quorum.Primitives) is reached by a command of the table, and every
// command of the table has its COMMAND DOCS. A primitive added to the
// engine without a command, or without a row here, fails it.
func TestEveryPrimitiveHasCommands(t *testing.T) {
	lim := harnessLimits
	lim.DropIn = true
	// One invocation per primitive that must reach the engine as it.
	examples := map[quorum.Primitive][]string{
		quorum.Lock:      {"RLOCK", "r", "1000"},
		quorum.Fair:      {"RFAIRLOCK", "r", "1000"},
		quorum.Read:      {"RRLOCK", "r", "1000"},
		quorum.Semaphore: {"RSEMACQUIRE", "s", "2", "1000"},
		quorum.SetNX:     {"SET", "k", "v", "NX", "PX", "1000"},
		quorum.Latch:     {"RLATCHCOUNT", "l"},
		quorum.Election:  {"RELECT", "CAMPAIGN", "e", "1000", "v"},
	}
	for _, p := range quorum.Primitives() {
		t.Run(string(p), func(t *testing.T) {
			ex, ok := examples[p]
			if !ok {
				t.Fatalf("primitive %q has no command example here: give it its commands (commands/<family>.go, see quorum/doc.go) and a row", p)
			}
			eng := newFakeEngine()
			c := newHarness(t, eng, lim).dial(t, 2)
			reply := c.do(ex...)
			for _, call := range eng.Calls() {
				if f := strings.Fields(call); len(f) > 1 && f[1] == string(p) {
					return
				}
			}
			t.Fatalf("%q answered %q and reached the engine as %q, never as %s", ex, reply, eng.Calls(), p)
		})
	}
	cmds, _ := AllWithInfo(newFakeEngine().engine(), lim)
	for _, c := range cmds {
		if c.Doc.Summary == "" || c.Doc.Since == "" || c.Doc.Group == "" {
			t.Errorf("%s has no COMMAND DOCS (summary, since, group): %+v", c.Name, c.Doc)
		}
		if c.Arity != 1 && c.Arity != -1 && len(c.Doc.Args) == 0 && !strings.HasPrefix(c.Doc.Summary, "Drop-in mode") {
			t.Errorf("%s takes arguments but COMMAND DOCS names none", c.Name)
		}
	}
}
