package commands

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// TestErrorsNameTheLimit: a value over a configured bound is refused in
// Redis's wording followed by the bound's configuration key and value,
// before anything reaches the masters (the engine here is nil); a value
// Redis itself would refuse keeps Redis's wording alone.
func TestErrorsNameTheLimit(t *testing.T) {
	lim := Limits{MaxTTL: time.Hour, MaxWait: 5 * time.Minute, MaxLatchCount: 1024}
	byName := map[string]*proxy.Command{}
	for _, c := range lockCommands(Engine{}, lim, nil) {
		byName[c.Name] = c
	}
	for _, c := range multiLockCommands(Engine{}, lim, nil) {
		byName[c.Name] = c
	}
	for _, c := range semaphoreCommands(Engine{}, lim, nil) {
		byName[c.Name] = c
	}
	for _, c := range latchCommands(Engine{}, lim) {
		byName[c.Name] = c
	}
	tests := []struct {
		cmd  []string
		want string
	}{
		{[]string{"rlock", "a", "3600001"}, "ERR invalid expire time in 'rlock' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rlock", "a", "0"}, "ERR invalid expire time in 'rlock' command"},
		{[]string{"rfairlock", "a", "3600001"}, "ERR invalid expire time in 'rfairlock' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rextend", "a", "t", "3600001"}, "ERR invalid expire time in 'rextend' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rmultilock", "3600001", "1", "a"}, "ERR invalid expire time in 'rmultilock' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rsemacquire", "s", "2", "3600001"}, "ERR invalid expire time in 'rsemacquire' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rlatch", "l", "3", "3600001"}, "ERR invalid expire time in 'rlatch' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"rlock", "a", "1000", "WAIT", "300001"}, "ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{[]string{"rlock", "a", "1000", "WAIT", "-1"}, "ERR timeout is negative"},
		{[]string{"rlatchwait", "l", "300001"}, "ERR timeout is out of range (limits.max_wait is 5m0s)"},
		{[]string{"rlatch", "l", "1025", "1000"}, "ERR count must be 1 to 1024 (limits.max_args)"},
		{[]string{"rlatch", "l", "0", "1000"}, "ERR count must be 1 to 1024 (limits.max_args)"},
	}
	for _, tc := range tests {
		c := byName[tc.cmd[0]]
		if c == nil {
			t.Fatalf("no command %s", tc.cmd[0])
		}
		_, err := c.Handler(context.Background(), nil, args(tc.cmd[1:]...))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: got %v, want %q", tc.cmd, err, tc.want)
		}
	}
}

// TestPlainUnknown: with drop-in mode off, a command that drop-in mode
// serves says how to turn it on after Redis's wording; any other unknown
// command gets Redis's wording alone.
func TestPlainUnknown(t *testing.T) {
	unknown := PlainUnknown()
	tests := []struct {
		cmd  []string
		want string
	}{
		{[]string{"GET", "x"}, "ERR unknown command 'GET', with args beginning with: 'x' (served in drop-in mode: set dropin: true in the configuration, see docs/PROTOCOL.md, Drop-in mode)"},
		{[]string{"evalsha", "abc", "0"}, "ERR unknown command 'evalsha', with args beginning with: 'abc' '0' (served in drop-in mode: set dropin: true in the configuration, see docs/PROTOCOL.md, Drop-in mode)"},
		{[]string{"RLOCKX", "a", "b"}, "ERR unknown command 'RLOCKX', with args beginning with: 'a' 'b' "},
		{[]string{"HLEN", "h"}, "ERR unknown command 'HLEN', with args beginning with: 'h' "},
	}
	for _, tc := range tests {
		if got := unknown(args(tc.cmd...)).Error(); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
