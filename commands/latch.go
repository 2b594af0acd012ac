package commands

import (
	"context"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

var (
	errEmptyLatch = proxy.Errorf("latch name must not be empty")
	errNoLatch    = proxy.Errorf("no such latch")
)

func latchName(a *proxy.Args) (string, error) {
	s, err := a.String()
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", errEmptyLatch
	}
	return s, nil
}

// latchCommands are RLATCH, RLATCHDOWN, RLATCHWAIT and RLATCHCOUNT.
func latchCommands(eng Engine, lim Limits) []*proxy.Command {
	maxCount := max(lim.MaxLatchCount, 1)
	errCount := proxy.Errorf("count must be 1 to %d (limits.max_args)", maxCount)
	return []*proxy.Command{
		{
			Name: "rlatch", Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				a := proxy.NewArgs(args)
				name, err := latchName(a)
				if err != nil {
					return nil, err
				}
				n, err := a.Int()
				if err != nil {
					return nil, err
				}
				if n < 1 || n > int64(maxCount) {
					return nil, errCount
				}
				d, err := ttl(a, "rlatch", lim)
				if err != nil {
					return nil, err
				}
				return latchReply(eng.Latch(ctx, quorum.LatchRequest{Op: quorum.LatchCreate, Name: name, Count: int(n), TTL: d}))
			},
			Doc: proxy.Doc{
				Summary: "Creates a count-down latch waiting for count arrivals, living ttl. Returns 1 if created, 0 if it exists with that count.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "count", Type: "integer"}, {Name: "ttl", Type: "integer"}},
			},
		},
		{
			Name: "rlatchdown", Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				a := proxy.NewArgs(args)
				name, err := latchName(a)
				if err != nil {
					return nil, err
				}
				t, err := token(a)
				if err != nil {
					return nil, err
				}
				return latchReply(eng.Latch(ctx, quorum.LatchRequest{Op: quorum.LatchDown, Name: name, Token: t}))
			},
			Doc: proxy.Doc{
				Summary: "Records one arrival at a latch, once per token. Returns the arrivals still missing as a quorum sees them (0: open).",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: "rlatchwait", Result: proxy.ResultZero, Arity: 3, Flags: proxy.FlagMayBlock, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				a := proxy.NewArgs(args)
				name, err := latchName(a)
				if err != nil {
					return nil, err
				}
				w, err := wait(a, lim)
				if err != nil {
					return nil, err
				}
				return latchReply(eng.Latch(ctx, quorum.LatchRequest{Op: quorum.LatchWait, Name: name, Wait: w}))
			},
			Doc: proxy.Doc{
				Summary: "Waits up to wait ms until the latch is open on a quorum. Returns 1 if open, 0 if the wait ran out.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "wait", Type: "integer"}},
			},
		},
		{
			Name: "rlatchcount", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				name, err := latchName(proxy.NewArgs(args))
				if err != nil {
					return nil, err
				}
				info, err := eng.Info(ctx, quorum.Latch, name)
				if err != nil {
					return nil, err
				}
				return int64(info.Count), nil
			},
			Doc: proxy.Doc{
				Summary: "Returns the arrivals the latch still misses, as a quorum of masters sees them.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}},
			},
		},
	}
}

// latchReply is the reply of a latch operation: its integer answer.
func latchReply(n int, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return int64(n), nil
}
