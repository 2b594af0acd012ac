package main

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// devMasterTimeout is master_timeout under --dev. The embedded masters
// run in the proxy's own process: a pause of the proxy (a collection, a
// busy scheduler on a laptop or a loaded test machine) is a pause of
// every master at once, which the default, sized for masters on their
// own machines, would answer with NOQUORUM.
const devMasterTimeout = 250 * time.Millisecond

// startDevMasters starts n embedded miniredis masters for --dev. Their
// keys expire with the wall clock, as on a real Redis: miniredis's
// ClockTTL advances every ttl by the time elapsed since the last command,
// before each command (and each command a script runs) touches the data,
// so a key is gone exactly when its ttl has passed, never before. TIME,
// which the scripts read, is the wall clock already. Without ClockTTL a
// miniredis ttl only moves with FastForward, and nothing would expire.
func startDevMasters(n int) ([]*miniredis.Miniredis, error) {
	var ms []*miniredis.Miniredis
	for range max(n, 1) {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.Start(); err != nil {
			for _, o := range ms {
				o.Close()
			}
			return nil, fmt.Errorf("dev master: %w", err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}
