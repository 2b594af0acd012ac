package commands

import (
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// rwLockCommands are RRLOCK, RRUNLOCK and RREXTEND.
func rwLockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	cmds := []*proxy.Command{
		{
			Name: "rrlock", Result: proxy.ResultNull, Concurrent: plainAcquire, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, Blocks: hasWait, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: acquireHandler(eng, k, lockCall(quorum.Read, "rrlock", lim), sharedReply),
			Doc: proxy.Doc{
				Summary: "Acquires a shared (read) lock on a quorum of masters: readers share, writers exclude. Returns [token, validity], or nil if a writer holds or waits.",
				Args:    lockArgDocs(),
			},
		},
	}
	return append(cmds, releaseExtend(eng, k, lim, quorum.Read, "rrunlock", "rrextend", "a read lock")...)
}
