package main

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

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
