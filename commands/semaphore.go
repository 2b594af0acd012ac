package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

var (
	errEmptySemaphore = proxy.Errorf("semaphore name must not be empty")
	errLimitRange     = proxy.Errorf("limit must be 1 to %d", quorum.MaxSemaphoreLimit)
	errCountRange     = proxy.Errorf("count must be 1 to the limit")
)

// semArgs are RSEMACQUIRE's arguments.
type semArgs struct {
	name  string
	limit int
	count int
	ttl   time.Duration
	wait  time.Duration
	token string
	auto  bool
}

func semaphore(a *proxy.Args) (string, error) { return nonEmpty(a, errEmptySemaphore) }

// parseSemAcquire parses "semaphore [limit] ttl [COUNT n] [WAIT wait]
// [TOKEN token] [AUTOEXTEND]": the limit is given when the argument after
// the next is an integer too (no option is), else limit is 0 (the
// masters' stored limit).
func parseSemAcquire(args [][]byte, lim Limits) (semArgs, error) {
	a := proxy.NewArgs(args)
	out := semArgs{count: 1}
	var err error
	if out.name, err = semaphore(a); err != nil {
		return out, err
	}
	l := int64(quorum.MaxSemaphoreLimit) // the bound of COUNT when none is given
	if len(args) >= 3 {
		if _, given := proxy.ParseInt(args[2]); given {
			if l, err = a.Int(); err != nil {
				return out, err
			}
			if l < 1 || l > quorum.MaxSemaphoreLimit {
				return out, errLimitRange
			}
			out.limit = int(l)
		}
	}
	if out.ttl, err = ttl(a, "rsemacquire", lim); err != nil {
		return out, err
	}
	seen := map[string]bool{}
	for a.More() {
		opt := a.Option()
		if seen[opt] {
			return out, proxy.ErrSyntax
		}
		seen[opt] = true
		switch opt {
		case "COUNT":
			if !a.More() {
				return out, proxy.ErrSyntax
			}
			n, err := a.Int()
			if err != nil {
				return out, err
			}
			if n < 1 || n > l {
				return out, errCountRange
			}
			out.count = int(n)
		case "WAIT":
			if out.wait, err = wait(a, lim); err != nil {
				return out, err
			}
		case "TOKEN":
			if out.token, err = token(a); err != nil {
				return out, err
			}
		case "AUTOEXTEND":
			out.auto = true
		default:
			return out, proxy.ErrSyntax
		}
	}
	return out, nil
}

// semaphoreCommands are RSEMACQUIRE, RSEMRELEASE, RSEMEXTEND and RSEMCOUNT.
func semaphoreCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	return []*proxy.Command{
		{
			Name: "rsemacquire", Result: proxy.ResultNull, Concurrent: plainAcquire, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: acquireHandler(eng, k, func(args [][]byte) (acquireCall, error) {
				sa, err := parseSemAcquire(args, lim)
				if err != nil {
					return acquireCall{}, err
				}
				return acquireCall{req: quorum.Request{Primitive: quorum.Semaphore, Resources: []string{sa.name}, Options: quorum.SemaphoreOptions{Limit: sa.limit, Count: sa.count}, TTL: sa.ttl, Wait: sa.wait, Token: sa.token}, auto: sa.auto}, nil
			}, sharedReply),
			Doc: proxy.Doc{
				Summary: "Takes permits of a semaphore of limit permits (without limit: the limit stored by RSEMSET or by the semaphore's use) on a quorum of masters. Returns [token, validity], or nil if too few are free.",
				Args: []proxy.ArgDoc{
					{Name: "semaphore", Type: "key"},
					{Name: "limit", Type: "integer", Optional: true},
					{Name: "ttl", Type: "integer"},
					{Name: "count", Type: "integer", Token: "COUNT", Optional: true},
					{Name: "wait", Type: "integer", Token: "WAIT", Optional: true},
					{Name: "token", Type: "string", Token: "TOKEN", Optional: true},
					{Name: "autoextend", Type: "pure-token", Token: "AUTOEXTEND", Optional: true},
				},
			},
		},
		{
			Name: "rsemrelease", Result: proxy.ResultZero, Concurrent: always, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: releaseHandler(eng, k, semLease),
			Doc: proxy.Doc{
				Summary: "Releases the permits held with token. Returns 1 if they were held on a quorum up to the release, else 0.",
				Args:    []proxy.ArgDoc{{Name: "semaphore", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: "rsemextend", Result: proxy.ResultNull, Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: extendHandler(eng, k, func(a *proxy.Args) (*quorum.Lease, time.Duration, error) {
				l, err := semLease(a)
				if err != nil {
					return nil, 0, err
				}
				d, err := ttl(a, "rsemextend", lim)
				if err != nil {
					return nil, 0, err
				}
				return l, d, nil
			}),
			Doc: proxy.Doc{
				Summary: "Resets the ttl of the permits held with token. Returns the new validity, or nil if they are lost.",
				Args:    []proxy.ArgDoc{{Name: "semaphore", Type: "key"}, {Name: "token", Type: "string"}, {Name: "ttl", Type: "integer"}},
			},
		},
		{
			Name: "rsemset", Result: proxy.ResultOK, Arity: -3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				name, limit, keep, err := parseSemSet(args)
				if err != nil {
					return nil, err
				}
				if err := eng.Semaphores.Set(ctx, name, limit, keep); err != nil {
					return nil, err
				}
				return proxy.OK, nil
			},
			Doc: proxy.Doc{
				Summary: "Stores the limit of a semaphore on the masters, kept while it is in use and keep ms (default one day) after its last grant. Lowering it revokes no permit; raising it wakes waiters. Returns OK.",
				Args: []proxy.ArgDoc{
					{Name: "semaphore", Type: "key"},
					{Name: "limit", Type: "integer"},
					{Name: "keep", Type: "integer", Token: "KEEP", Optional: true},
				},
			},
		},
		{
			Name: "rsemcount", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: countHandler(eng, quorum.Semaphore, semaphore),
			Doc: proxy.Doc{
				Summary: "Returns how many permits of the semaphore have a live grant, as a quorum of masters sees them.",
				Args:    []proxy.ArgDoc{{Name: "semaphore", Type: "key"}},
			},
		},
	}
}

// maxSemKeep bounds RSEMSET's KEEP.
const maxSemKeep = 30 * 24 * time.Hour

// parseSemSet parses "semaphore limit [KEEP ms]".
func parseSemSet(args [][]byte) (name string, limit int, keep time.Duration, err error) {
	a := proxy.NewArgs(args)
	if name, err = semaphore(a); err != nil {
		return "", 0, 0, err
	}
	l, err := a.Int()
	if err != nil {
		return "", 0, 0, err
	}
	if l < 1 || l > quorum.MaxSemaphoreLimit {
		return "", 0, 0, errLimitRange
	}
	if a.More() {
		if a.Option() != "KEEP" || !a.More() {
			return "", 0, 0, proxy.ErrSyntax
		}
		k, err := a.Int()
		if err != nil {
			return "", 0, 0, err
		}
		if k < 1 || k > maxSemKeep.Milliseconds() {
			return "", 0, 0, proxy.Errorf("invalid expire time in 'rsemset' command (KEEP is 1 to %d ms)", maxSemKeep.Milliseconds())
		}
		keep = time.Duration(k) * time.Millisecond
	}
	if err := a.Done(); err != nil {
		return "", 0, 0, err
	}
	return name, int(l), keep, nil
}

// semLease reads "semaphore token" into a semaphore lease.
func semLease(a *proxy.Args) (*quorum.Lease, error) {
	s, err := semaphore(a)
	if err != nil {
		return nil, err
	}
	t, err := token(a)
	if err != nil {
		return nil, err
	}
	return &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{s}, Token: t}, nil
}
