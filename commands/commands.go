package commands

import (
	"fmt"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// since is the proxy version every command of this package first
// appeared in, for COMMAND DOCS.
const since = "0.1.0"

// All returns every lock, semaphore and latch command, for the proxy's
// command table.
// AUTOEXTEND leases are kept per connection by one keeper, shared by the
// commands; a command naming a resource whose lease was lost answers
// -LOST once.
func All(eng Engine, lim Limits) []*proxy.Command {
	cmds, _ := AllWithInfo(eng, lim)
	return cmds
}

// AllWithInfo is All, and the INFO sections of the commands (drop-in
// mode's script counts when lim.DropIn).
func AllWithInfo(eng Engine, lim Limits) ([]*proxy.Command, []proxy.InfoSection) {
	var info []proxy.InfoSection
	k := newKeeper(eng, lim)
	cmds := lockCommands(eng, lim, k)
	cmds = append(cmds, multiLockCommands(eng, lim, k)...)
	cmds = append(cmds, rwLockCommands(eng, lim, k)...)
	cmds = append(cmds, semaphoreCommands(eng, lim, k)...)
	cmds = append(cmds, latchCommands(eng, lim)...)
	cmds = append(cmds, quarantineCommands(eng)...)
	cmds = append(cmds, breakCommands(eng)...)
	cmds = append(cmds, listCommands(eng)...)
	cmds = append(cmds, electCommands(eng, lim, k)...)
	if lim.DropIn {
		d := newDropin(eng, k, lim)
		cmds = append(cmds, dropinCommands(eng, lim, k, d)...)
		info = append(info, d.info())
	}
	for _, c := range cmds {
		k.lostGuard(c)
		c.Doc.Since, c.Doc.Group = since, "redlock"
	}
	info = append(info, k.info())
	return cmds, info
}

// MastersInfo is the "masters" section of INFO: one line per master, as
// PROTOCOL.md ("Restarted masters") lays it out (with restarts= added
// before last_error), after the quorum figures.
func MastersInfo(eng Engine) proxy.InfoSection {
	return proxy.InfoSection{Name: "masters", Lines: func() []string {
		st := eng.Operator.Status()
		lines := []string{
			fmt.Sprintf("masters:%d", len(st.Masters)),
			fmt.Sprintf("quorum:%d", st.Quorum),
			fmt.Sprintf("masters_up:%d", st.Up()),
		}
		for i, s := range st.Masters {
			lines = append(lines, fmt.Sprintf("master%d:addr=%s,state=%s,quarantine_ms=%d,latency_us=%d,run_id=%s,restarts=%d,last_error=%s",
				i, s.Addr, s.State, s.QuarantineLeft.Milliseconds(), s.Latency/time.Microsecond, s.RunID, s.Restarts, infoText(s.LastError)))
			for j, sh := range s.Shards {
				state := quorum.StateUp
				switch {
				case !sh.Voting:
					state = quorum.StateQuarantined
				case !sh.Up:
					state = quorum.StateDown
				}
				lines = append(lines, fmt.Sprintf("master%d_shard%d:addr=%s,slots=%d,state=%s,quarantine_ms=%d,restarts=%d,failovers=%d,why=%s",
					i, j, sh.Addr, sh.Slots, state, sh.QuarantineLeft.Milliseconds(), sh.Restarts, sh.Failovers, infoText(sh.Why)))
			}
		}
		return lines
	}}
}

// infoText keeps a value on one INFO line and out of the field syntax.
func infoText(s string) string {
	return strings.NewReplacer(",", ";", "\r", " ", "\n", " ").Replace(s)
}
