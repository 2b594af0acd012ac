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

func latchName(a *proxy.Args) (string, error) { return nonEmpty(a, errEmptyLatch) }

// latchHandler serves a latch operation: the latch's name, then what
// read takes from the rest of the arguments into the request.
func latchHandler(eng Engine, op quorum.LatchOp, read func(a *proxy.Args, req *quorum.LatchRequest) error) proxy.Handler {
	return func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
		a := proxy.NewArgs(args)
		req := quorum.LatchRequest{Op: op}
		var err error
		if req.Name, err = latchName(a); err != nil {
			return nil, err
		}
		if err := read(a, &req); err != nil {
			return nil, err
		}
		n, err := eng.Latch(ctx, req)
		if err != nil {
			return nil, err
		}
		return int64(n), nil
	}
}

// countHandler serves a count command (RSEMCOUNT, RLATCHCOUNT): the
// count Info reports for the name read by name.
func countHandler(eng Engine, p quorum.Primitive, name func(a *proxy.Args) (string, error)) proxy.Handler {
	return func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
		n, err := name(proxy.NewArgs(args))
		if err != nil {
			return nil, err
		}
		info, err := eng.Info(ctx, p, n)
		if err != nil {
			return nil, err
		}
		return int64(info.Count), nil
	}
}

// latchCommands are RLATCH, RLATCHDOWN, RLATCHWAIT and RLATCHCOUNT.
func latchCommands(eng Engine, lim Limits) []*proxy.Command {
	maxCount := max(lim.MaxLatchCount, 1)
	errCount := proxy.Errorf("count must be 1 to %d (limits.max_args)", maxCount)
	return []*proxy.Command{
		{
			Name: "rlatch", Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: latchHandler(eng, quorum.LatchCreate, func(a *proxy.Args, req *quorum.LatchRequest) error {
				n, err := a.Int()
				if err != nil {
					return err
				}
				if n < 1 || n > int64(maxCount) {
					return errCount
				}
				req.Count = int(n)
				req.TTL, err = ttl(a, "rlatch", lim)
				return err
			}),
			Doc: proxy.Doc{
				Summary: "Creates a count-down latch waiting for count arrivals, living ttl. Returns 1 if created, 0 if it exists with that count.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "count", Type: "integer"}, {Name: "ttl", Type: "integer"}},
			},
		},
		{
			Name: "rlatchdown", Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: latchHandler(eng, quorum.LatchDown, func(a *proxy.Args, req *quorum.LatchRequest) (err error) {
				req.Token, err = token(a)
				return err
			}),
			Doc: proxy.Doc{
				Summary: "Records one arrival at a latch, once per token. Returns the arrivals still missing as a quorum sees them (0: open).",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: "rlatchwait", Result: proxy.ResultZero, Arity: 3, Flags: proxy.FlagMayBlock, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: latchHandler(eng, quorum.LatchWait, func(a *proxy.Args, req *quorum.LatchRequest) (err error) {
				req.Wait, err = wait(a, lim)
				return err
			}),
			Doc: proxy.Doc{
				Summary: "Waits up to wait ms until the latch is open on a quorum. Returns 1 if open, 0 if the wait ran out.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}, {Name: "wait", Type: "integer"}},
			},
		},
		{
			Name: "rlatchcount", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: countHandler(eng, quorum.Latch, latchName),
			Doc: proxy.Doc{
				Summary: "Returns the arrivals the latch still misses, as a quorum of masters sees them.",
				Args:    []proxy.ArgDoc{{Name: "latch", Type: "key"}},
			},
		},
	}
}
