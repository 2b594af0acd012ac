package commands

import (
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// TestResultKinds: each command's table entry reads its reply as
// docs/metrics.md says (the result label of redlock_proxy_commands_total
// and INFO locks): acquires and extensions on a null reply, releases and
// RLATCHWAIT on 0, the others grant nothing; every command that may block
// waits for something it can be granted.
func TestResultKinds(t *testing.T) {
	want := map[string]proxy.Result{
		"rlock": proxy.ResultNull, "rfairlock": proxy.ResultNull, "rmultilock": proxy.ResultNull,
		"rrlock": proxy.ResultNull, "rsemacquire": proxy.ResultNull, "set": proxy.ResultNull,
		"rextend": proxy.ResultNull, "rmultiextend": proxy.ResultNull, "rrextend": proxy.ResultNull, "rsemextend": proxy.ResultNull,
		"runlock": proxy.ResultZero, "rmultiunlock": proxy.ResultZero, "rrunlock": proxy.ResultZero, "rsemrelease": proxy.ResultZero,
		"rlatchwait": proxy.ResultZero,
		"rlockinfo":  proxy.ResultOK, "rsemcount": proxy.ResultOK, "rlatch": proxy.ResultOK, "rlatchdown": proxy.ResultOK,
		"rlatchcount": proxy.ResultOK, "get": proxy.ResultOK,
		"relect": proxy.ResultNull,
	}
	cmds, _ := AllWithInfo(Engine{}, Limits{MaxTTL: time.Hour, MaxWait: time.Minute, MaxLatchCount: 1024, DropIn: true})
	seen := map[string]bool{}
	for _, c := range cmds {
		seen[c.Name] = true
		if w, ok := want[c.Name]; ok && c.Result != w {
			t.Errorf("%s: Result %d, want %d", c.Name, c.Result, w)
		}
		if c.Flags&proxy.FlagMayBlock != 0 && c.Result == proxy.ResultOK {
			t.Errorf("%s may block but its replies never read as granted or not", c.Name)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no command %s", name)
		}
	}
}
