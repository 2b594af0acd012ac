package commands

import (
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// rwLockCommands are RRLOCK, RRUNLOCK and RREXTEND.
func rwLockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	return []*proxy.Command{
		{
			Name: "rrlock", Result: proxy.ResultNull, Concurrent: plainAcquire, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: acquireHandler(eng, k, lockCall(quorum.Read, "rrlock", lim), sharedReply),
			Doc: proxy.Doc{
				Summary: "Acquires a shared (read) lock on a quorum of masters: readers share, writers exclude. Returns [token, validity], or nil if a writer holds or waits.",
				Args:    lockArgDocs(),
			},
		},
		{
			Name: "rrunlock", Result: proxy.ResultZero, Concurrent: always, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: releaseHandler(eng, k, single(quorum.Read)),
			Doc: proxy.Doc{
				Summary: "Releases a read lock held with token. Returns 1 if it was held on a quorum up to the release, else 0.",
				Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}},
			},
		},
		{
			Name: "rrextend", Result: proxy.ResultNull, Arity: 4, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: extendHandler(eng, k, singleTTL(quorum.Read, "rrextend", lim)),
			Doc: proxy.Doc{
				Summary: "Resets the ttl of a read lock held with token. Returns the new validity, or nil if it is lost.",
				Args:    []proxy.ArgDoc{{Name: "resource", Type: "key"}, {Name: "token", Type: "string"}, {Name: "ttl", Type: "integer"}},
			},
		},
	}
}
