package tests

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// quarantineList is RQUARANTINE LIST as one map of fields per master.
func quarantineList(t testing.TB, c *redis.Client) []map[string]any {
	t.Helper()
	v, err := c.Do(context.Background(), "RQUARANTINE", "LIST").Result()
	if err != nil {
		t.Fatalf("RQUARANTINE LIST: %v", err)
	}
	var out []map[string]any
	for _, e := range v.([]any) {
		m := map[string]any{}
		for k, x := range e.(map[any]any) {
			m[fmt.Sprint(k)] = x
		}
		out = append(out, m)
	}
	return out
}

// TestQuarantineEndByAdmin: 2 of 3 real masters restart empty while a
// lock is held, so their quarantine cannot be sized and lasts max_ttl
// (1h): every lock is NOQUORUM. RQUARANTINE LIST shows each master's
// state, time left and why; the log says "cannot size" once per master
// over several health ticks. A user without admin is refused; the admin
// user ends both quarantines (logged with who), and locks are granted
// again, with a higher fence. The longest ttl granted is a metric.
func TestQuarantineEndByAdmin(t *testing.T) {
	waits(t) // mostly waits (expiries, quarantines, restarts): overlaps the other waiting tests
	redistest.RequireReal(t, "embedded masters report no run_id, so a restart cannot be seen")
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = time.Hour
	cfg.metricsListen = "127.0.0.1:0"
	cfg.extra = "auth:\n  users:\n" +
		"    - {name: ops, password: opw, resources: [\"*\"], admin: true}\n" +
		"    - {name: app, password: apw, resources: [\"*\"]}\n"
	p := startProxy(t, cfg)
	client := func(user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: pass, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	ops, app := client("ops", "opw"), client("app", "apw")
	waitFor(t, 5*time.Second, "every master to be up", func() bool {
		return strings.Contains(do(t, ops, "INFO", "masters").(string), "masters_up:3")
	})
	if !strings.Contains(p.log.String(), "limits.max_ttl is long") {
		t.Error("no start-up warning about a max_ttl of 1h")
	}
	g, ok := rlock(t, app, "ledger", 20000)
	if !ok {
		t.Fatal("not granted")
	}
	if m := regexp.MustCompile(`(?m)^redlock_proxy_granted_ttl_max_seconds (\S+)$`).FindStringSubmatch(metricsBody(t, p)); m == nil || m[1] != "20" {
		t.Errorf("granted ttl metric: %q, want 20", m)
	}
	cl.servers[0].Restart()
	cl.servers[1].Restart()
	waitFor(t, 10*time.Second, "both restarts to be seen and their quarantine found unsizeable", func() bool {
		l := quarantineList(t, ops)
		return strings.Contains(fmt.Sprint(l[0]["why"]), "cannot be sized") && strings.Contains(fmt.Sprint(l[1]["why"]), "cannot be sized")
	})
	for i, m := range quarantineList(t, ops)[:2] {
		if m["state"] != "quarantined" || m["quarantine_ms"].(int64) < 3500000 || m["addr"] != cl.addrs()[i] || m["index"] != int64(i) {
			t.Fatalf("master %d: %v", i, m)
		}
	}
	if m := quarantineList(t, ops)[2]; m["state"] != "up" || m["why"] != "" || m["quarantine_ms"] != int64(0) {
		t.Fatalf("master 2: %v", m)
	}
	if _, ok, err := tryRlock(app, "other", 1000); ok || err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("lock during the quarantine: %v %v, want NOQUORUM", ok, err)
	}
	// Three more passes of the health loop (a tick a second, and one
	// when a request kicks it; each pass pings master 2, which is up):
	// still one log line per master.
	from := cl.pings(t, 2)
	waitFor(t, 10*time.Second, "three health passes", func() bool { return cl.pings(t, 2) >= from+3 })
	if n := strings.Count(p.log.String(), "cannot size the quarantine"); n != 2 {
		t.Fatalf("%d log lines about sizing the quarantine after three more health passes, want 2 (one per master)", n)
	}
	expectErr(t, app, "NOPERM User app has no permissions to run the 'rquarantine' command", "RQUARANTINE", "LIST")
	expectErr(t, app, "NOPERM User app has no permissions to run the 'rquarantine' command", "RQUARANTINE", "END", "0")
	expectErr(t, ops, "ERR master is not quarantined (RQUARANTINE LIST shows each master)", "RQUARANTINE", "END", "2")
	expectErr(t, ops, "ERR no such master: give its index in masters (from 0) or its addr, as RQUARANTINE LIST shows them", "RQUARANTINE", "END", "9")
	for _, m := range []string{"0", cl.addrs()[1]} {
		v, err := ops.Do(context.Background(), "RQUARANTINE", "END", m).Result()
		if err != nil {
			t.Fatalf("RQUARANTINE END %s: %v", m, err)
		}
		if e := v.(map[any]any); e["state"] != "up" || e["quarantine_ms"] != int64(0) {
			t.Fatalf("RQUARANTINE END %s: %v", m, e)
		}
	}
	// The proxy's log reaches p.log through a pipe, after the reply.
	ended := func() bool { return strings.Count(p.log.String(), "QUARANTINE ENDED BY AN OPERATOR") >= 2 }
	for end := time.Now().Add(2 * time.Second); !ended() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(p.log.String(), "QUARANTINE ENDED BY AN OPERATOR"); n != 2 || !strings.Contains(p.log.String(), "by=\"user ops from ") {
		t.Fatalf("%d WARN lines for the ends, or without who:\n%s", n, grepLines(p.log.String(), "QUARANTINE"))
	}
	g2, ok := rlock(t, app, "other", 1000)
	if !ok {
		t.Fatal("not granted after the quarantines ended")
	}
	if g2.fence <= g.fence {
		t.Fatalf("fence %d after %d", g2.fence, g.fence)
	}
}

// TestLockBreak (issue 28, an operator's hand on locks): RLOCKBREAK is
// refused for a user without admin, with nothing sent; the admin, on the
// other proxy, breaks a writer's AUTOEXTEND lease: a competitor is
// granted at once with a greater fence, the holder's next command on the
// resource answers -LOST (its keeper's next extension finds the lease
// gone and does not take it again) and its RUNLOCK answers 0; readers
// are broken as well; a free resource answers 0; the break leaves nothing
// once limits.max_ttl has run out.
func TestLockBreak(t *testing.T) {
	waits(t) // mostly waits (expiries, quarantines, restarts): overlaps the other waiting tests
	cl := newCluster(t, 5)
	cfg := defaults(cl.addrs())
	cfg.maxTTL = 1500 * time.Millisecond // how long a break mark lives
	cfg.extra = "auth:\n  users:\n" +
		"    - {name: ops, password: opw, resources: [\"*\"], admin: true}\n" +
		"    - {name: app, password: apw, resources: [\"*\"]}\n"
	p1, p2 := startProxy(t, cfg), startProxy(t, cfg)
	client := func(p *Proxy, user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: pass, MaxRetries: -1, PoolSize: 1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	holder, other, ops := client(p1, "app", "apw"), client(p2, "app", "apw"), client(p2, "ops", "opw")
	g, ok := rlock(t, holder, "ledger", 1500, "AUTOEXTEND")
	if !ok {
		t.Fatal("the holder's lock")
	}
	expectErr(t, other, "NOPERM User app has no permissions to run the 'rlockbreak' command", "RLOCKBREAK", "ledger")
	if _, ok := rlock(t, other, "ledger", 1000); ok {
		t.Fatal("a competitor granted beside the holder")
	}
	if n := do(t, ops, "RLOCKBREAK", "ledger"); n != int64(1) {
		t.Fatalf("RLOCKBREAK of a held lock: %v", n)
	}
	g2, ok := rlock(t, other, "ledger", 1000)
	if !ok || g2.fence <= g.fence {
		t.Fatalf("the competitor after the break: %v, fence %d (broken %d)", ok, g2.fence, g.fence)
	}
	do(t, other, "RUNLOCK", "ledger", g2.token)
	waitFor(t, 5*time.Second, "the broken holder's next command to answer LOST", func() bool {
		err := holder.Do(ctx, "RLOCKINFO", "ledger").Err()
		return err != nil && strings.HasPrefix(err.Error(), "LOST ")
	})
	if n := do(t, holder, "RUNLOCK", "ledger", g.token); n != int64(0) {
		t.Fatalf("the broken holder's RUNLOCK: %v", n)
	}
	if _, ok, err := rrlock(holder, "doc", 1500, "AUTOEXTEND"); !ok || err != nil {
		t.Fatalf("a reader: %v %v", ok, err)
	}
	if n := do(t, ops, "RLOCKBREAK", "doc"); n != int64(1) {
		t.Fatalf("RLOCKBREAK of a read lock: %v", n)
	}
	w, ok := rlock(t, other, "doc", 1000)
	if !ok {
		t.Fatal("a writer after the readers were broken")
	}
	do(t, other, "RUNLOCK", "doc", w.token)
	if n := do(t, ops, "RLOCKBREAK", "nothing"); n != int64(0) {
		t.Fatalf("RLOCKBREAK of a free resource: %v", n)
	}
	if !strings.Contains(p2.log.String(), "LOCK BROKEN BY AN OPERATOR") || !strings.Contains(p2.log.String(), "user ops") {
		t.Error("the break is not logged with who broke it")
	}
	// The break marks live limits.max_ttl (1.5 s here) and a little more.
	cl.expectOnlyFencesWithin(t, 5*time.Second)
}
