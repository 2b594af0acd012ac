package tests

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestDebugLogShowsOutcomesNotSecrets: at log_level debug the proxy logs
// one line per command with its name, resources, result and latency, and
// never a token (given with TOKEN, or sent back to release, extend or
// arrive at a latch) nor a password (of the default user, a named user, or
// a wrong one). The log is read whole, as an operator's shipper would.
func TestDebugLogShowsOutcomesNotSecrets(t *testing.T) {
	busy(t)
	const (
		password  = "pw-Zq8-default"
		userPw    = "pw-Zq8-billing"
		wrongPw   = "pw-Zq8-wrong"
		token     = "tok-Zq8-lock"
		multiTok  = "tok-Zq8-multi"
		semTok    = "tok-Zq8-sem"
		latchTok  = "tok-Zq8-latch"
		readTok   = "tok-Zq8-read"
		tokenPart = "Zq8" // every secret above contains it
	)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.extra = "auth:\n  password: " + password + "\n  users:\n    - {name: billing, password: " + userPw + ", resources: [\"billing:*\"]}\n"
	p := startProxy(t, cfg)
	c := redis.NewClient(&redis.Options{Addr: p.Addr, Password: password, Protocol: 2})
	defer c.Close()
	ctx := context.Background()

	bad := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "billing", Password: wrongPw, Protocol: 2})
	if err := bad.Ping(ctx).Err(); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	bad.Close()
	billing := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "billing", Password: userPw, Protocol: 2})
	defer billing.Close()
	if v := do(t, billing, "RLOCK", "billing:1", 10000, "TOKEN", token); v == nil {
		t.Fatal("billing's RLOCK not granted")
	}
	do(t, billing, "RUNLOCK", "billing:1", token)

	g, ok := rlock(t, c, "log:r", 10000, "TOKEN", token)
	if !ok || g.token != token {
		t.Fatalf("RLOCK TOKEN: %+v %v", g, ok)
	}
	if _, ok := rlock(t, c, "log:r", 10000); ok {
		t.Fatal("a held lock was granted again")
	}
	do(t, c, "REXTEND", "log:r", token, 10000)
	do(t, c, "RLOCKINFO", "log:r", token)
	do(t, c, "RUNLOCK", "log:r", token)
	do(t, c, "RMULTILOCK", 10000, 2, "log:a", "log:b", "TOKEN", multiTok)
	do(t, c, "RMULTIUNLOCK", multiTok, "log:a", "log:b")
	do(t, c, "RSEMACQUIRE", "log:sem", 2, 10000, "TOKEN", semTok)
	do(t, c, "RSEMRELEASE", "log:sem", semTok)
	do(t, c, "RRLOCK", "log:rw", 10000, "TOKEN", readTok)
	do(t, c, "RRUNLOCK", "log:rw", readTok)
	do(t, c, "RLATCH", "log:latch", 2, 10000)
	do(t, c, "RLATCHDOWN", "log:latch", latchTok)
	// A random token, as the proxy made it, never shows either.
	g2, _ := rlock(t, c, "log:random", 10000)
	do(t, c, "RUNLOCK", "log:random", g2.token)
	expectErr(t, c, "ERR syntax error", "RLOCK", "log:r", 10000, "TOKEN", token, "TOKEN", token)
	cl.expectNoLocks(t)
	p.Stop()

	log := p.log.String()
	for _, secret := range []string{tokenPart, g2.token} {
		if i := strings.Index(log, secret); i >= 0 {
			line := log[strings.LastIndex(log[:i], "\n")+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Errorf("the debug log contains a secret (%q):\n%s", secret, line)
		}
	}
	for _, want := range []string{
		`msg=command command=rlock resources=[log:r] result=granted error="" latency=`,
		`msg=command command=rlock resources=[log:r] result=not_granted`,
		`msg=command command=runlock resources=[log:r] result=`,
		`msg=command command=rmultilock resources="[log:a log:b]" result=granted`,
		`msg=command command=rsemacquire resources=[log:sem] result=granted`,
		`msg=command command=rlatchdown resources=[log:latch]`,
		`msg=command command=rlock resources=[billing:1] result=granted`,
		`msg=command command=rlock resources=[log:r] result=error error=ERR`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the debug log lacks %q:\n%s", want, grepLines(log, "msg=command"))
		}
	}
	if !regexp.MustCompile(`msg=command command=auth resources=\[\] result=error error=WRONGPASS`).MatchString(log) {
		t.Errorf("no debug line for the failed AUTH:\n%s", grepLines(log, "command=auth"))
	}
}

// TestJSONLog: log_format json gives one JSON object a line, every line.
func TestJSONLog(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.extra = "log_format: json\n"
	p := startProxy(t, cfg)
	c := p.Client()
	rlock(t, c, "json:r", 1000)
	p.Stop()
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(p.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		if m["msg"] == "command" && m["command"] == "rlock" && m["result"] == "granted" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d JSON lines for the RLOCK, want 1:\n%s", n, p.log.String())
	}
}
