package commands

import (
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// rwLockCommands are RRLOCK, RRUNLOCK and RREXTEND.
func rwLockCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	cmds := []*proxy.Command{
		lockLike(eng, k, lim, quorum.Read, "rrlock", plainAcquire, sharedReply,
			"Acquires a shared (read) lock on a quorum of masters: readers share, writers exclude. Returns [token, validity], or nil if a writer holds or waits."),
	}
	return append(cmds, releaseExtend(eng, k, lim, quorum.Read, "rrunlock", "rrextend", "a read lock")...)
}
