package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// rwLockCommands are RRLOCK, RRUNLOCK and RREXTEND.
func rwLockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	return []*proxy.Command{
		{
			Name: "rrlock", Result: proxy.ResultNull, Concurrent: plainAcquire, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				la, err := parseLock("rrlock", args, lim)
				if err != nil {
					return nil, err
				}
				if err := k.admitIf(sess, la.auto); err != nil {
					return nil, err
				}
				lease, err := eng.Acquire(ctx, quorum.Request{Primitive: quorum.Read, Resources: []string{la.resource}, TTL: la.ttl, Wait: la.wait, Token: la.token})
				if err != nil || lease == nil {
					return nil, err
				}
				return proxy.Late(func() any {
					v, ok := validity(ctx, lease, eng.Abandon)
					if !ok {
						return nil
					}
					k.keepIf(sess, la.auto, kindRead, lease.Resources, lease.Token, la.ttl, v)
					return []any{lease.Token, v}
				}), nil
			},
			Doc: proxy.Doc{
				Summary: "Acquires a shared (read) lock on a quorum of masters: readers share, writers exclude. Returns [token, validity], or nil if a writer holds or waits.",
				Since:   since, Group: "redlock",
				Args: []proxy.ArgDoc{
					{Name: "resource", Type: "key"},
					{Name: "ttl", Type: "integer"},
					{Name: "wait", Type: "integer", Token: "WAIT", Optional: true},
					{Name: "token", Type: "string", Token: "TOKEN", Optional: true},
					{Name: "autoextend", Type: "pure-token", Token: "AUTOEXTEND", Optional: true},
				},
			},
		},
		{
			Name: "rrunlock", Result: proxy.ResultZero, Concurrent: always, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				r, t, err := resourceToken(proxy.NewArgs(args))
				if err != nil {
					return nil, err
				}
				k.forget(sess, kindRead, []string{r}, t)
				held, err := eng.Release(ctx, &quorum.Lease{Primitive: quorum.Read, Resources: []string{r}, Token: t})
				if err != nil {
					return nil, err
				}
				return boolInt(held), nil
			},
			Doc: proxy.Doc{
				Summary: "Releases a read lock held with token. Returns 1 if it was held on a quorum up to the release, else 0.",
				Since:   since, Group: "redlock",
				Args: []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: "rrextend", Result: proxy.ResultNull, Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				a := proxy.NewArgs(args)
				r, t, err := resourceToken(a)
				if err != nil {
					return nil, err
				}
				d, err := ttl(a, "rrextend", lim)
				if err != nil {
					return nil, err
				}
				v, err := eng.Extend(ctx, &quorum.Lease{Primitive: quorum.Read, Resources: []string{r}, Token: t}, d)
				if err != nil || v <= 0 {
					return nil, err
				}
				k.extended(sess, kindRead, []string{r}, t, d, v)
				return decaying(v, time.Now()), nil
			},
			Doc: proxy.Doc{
				Summary: "Resets the ttl of a read lock held with token. Returns the new validity, or nil if it is lost.",
				Since:   since, Group: "redlock",
				Args: []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}, {Name: "ttl", Type: "integer"}},
			},
		},
	}
}
