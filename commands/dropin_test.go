package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func TestParseSet(t *testing.T) {
	lim := Limits{MaxTTL: time.Hour}
	now := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		args []string
		want setArgs
		err  string
	}{
		{[]string{"k", "v", "NX", "PX", "1500"}, setArgs{key: "k", value: "v", ttl: 1500 * time.Millisecond}, ""},
		{[]string{"k", "v", "px", "1500", "nx"}, setArgs{key: "k", value: "v", ttl: 1500 * time.Millisecond}, ""},
		{[]string{"k", "v", "NX", "EX", "2"}, setArgs{key: "k", value: "v", ttl: 2 * time.Second}, ""},
		{[]string{"k", "v", "NX", "PXAT", "1700000002000"}, setArgs{key: "k", value: "v", ttl: 2 * time.Second}, ""},
		{[]string{"k", "v", "NX", "EXAT", "1700000003"}, setArgs{key: "k", value: "v", ttl: 3 * time.Second}, ""},
		{[]string{"k", "v", "NX", "PXAT", "1699999999000"}, setArgs{key: "k", value: "v", expired: true}, ""},
		// redis-py's lock(name) with no timeout: a lease kept while the
		// connection lives.
		{[]string{"k", "v", "NX"}, setArgs{key: "k", value: "v", ttl: keptLeaseTTL, kept: true}, ""},
		{[]string{"k", "v", "NX", "PX", "0"}, setArgs{}, "ERR invalid expire time in 'set' command"},
		{[]string{"k", "v", "NX", "PX", "-5"}, setArgs{}, "ERR invalid expire time in 'set' command"},
		{[]string{"k", "v", "NX", "PX", "x"}, setArgs{}, "ERR value is not an integer or out of range"},
		{[]string{"k", "v", "NX", "PX", "3600001"}, setArgs{}, "ERR invalid expire time in 'set' command (limits.max_ttl is 1h0m0s)"},
		{[]string{"k", "v", "NX", "PX"}, setArgs{}, "ERR syntax error"},
		{[]string{"k", "v", "NX", "XX"}, setArgs{}, "ERR syntax error"},
		{[]string{"k", "v", "NX", "PX", "1", "EX", "1"}, setArgs{}, "ERR syntax error"},
		{[]string{"k", "v", "NX", "BOGUS"}, setArgs{}, "ERR syntax error"},
		{[]string{"k", "v", "PX", "100"}, setArgs{}, "ERR drop-in mode: SET on a lock key must be SET key value NX"},
		// ShedLock: the holder sets its own lock's ttl.
		{[]string{"k", "v", "XX", "PX", "100"}, setArgs{key: "k", value: "v", xx: true, ttl: 100 * time.Millisecond}, ""},
		{[]string{"k", "v", "XX"}, setArgs{}, "ERR drop-in mode: SET ... XX on a lock key needs a ttl"},
		{[]string{"k", "v"}, setArgs{}, "ERR drop-in mode: SET on a lock key must be SET key value NX"},
		{[]string{"k", "v", "NX", "GET", "PX", "100"}, setArgs{}, "ERR drop-in mode: SET ... NX GET is not served"},
		{[]string{"k", "v", "NX", "KEEPTTL"}, setArgs{}, "ERR drop-in mode: SET ... KEEPTTL"},
		{[]string{"k", "", "NX", "PX", "100"}, setArgs{}, "ERR drop-in mode: a lock's value must be 1 to 128 bytes"},
		{[]string{"", "v", "NX", "PX", "100"}, setArgs{}, "ERR drop-in mode: the lock key must not be empty"},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		got, err := parseSet(args, lim, now)
		if tc.err != "" {
			var pe *proxy.Error
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Code+" "+pe.Msg, tc.err) {
				t.Errorf("SET %q: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SET %q = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}
