package quorum

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer is a log destination the health loop and the test share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// TestQuorumLostAndRegainedLoggedOnce: when a majority of masters stops
// answering, the health loop logs "quorum lost" once, however many ticks
// it lasts, and "quorum regained" once when they are back.
func TestQuorumLostAndRegainedLoggedOnce(t *testing.T) {
	t.Parallel()
	const tick = 10 * time.Millisecond
	buf := &logBuffer{}
	c := newCluster(t, 3, Options{HealthInterval: tick, Logger: slog.New(slog.NewTextHandler(buf, nil))})
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log:\n%s", what, buf.String())
			}
			time.Sleep(tick)
		}
	}
	// waitTicks waits until n more health ticks have pinged the masters
	// (m0 is never down): what follows asserts what those ticks logged.
	waitTicks := func(n int) {
		t.Helper()
		from := c.nodes[0].pingCount()
		waitUntil(fmt.Sprintf("%d health ticks", n), func() bool { return c.nodes[0].pingCount() >= from+n })
	}
	waitUntil("three masters up", func() bool { return c.eng.up() == 3 })
	if n := buf.count("quorum lost"); n != 0 {
		t.Fatalf("quorum lost logged %d times with every master up", n)
	}

	c.nodes[1].setDown(true)
	c.nodes[2].setDown(true)
	waitUntil("quorum lost logged", func() bool { return buf.count("quorum lost") > 0 })
	// Many health ticks with the quorum still lost: no more lines.
	waitTicks(20)
	if n := buf.count("quorum lost"); n != 1 {
		t.Fatalf("quorum lost logged %d times, want once:\n%s", n, buf.String())
	}
	if n := buf.count("m1 (down)"); n != 1 {
		t.Fatalf("the masters not voting are not named once:\n%s", buf.String())
	}

	c.nodes[1].setDown(false)
	waitUntil("quorum regained logged", func() bool { return buf.count("quorum regained") > 0 })
	waitTicks(20)
	if n, m := buf.count("quorum lost"), buf.count("quorum regained"); n != 1 || m != 1 {
		t.Fatalf("quorum lost logged %d times, regained %d, want once each:\n%s", n, m, buf.String())
	}
}

// TestRestartWarningsOncePerRestart: while a restarted master's quarantine
// cannot be sized, or it cannot rejoin, because too few other masters
// answer, the health loop tries again at every tick but warns once per
// restart; a second restart warns again.
func TestRestartWarningsOncePerRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		quarantine time.Duration
		script     string // what each try asks the other masters
		warning    string
	}{
		{"sizing", 10 * time.Second, "lease_left", "cannot size the quarantine"},
		{"rejoin", 0, "fence_highwater", "restarted master cannot rejoin yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := &logBuffer{}
			c := newCluster(t, 3, Options{HealthInterval: 5 * time.Millisecond, Quarantine: tc.quarantine,
				Logger: slog.New(slog.NewTextHandler(buf, nil))})
			grantN(t, c, 2)
			c.nodes[2].setDown(true)
			for restart := 1; restart <= 2; restart++ {
				before := c.nodes[0].calls(tc.script)
				c.nodes[1].restart()
				// Five tries, each answered by m0 alone (m2 is down).
				if !eventually(5*time.Second, func() bool { return c.nodes[0].calls(tc.script) >= before+5 }) {
					t.Fatalf("restart %d: no five tries: %+v\n%s", restart, c.eng.nodeStatus()[1], buf.String())
				}
				if n := buf.count(tc.warning); n != restart {
					t.Fatalf("after restart %d and five tries, %q logged %d times, want %d:\n%s", restart, tc.warning, n, restart, buf.String())
				}
			}
		})
	}
}
