package commands

import (
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

var errNumkeys = proxy.Errorf("numkeys should be greater than 0")

// multiLockArgs are RMULTILOCK's arguments.
type multiLockArgs struct {
	lockArgs
	resources []string
}

// parseMultiLock parses "ttl numkeys resource... [WAIT wait] [TOKEN
// token]". numkeys beyond the arguments given is a syntax error, as in
// Redis's own numkeys commands (ZUNION, LMPOP), which also bounds it by
// limits.max_args.
func parseMultiLock(args [][]byte, lim Limits) (multiLockArgs, error) {
	a := proxy.NewArgs(args)
	var out multiLockArgs
	var err error
	if out.ttl, err = ttl(a, "rmultilock", lim); err != nil {
		return out, err
	}
	if out.resources, err = numkeysResources(a); err != nil {
		return out, err
	}
	if err = lockOptions(a, lim, &out.lockArgs); err == nil && out.reentrant {
		err = proxy.ErrSyntax // RLOCK's option only
	}
	return out, err
}

// numkeysResources reads "numkeys resource...".
func numkeysResources(a *proxy.Args) ([]string, error) {
	n, err := a.Int()
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errNumkeys
	}
	if n > int64(a.Left()) {
		return nil, proxy.ErrSyntax
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = resource(a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restResources reads resources to the end of a (at least one: the arity
// check made sure there is one).
func restResources(a *proxy.Args) ([]string, error) {
	out := make([]string, 0, a.Left())
	for a.More() {
		r, err := resource(a)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// multiLockKeys locates RMULTILOCK's resources for the ACL check: args[3]
// onwards, numkeys of them. A malformed numkeys yields none; the handler
// then refuses the command before anything reaches the masters.
func multiLockKeys(args [][]byte) [][]byte {
	if len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 1 || n > len(args)-3 {
		return nil
	}
	return args[3 : 3+n]
}

// multiLockCommands are RMULTILOCK, RMULTIUNLOCK and RMULTIEXTEND.
func multiLockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	return []*proxy.Command{
		{
			Name: "rmultilock", Result: proxy.ResultNull, Concurrent: plainAcquire, Arity: -4, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, Keys: multiLockKeys,
			Handler: acquireHandler(eng, k, func(args [][]byte) (acquireCall, error) {
				ma, err := parseMultiLock(args, lim)
				if err != nil {
					return acquireCall{}, err
				}
				return acquireCall{req: quorum.Request{Primitive: quorum.Lock, Resources: ma.resources, TTL: ma.ttl, Wait: ma.wait, Token: ma.token}, auto: ma.auto}, nil
			}, func(l *quorum.Lease, v int64) any {
				fences := make([]any, len(l.Fences))
				for i, f := range l.Fences {
					fences[i] = f
				}
				return []any{l.Token, v, fences}
			}),
			Doc: proxy.Doc{
				Summary: "Acquires every resource as one lock, all or nothing, on a quorum of masters. Returns [token, validity, [fence, ...]], or nil if any is held.",
				Args: []proxy.ArgDoc{
					{Name: "ttl", Type: "integer"},
					{Name: "numkeys", Type: "integer"},
					{Name: "resource", Type: "key", Multiple: true},
					{Name: "wait", Type: "integer", Token: "WAIT", Optional: true},
					{Name: "token", Type: "string", Token: "TOKEN", Optional: true},
					{Name: "autoextend", Type: "pure-token", Token: "AUTOEXTEND", Optional: true},
				},
			},
		},
		{
			Name: "rmultiunlock", Result: proxy.ResultZero, Concurrent: always, Arity: -3, Flags: proxy.FlagWrite, FirstKey: 2, LastKey: -1, Step: 1,
			Handler: releaseHandler(eng, k, func(a *proxy.Args) (*quorum.Lease, error) {
				t, err := token(a)
				if err != nil {
					return nil, err
				}
				rs, err := restResources(a)
				if err != nil {
					return nil, err
				}
				return &quorum.Lease{Primitive: quorum.Lock, Resources: rs, Token: t}, nil
			}),
			Doc: proxy.Doc{
				Summary: "Releases every resource held with token. Returns 1 if all were held on a quorum up to the release, else 0.",
				Args:    []proxy.ArgDoc{{Name: "token", Type: "string"}, {Name: "resource", Type: "key", Multiple: true}},
			},
		},
		{
			Name: "rmultiextend", Result: proxy.ResultNull, Arity: -4, Flags: proxy.FlagWrite, FirstKey: 3, LastKey: -1, Step: 1,
			Handler: extendHandler(eng, k, func(a *proxy.Args) (*quorum.Lease, time.Duration, error) {
				t, err := token(a)
				if err != nil {
					return nil, 0, err
				}
				d, err := ttl(a, "rmultiextend", lim)
				if err != nil {
					return nil, 0, err
				}
				rs, err := restResources(a)
				if err != nil {
					return nil, 0, err
				}
				return &quorum.Lease{Primitive: quorum.Lock, Resources: rs, Token: t}, d, nil
			}),
			Doc: proxy.Doc{
				Summary: "Resets the ttl of every resource held with token. Returns the new validity, or nil if any could not be extended on a quorum.",
				Args:    []proxy.ArgDoc{{Name: "token", Type: "string"}, {Name: "ttl", Type: "integer"}, {Name: "resource", Type: "key", Multiple: true}},
			},
		},
	}
}
