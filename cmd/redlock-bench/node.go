package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// nodeScript is node-redlock's driver (tests/clients/redlock-cycles.js),
// run with the Node.js modules that `make clients` installs beside it.
const nodeScript = "tests/clients/redlock-cycles.js"

// nodeRedlockDriver is node-redlock v5 on ioredis, the fastest client
// library measured so far at one worker, as a peer of the proxy: an
// external driver, run as one node process per cell (its event loop is the
// client's whole cost: the CPU it reports over the cell counts as the
// client's). It says why, and returns false, when node or the modules are
// missing.
func (e *env) nodeRedlockDriver() (driver, bool) {
	if _, err := exec.LookPath("node"); err != nil {
		return driver{}, false
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(nodeScript), "node_modules", "redlock")); err != nil {
		return driver{}, false
	}
	addrs := strings.Join(e.addrs, ",")
	return driver{
		name: "node-redlock",
		external: func(c, k int, d, ttl time.Duration) (result, time.Duration, error) {
			cmd := exec.Command("node", filepath.Base(nodeScript), addrs, strconv.Itoa(c), strconv.Itoa(k),
				strconv.FormatInt(d.Milliseconds(), 10), strconv.FormatInt(ttl.Milliseconds(), 10))
			cmd.Dir = filepath.Dir(nodeScript)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return result{}, 0, fmt.Errorf("node-redlock: %w", err)
			}
			var v struct {
				Cycles, NotGranted, Errors int64
				Seconds                    float64
				CPU                        int64
				Acq                        [3]int64
				Unl                        [2]int64
				FirstErr                   string
			}
			if err := json.Unmarshal(out, &v); err != nil {
				return result{}, 0, fmt.Errorf("node-redlock: %q: %w", out, err)
			}
			r := result{
				name:       "node-redlock",
				rate:       float64(v.Cycles) / v.Seconds,
				notGranted: v.NotGranted,
				errors:     v.Errors,
			}
			for i, x := range v.Acq {
				r.acq[i] = time.Duration(x) * time.Microsecond
			}
			for i, x := range v.Unl {
				r.unl[i] = time.Duration(x) * time.Microsecond
			}
			if v.FirstErr != "" {
				r.firstErr = fmt.Errorf("%s", v.FirstErr)
			}
			return r, time.Duration(v.CPU) * time.Microsecond, nil
		},
		close: func() {},
	}, true
}
