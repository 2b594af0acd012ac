package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// quarantineCommands is RQUARANTINE, the operator's view of restarted
// masters and the deliberate end of a quarantine (docs/troubleshooting.md,
// "All masters quarantined"). It is an admin command: only a user with
// admin: true (or the default user with the configuration's admin: true)
// may run it.
func quarantineCommands(eng Engine) []*proxy.Command {
	return []*proxy.Command{{
		Name: "rquarantine", Arity: -2, Flags: proxy.FlagAdmin,
		Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			sub := strings.ToUpper(string(args[0]))
			switch {
			case sub == "LIST" && len(args) == 1:
				st := eng.Operator.Status().Masters
				out := make([]any, len(st))
				for i, s := range st {
					out[i] = quarantineEntry(i, s)
				}
				return out, nil
			case sub == "END" && len(args) == 2:
				by := "an admin"
				if sess != nil {
					by = fmt.Sprintf("user %s from %s (client id %d)", sess.User(), sess.RemoteAddr(), sess.ID())
				}
				s, err := eng.Operator.EndQuarantine(ctx, string(args[1]), by)
				if err != nil {
					return nil, err
				}
				return quarantineEntry(slices.IndexFunc(eng.Operator.Status().Masters, func(m quorum.NodeStatus) bool { return m.Addr == s.Addr }), s), nil
			case sub == "LIST", sub == "END":
				return nil, proxy.WrongArity("rquarantine|" + strings.ToLower(sub))
			}
			return nil, proxy.Errorf("unknown subcommand '%s'. Try RQUARANTINE LIST or RQUARANTINE END <master>.", args[0][:min(len(args[0]), 64)])
		},
		Doc: proxy.Doc{
			Summary: "Admin: LIST each master's state, quarantine left and why; END <master index|addr> ends a restarted master's quarantine (safe only when no grant from before its restart is still live).",
			Args: []proxy.ArgDoc{{Name: "subcommand", Type: "oneof", Args: []proxy.ArgDoc{
				{Name: "list", Type: "pure-token", Token: "LIST"},
				{Name: "end", Type: "block", Args: []proxy.ArgDoc{{Name: "end", Type: "pure-token", Token: "END"}, {Name: "master", Type: "string"}}},
			}}},
		},
	}}
}

// breakCommands is RLOCKBREAK, an operator's hand on a lock: an admin
// command, as RQUARANTINE.
func breakCommands(eng Engine) []*proxy.Command {
	return []*proxy.Command{{
		Name: "rlockbreak", Arity: 2, Flags: proxy.FlagAdmin | proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
		Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			a := proxy.NewArgs(args)
			r, err := resource(a)
			if err != nil {
				return nil, err
			}
			by := "an admin"
			if sess != nil {
				by = fmt.Sprintf("user %s from %s (client id %d)", sess.User(), sess.RemoteAddr(), sess.ID())
			}
			held, err := eng.Operator.Break(ctx, r, by)
			if err != nil {
				return nil, err
			}
			if held {
				return int64(1), nil
			}
			return int64(0), nil
		},
		Doc: proxy.Doc{
			Summary: "Admin: deletes the lock on resource (a writer's or the readers') on every master and makes its fence stale; its holder finds it lost. Returns 1 if a quorum held it, else 0.",
			Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}},
		},
	}}
}

// quarantineEntry is one master in RQUARANTINE's replies.
func quarantineEntry(i int, s quorum.NodeStatus) proxy.Map {
	return proxy.Map{
		{Key: "index", Value: int64(i)},
		{Key: "addr", Value: s.Addr},
		{Key: "state", Value: string(s.State)},
		{Key: "quarantine_ms", Value: s.QuarantineLeft.Milliseconds()},
		{Key: "why", Value: s.Why},
	}
}
