package commands

import (
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// PlainUnknown is the error for a command not in the table when drop-in
// mode is off: Redis's "unknown command" wording, and for a command that
// drop-in mode serves (GET, SET, EVAL...) a pointer to `dropin: true`, so
// that a lock library written for one Redis tells its user what to turn on.
func PlainUnknown() func(args [][]byte) *proxy.Error {
	served := map[string]bool{}
	for _, c := range dropinCommands(Engine{}, Limits{}, nil, &dropin{}) {
		served[c.Name] = true
	}
	return func(args [][]byte) *proxy.Error {
		e := proxy.UnknownCommand(args)
		if served[strings.ToLower(string(args[0]))] {
			e = proxy.Errorf("%s(served in drop-in mode: set dropin: true in the configuration, see docs/PROTOCOL.md, Drop-in mode)", e.Msg)
		}
		return e
	}
}
