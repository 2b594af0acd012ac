package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// The handlers of every primitive's acquire, release and extend commands
// are these three: a command differs only in how it reads its arguments
// and shapes its reply.

// acquireCall is an acquire command's arguments, read.
type acquireCall struct {
	req  quorum.Request
	auto bool // AUTOEXTEND
}

// acquireHandler serves an acquire command: parse, admit an AUTOEXTEND
// lease, acquire, and, when the reply is written, check that the grant is
// still valid (else give it back: the caller sees nil), keep it alive if
// asked, and shape the reply from the lease and its validity in ms.
func acquireHandler(eng Engine, k *keeper, parse func(args [][]byte) (acquireCall, error), reply func(l *quorum.Lease, v int64) any) proxy.Handler {
	return func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
		c, err := parse(args)
		if err != nil {
			return nil, err
		}
		if err := k.admitIf(sess, c.auto); err != nil {
			return nil, err
		}
		lease, err := eng.Acquire(ctx, c.req)
		if err != nil || lease == nil {
			return nil, err
		}
		return proxy.Late(func() any {
			v, ok := validity(ctx, lease, eng.Abandon)
			if !ok {
				return nil
			}
			k.keepIf(sess, c.auto, lease.Primitive, lease.Resources, lease.Token, c.req.TTL, v)
			return reply(lease, v)
		}), nil
	}
}

// releaseHandler serves a release command: parse the lease named by the
// arguments, stop extending it, release it; 1 if it was held on a quorum
// up to the release, else 0.
func releaseHandler(eng Engine, k *keeper, parse func(a *proxy.Args) (*quorum.Lease, error)) proxy.Handler {
	return func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
		l, err := parse(proxy.NewArgs(args))
		if err != nil {
			return nil, err
		}
		// After the keeper's extension round in flight, if this
		// connection keeps the lease alive: the release follows all of
		// it, re-enrolments included.
		done, err := k.extending(ctx, sess, l.Primitive, l.Resources, l.Token)
		if err != nil {
			return nil, err
		}
		defer done()
		if end := k.validUntil(sess, l.Primitive, l.Resources, l.Token); !end.IsZero() {
			// A lease this connection keeps alive: an undecided release
			// asks again until its validity ends.
			l.Decided = time.Now()
			l.Validity = end.Sub(l.Decided)
		}
		k.forget(sess, l.Primitive, l.Resources, l.Token)
		held, err := eng.Release(ctx, l)
		if err != nil {
			return nil, err
		}
		return boolInt(held), nil
	}
}

// extendHandler serves an extend command: parse the lease and the ttl,
// extend it; the new validity, or nil when it is lost.
func extendHandler(eng Engine, k *keeper, parse func(a *proxy.Args) (*quorum.Lease, time.Duration, error)) proxy.Handler {
	return func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
		l, d, err := parse(proxy.NewArgs(args))
		if err != nil {
			return nil, err
		}
		// After the keeper's extension round in flight, if this
		// connection keeps the lease alive, and before its next.
		done, err := k.extending(ctx, sess, l.Primitive, l.Resources, l.Token)
		if err != nil {
			return nil, err
		}
		defer done()
		if end := k.validUntil(sess, l.Primitive, l.Resources, l.Token); !end.IsZero() {
			// A lease this connection keeps alive: its validity is known.
			l.Decided = time.Now()
			l.Validity = end.Sub(l.Decided)
		}
		v, err := eng.Extend(ctx, l, d)
		if err != nil || v <= 0 {
			return nil, err
		}
		k.extended(sess, l.Primitive, l.Resources, l.Token, d, v)
		return decaying(v, time.Now()), nil
	}
}

// single reads "resource token" into the lease of primitive p.
func single(p quorum.Primitive) func(a *proxy.Args) (*quorum.Lease, error) {
	return func(a *proxy.Args) (*quorum.Lease, error) {
		r, t, err := resourceToken(a)
		if err != nil {
			return nil, err
		}
		return &quorum.Lease{Primitive: p, Resources: []string{r}, Token: t}, nil
	}
}

// singleTTL reads "resource token ttl" into the lease of primitive p and
// the ttl.
func singleTTL(p quorum.Primitive, cmd string, lim Limits) func(a *proxy.Args) (*quorum.Lease, time.Duration, error) {
	return func(a *proxy.Args) (*quorum.Lease, time.Duration, error) {
		l, err := single(p)(a)
		if err != nil {
			return nil, 0, err
		}
		d, err := ttl(a, cmd, lim)
		if err != nil {
			return nil, 0, err
		}
		return l, d, nil
	}
}

// lockCall reads an RLOCK-like command (resource ttl [WAIT] [TOKEN]
// [AUTOEXTEND]) into a request for primitive p.
func lockCall(p quorum.Primitive, cmd string, lim Limits) func(args [][]byte) (acquireCall, error) {
	return func(args [][]byte) (acquireCall, error) {
		la, err := parseLock(cmd, args, lim)
		if err != nil {
			return acquireCall{}, err
		}
		if la.reentrant {
			switch {
			case p != quorum.Lock:
				return acquireCall{}, proxy.ErrSyntax
			case la.token == "":
				return acquireCall{}, errReentrantToken
			case la.auto:
				return acquireCall{}, errReentrantAuto
			}
		}
		return acquireCall{req: quorum.Request{Primitive: p, Resources: []string{la.resource}, TTL: la.ttl, Wait: la.wait, Token: la.token, Options: reentrantOptions(la.reentrant)}, auto: la.auto}, nil
	}
}

// reentrantOptions are a lock request's own options: none unless re-entrant.
func reentrantOptions(reentrant bool) quorum.PrimitiveOptions {
	if !reentrant {
		return nil
	}
	return quorum.LockOptions{Reentrant: true}
}

// lockReply is [token, validity, fence].
func lockReply(l *quorum.Lease, v int64) any { return []any{l.Token, v, l.Fences[0]} }

// sharedReply is [token, validity] (read locks, semaphores).
func sharedReply(l *quorum.Lease, v int64) any { return []any{l.Token, v} }

// releaseExtend are the release and extend commands of a single-resource
// primitive p ("resource token" and "resource token ttl"), named release
// and extend; what names p's grant in their docs ("a lock").
func releaseExtend(eng Engine, k *keeper, lim Limits, p quorum.Primitive, release, extend, what string) []*proxy.Command {
	return []*proxy.Command{
		{
			Name: release, Result: proxy.ResultZero, Concurrent: always, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: releaseHandler(eng, k, single(p)),
			Doc: proxy.Doc{
				Summary: "Releases " + what + " held with token. Returns 1 if it was held on a quorum up to the release, else 0.",
				Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: extend, Result: proxy.ResultNull, Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: extendHandler(eng, k, singleTTL(p, extend, lim)),
			Doc: proxy.Doc{
				Summary: "Resets the ttl of " + what + " held with token. Returns the new validity, or nil if it is lost.",
				Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}, {Name: "ttl", Type: "integer"}},
			},
		},
	}
}

// lockLike is an RLOCK-like acquire command (resource ttl [WAIT wait]
// [TOKEN token] [AUTOEXTEND]) of primitive p: RLOCK, RFAIRLOCK, RRLOCK.
// concurrent may let invocations run beside the connection's other
// pipelined commands (proxy.Command.Concurrent).
func lockLike(eng Engine, k *keeper, lim Limits, p quorum.Primitive, name string, concurrent func([][]byte) bool, reply func(l *quorum.Lease, v int64) any, summary string) *proxy.Command {
	return &proxy.Command{
		Name: name, Result: proxy.ResultNull, Concurrent: concurrent, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, FirstKey: 1, LastKey: 1, Step: 1,
		Handler: acquireHandler(eng, k, lockCall(p, name, lim), reply),
		Doc:     proxy.Doc{Summary: summary, Args: lockArgDocs()},
	}
}
