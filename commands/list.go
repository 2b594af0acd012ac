package commands

import (
	"context"
	"strconv"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// errBadCursor is Redis's SCAN wording for a cursor it did not give.
var errBadCursor = proxy.Errorf("invalid cursor")

// maxListCount bounds RLOCKLIST's COUNT: a page asks the masters about
// each primitive it meets.
const maxListCount = 10000

// listCommands is RLOCKLIST, the operator's view of what is held.
func listCommands(eng Engine) []*proxy.Command {
	return []*proxy.Command{{
		Name: "rlocklist", Concurrent: always, Arity: -2,
		Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			a := proxy.NewArgs(args)
			c, err := a.Next()
			if err != nil {
				return nil, err
			}
			cursor, err := strconv.ParseUint(string(c), 10, 64)
			if err != nil {
				return nil, errBadCursor
			}
			count, pattern := int64(10), ""
			seen := map[string]bool{}
			for a.More() {
				opt := a.Option()
				if seen[opt] {
					return nil, proxy.ErrSyntax
				}
				seen[opt] = true
				switch opt {
				case "MATCH":
					if pattern, err = a.String(); err != nil {
						return nil, err
					}
				case "COUNT":
					if count, err = a.Int(); err != nil {
						return nil, err
					}
					if count < 1 {
						return nil, proxy.ErrSyntax
					}
					if count > maxListCount {
						return nil, proxy.Errorf("count must be 1 to %d", maxListCount)
					}
				default:
					return nil, proxy.ErrSyntax
				}
			}
			match := func(name string) bool {
				return (pattern == "" || proxy.GlobMatch(pattern, []byte(name))) && (sess == nil || sess.Allows(name))
			}
			next, entries, err := eng.Operator.List(ctx, cursor, int(count), match)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(entries))
			for i, e := range entries {
				out[i] = []any{e.Name, string(e.Kind), ttlMs(e.TTL), int64(e.Fence), int64(e.Holders), int64(e.Waiters)}
			}
			return []any{strconv.FormatUint(next, 10), out}, nil
		},
		Doc: proxy.Doc{
			Summary: "Pages through the live locks, read locks, semaphores, latches and elections a quorum of masters hold, like SCAN (cursor 0 starts and ends). Returns [next cursor, [[name, kind, ttl_ms, fence, holders, waiters], ...]].",
			Args: []proxy.ArgDoc{{Name: "cursor", Type: "integer"},
				{Name: "pattern", Type: "pattern", Token: "MATCH", Optional: true},
				{Name: "count", Type: "integer", Token: "COUNT", Optional: true}},
		},
	}}
}

// ttlMs is a ttl in ms, -1 for none.
func ttlMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}
