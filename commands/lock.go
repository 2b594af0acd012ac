package commands

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// MaxTokenLen is the longest TOKEN a client may choose, in bytes.
const MaxTokenLen = 128

// Limits bound what clients may ask for.
type Limits struct {
	// MaxTTL is the longest ttl (limits.max_ttl).
	MaxTTL time.Duration
	// MaxWait is the longest WAIT (limits.max_wait).
	MaxWait time.Duration
	// MaxLatchCount is the largest latch count (limits.max_args).
	MaxLatchCount int
	// MaxAutoExtend caps the AUTOEXTEND leases one connection keeps
	// (limits.max_autoextend_per_conn).
	MaxAutoExtend int
	// Leases, if set, is told about auto-extended leases.
	Leases LeaseObserver
	// DropIn serves the Redis commands of lock libraries written for one
	// Redis (config dropin).
	DropIn bool
	// DropinScripts, if set, is told each time a drop-in script runs, by
	// its shape (acquire, release, extend, check, semacquire, semrelease,
	// semextend, forcerelease, hashacquire, hashextend, hashrelease).
	DropinScripts func(name string)
	// DropinRefused, if set, is told each time a drop-in script is refused
	// (EVAL, EVALSHA), with the lock operation it reads as (extend,
	// release, ..., or "unknown") and whether it names a lock this proxy
	// granted and that is still valid, with the holder's value among its
	// arguments (holds).
	DropinRefused func(expected string, holds bool)
	// Log, if set, gets each drop-in script refused, once per script.
	Log *slog.Logger
	// Publisher publishes the PUBLISH that ends a drop-in lock script (see
	// Publisher); nil publishes nothing.
	Publisher Publisher
	// DropinDeclared are the scripts the operator declared (config
	// dropin_scripts), for those the recogniser cannot place.
	DropinDeclared []DeclaredScript
}

// lockArgs are RLOCK's arguments.
type lockArgs struct {
	resource string
	ttl      time.Duration
	wait     time.Duration
	token    string
	auto     bool // AUTOEXTEND
	// reentrant: REENTRANT, one more hold of the token's lock (RLOCK).
	reentrant bool
}

// parseLock parses "resource ttl [WAIT wait] [TOKEN token]" for command
// name (used in the expire-time error).
func parseLock(name string, args [][]byte, lim Limits) (lockArgs, error) {
	a := proxy.NewArgs(args)
	var out lockArgs
	var err error
	if out.resource, err = resource(a); err != nil {
		return out, err
	}
	if out.ttl, err = ttl(a, name, lim); err != nil {
		return out, err
	}
	err = lockOptions(a, lim, &out)
	return out, err
}

// lockOptions parses the options of an acquire, "[WAIT wait] [TOKEN
// token] [AUTOEXTEND]" in any order, each at most once, to the end of a.
func lockOptions(a *proxy.Args, lim Limits, out *lockArgs) (err error) {
	seen := map[string]bool{}
	for a.More() {
		opt := a.Option()
		if seen[opt] {
			return proxy.ErrSyntax
		}
		seen[opt] = true
		switch opt {
		case "WAIT":
			if out.wait, err = wait(a, lim); err != nil {
				return err
			}
		case "TOKEN":
			if out.token, err = token(a); err != nil {
				return err
			}
		case "AUTOEXTEND":
			out.auto = true
		case "REENTRANT":
			out.reentrant = true
		default:
			return proxy.ErrSyntax
		}
	}
	return nil
}

func resource(a *proxy.Args) (string, error) { return nonEmpty(a, errEmptyResource) }

// nonEmpty reads a name that must not be empty (else errEmpty).
func nonEmpty(a *proxy.Args, errEmpty error) (string, error) {
	r, err := a.String()
	if err != nil {
		return "", err
	}
	if r == "" {
		return "", errEmpty
	}
	return r, nil
}

// resourceToken reads "resource token", the start of RUNLOCK and REXTEND.
func resourceToken(a *proxy.Args) (string, string, error) {
	r, err := resource(a)
	if err != nil {
		return "", "", err
	}
	t, err := token(a)
	return r, t, err
}

func ttl(a *proxy.Args, name string, lim Limits) (time.Duration, error) {
	n, err := a.Int()
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, proxy.Errorf("invalid expire time in '%s' command", name)
	}
	if n > lim.MaxTTL.Milliseconds() {
		// Redis's wording first, then the bound that refused it.
		return 0, proxy.Errorf("invalid expire time in '%s' command (limits.max_ttl is %v)", name, lim.MaxTTL)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func wait(a *proxy.Args, lim Limits) (time.Duration, error) {
	if !a.More() {
		return 0, proxy.ErrSyntax
	}
	n, err := a.Int()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errWaitNegative
	}
	if n > lim.MaxWait.Milliseconds() {
		return 0, proxy.Errorf("timeout is out of range (limits.max_wait is %v)", lim.MaxWait)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func token(a *proxy.Args) (string, error) {
	t, err := a.String()
	if err != nil {
		return "", err
	}
	if len(t) == 0 || len(t) > MaxTokenLen {
		return "", errTokenLen
	}
	return t, nil
}

// hasWait reports whether an acquire's arguments may ask to wait: some
// argument after the name is WAIT. A TOKEN or resource spelled "wait" makes
// it answer true for a command that will not wait, which only costs the
// connection watch (see proxy.Command.Blocks).
func hasWait(args [][]byte) bool {
	for _, a := range args[1:] {
		if len(a) == 4 && strings.EqualFold(string(a), "wait") {
			return true
		}
	}
	return false
}

// plainAcquire tells which acquires may run beside the other pipelined
// commands of their connection (proxy.Command.Concurrent): those that do
// not wait and do not ask for AUTOEXTEND (the connection's leases keep the
// order of their commands).
func plainAcquire(args [][]byte) bool {
	for _, a := range args[1:] {
		if (len(a) == 4 && strings.EqualFold(string(a), "wait")) || (len(a) == 10 && strings.EqualFold(string(a), "autoextend")) {
			return false
		}
	}
	return true
}

// always lets every invocation run beside the other pipelined commands of
// its connection (proxy.Command.Concurrent).
func always([][]byte) bool { return true }

// lockCommands are RLOCK, RFAIRLOCK, RUNLOCK and REXTEND.
func lockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	cmds := []*proxy.Command{
		lockLike(eng, k, lim, quorum.Lock, "rlock", plainAcquire, lockReply,
			"Acquires an exclusive lock on a quorum of masters. Returns [token, validity, fence], or nil if held."),
		lockLike(eng, k, lim, quorum.Fair, "rfairlock", nil, lockReply,
			"Acquires a lock like RLOCK, but waiters are granted in arrival order across every proxy. Returns [token, validity, fence], or nil if held."),
		{
			Name: "rlockinfo", Concurrent: always, Arity: -2, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				a := proxy.NewArgs(args)
				r, err := resource(a)
				if err != nil {
					return nil, err
				}
				var tok string
				if a.More() {
					if tok, err = token(a); err != nil {
						return nil, err
					}
				}
				if a.More() {
					return nil, proxy.ErrSyntax
				}
				info, err := eng.Info(ctx, quorum.Lock, r)
				if err != nil {
					return nil, err
				}
				n, place, err := eng.Operator.Waiters(ctx, quorum.Lock, r, tok)
				if err != nil {
					return nil, err
				}
				m := lockInfoReply(info, tok, len(args) > 1, k.auto(sess, r, tok))
				m = append(m, proxy.KV{Key: "waiters", Value: int64(n)})
				if len(args) > 1 {
					m = append(m, proxy.KV{Key: "place", Value: int64(place)})
				}
				return m, nil
			},
			Doc: proxy.Doc{
				Summary: "Reports what a quorum of masters say about a lock now: held, ttl_ms, fence or readers, with a token whether it is yours, then how many calls wait for it, and with a token its place in the fair queue.",
				Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string", Optional: true}},
			},
		},
	}
	cmds[0].Doc.Args = append(cmds[0].Doc.Args, proxy.ArgDoc{Name: "reentrant", Type: "pure-token", Token: "REENTRANT", Optional: true})
	return append(cmds, releaseExtend(eng, k, lim, quorum.Lock, "runlock", "rextend", "a lock")...)
}

// decaying is an extend's reply: the validity v the masters gave, counted
// down from at (when the extend returned) to when the reply is written,
// which inside EXEC may be well after it ran; nil (lost) once less than a
// millisecond is left.
func decaying(v time.Duration, at time.Time) proxy.Late {
	return func() any {
		left := (v - time.Since(at)).Milliseconds()
		if left < 1 {
			return nil
		}
		return left
	}
}

// validity re-computes the lease's validity just before the reply is
// written. A lease with less than a millisecond left, or whose client left
// while it was granted, is no grant: it is given back with abandon and the
// caller sees the not-granted reply.
func validity(ctx context.Context, l *quorum.Lease, abandon func(context.Context, *quorum.Lease)) (int64, bool) {
	v := l.ValidityAt(time.Now()).Milliseconds()
	if v < 1 || ctx.Err() != nil {
		abandon(ctx, l)
		return 0, false
	}
	return v, true
}

// lockInfoReply is RLOCKINFO's map: held, ttl_ms, then fence and holds (a
// writer's) or readers (how many), then with a token mine and autoextend.
func lockInfoReply(li *quorum.Info, token string, withToken, auto bool) proxy.Map {
	ttl := int64(-1)
	if li.Held {
		ttl = li.TTL.Milliseconds()
	}
	m := proxy.Map{{Key: "held", Value: boolInt(li.Held)}, {Key: "ttl_ms", Value: ttl}}
	switch {
	case li.Held && li.Readers != nil:
		m = append(m, proxy.KV{Key: "readers", Value: int64(len(li.Readers))})
	case li.Held && li.Fence > 0:
		m = append(m, proxy.KV{Key: "fence", Value: int64(li.Fence)})
	}
	if li.Held && li.Holder != "" {
		m = append(m, proxy.KV{Key: "holds", Value: int64(li.Holds)})
	}
	if withToken {
		mine := li.Mine(token)
		m = append(m, proxy.KV{Key: "mine", Value: boolInt(mine)}, proxy.KV{Key: "autoextend", Value: boolInt(mine && auto)})
	}
	return m
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// lockArgDocs are the arguments of RLOCK, RFAIRLOCK and RRLOCK, for
// COMMAND DOCS.
func lockArgDocs() []proxy.ArgDoc {
	return []proxy.ArgDoc{
		{Name: "resource", Type: "key"},
		{Name: "ttl", Type: "integer"},
		{Name: "wait", Type: "integer", Token: "WAIT", Optional: true},
		{Name: "token", Type: "string", Token: "TOKEN", Optional: true},
		{Name: "autoextend", Type: "pure-token", Token: "AUTOEXTEND", Optional: true},
	}
}
