package tests

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const tenantsYAML = `dropin: true
auth:
  users:
    - name: billing
      password: billing-pw
      resources: ["billing:*"]
    - name: shop
      password: shop-pw
      resources: ["shop:*"]
    - name: ops
      password: ops-pw
      resources: ["*"]
      admin: true
`

// TestTenantsApart: two tenants, billing (billing:*) and shop (shop:*), on
// two drop-in proxies, and an admin. A tenant can neither subscribe to,
// pattern-subscribe over nor publish on the other's channels (NOPERM, and
// the other's subscriber on the other proxy receives nothing), while its
// own messages still travel across proxies; CLIENT LIST and INFO show a
// tenant only what is its own; a tenant's scripts (SCRIPT LOAD, EVALSHA,
// SCRIPT EXISTS, SCRIPT FLUSH) are its own. The admin sees everything.
func TestTenantsApart(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.extra = tenantsYAML
	p1, p2 := startProxy(t, cfg), startProxy(t, cfg)
	ctx := context.Background()
	client := func(p *Proxy, user string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: user + "-pw", MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	billing, shop, ops := client(p1, "billing"), client(p2, "shop"), client(p1, "ops")

	// Channels.
	shopSub := shop.Subscribe(ctx, "shop:chan")
	defer shopSub.Close()
	if _, err := shopSub.Receive(ctx); err != nil {
		t.Fatalf("shop SUBSCRIBE shop:chan: %v", err)
	}
	const nopermChannel = "NOPERM No permissions to access a channel"
	expectErr(t, billing, nopermChannel, "PUBLISH", "shop:chan", "forged")
	for _, args := range [][]any{{"SUBSCRIBE", "shop:chan"}, {"PSUBSCRIBE", "*"}, {"PSUBSCRIBE", "shop:*"}, {"SUBSCRIBE", "billing:a", "shop:chan"}} {
		c := client(p1, "billing")
		expectErr(t, c, nopermChannel, args...)
	}
	bsub := billing.PSubscribe(ctx, "billing:*")
	defer bsub.Close()
	if _, err := bsub.Receive(ctx); err != nil {
		t.Fatalf("billing PSUBSCRIBE billing:*: %v", err)
	}
	// A release script of billing's own lock that publishes on shop's
	// channel (Spring's unlock takes its channel from ARGV): the lock is
	// released, the message goes nowhere.
	if err := billing.Do(ctx, "SET", "billing:spring", "c1", "NX", "PX", 30000).Err(); err != nil {
		t.Fatalf("billing SET NX: %v", err)
	}
	if v, err := billing.Do(ctx, "EVAL", springUnlock, 1, "billing:spring", "c1", "shop:chan").Result(); err != nil || v != int64(1) {
		t.Fatalf("billing's unlock script = %v, %v; want 1 (released)", v, err)
	}
	// shop's own message crosses from p1 to its subscriber on p2; it is
	// the first message that subscriber gets (the forged ones never came).
	shopOnP1 := client(p1, "shop")
	if err := shopOnP1.Publish(ctx, "shop:chan", "real").Err(); err != nil {
		t.Fatalf("shop PUBLISH: %v", err)
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	m, err := shopSub.ReceiveMessage(mctx)
	cancel()
	if err != nil || m.Payload != "real" {
		t.Fatalf("shop's subscriber got %v, %v; want shop's own message first", m, err)
	}

	// CLIENT LIST and INFO.
	list := func(c *redis.Client) string { return do(t, c, "CLIENT", "LIST").(string) }
	for _, line := range strings.Split(strings.TrimSpace(list(billing)), "\n") {
		if !strings.Contains(line, " user=billing ") {
			t.Errorf("billing's CLIENT LIST shows another tenant's connection: %s", line)
		}
	}
	if all := list(ops); !strings.Contains(all, " user=billing ") || !strings.Contains(all, " user=ops ") {
		t.Errorf("the admin's CLIENT LIST does not show every connection:\n%s", all)
	}
	for _, section := range [][]any{{"INFO"}, {"INFO", "all"}, {"INFO", "masters"}, {"INFO", "commandstats"}} {
		info := do(t, billing, section...).(string)
		if strings.Contains(info, "master0") || strings.Contains(info, cl.addrs()[0]) || strings.Contains(info, "cmdstat_") || strings.Contains(info, "# Clients") {
			t.Errorf("billing's %v shows what is not its own:\n%s", section, info)
		}
		if len(section) == 1 && !strings.Contains(info, "# Server") {
			t.Errorf("billing's INFO lacks the server section:\n%s", info)
		}
	}
	if info := do(t, ops, "INFO", "masters").(string); !strings.Contains(info, cl.addrs()[0]) {
		t.Errorf("the admin's INFO masters lacks the masters:\n%s", info)
	}

	// Scripts.
	const release = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`
	sha := do(t, billing, "SCRIPT", "LOAD", release).(string)
	exists := func(c *redis.Client) int64 { return do(t, c, "SCRIPT", "EXISTS", sha).([]any)[0].(int64) }
	if exists(billing) != 1 || exists(shop) != 0 || exists(ops) != 1 {
		t.Fatalf("SCRIPT EXISTS after billing's LOAD: billing %d, shop %d, admin %d; want 1, 0, 1", exists(billing), exists(shop), exists(ops))
	}
	expectErr(t, shop, "NOSCRIPT No matching script. Please use EVAL.", "EVALSHA", sha, 1, "shop:x", "v")
	if n := do(t, billing, "EVALSHA", sha, 1, "billing:x", "v"); n != int64(0) {
		t.Fatalf("billing's EVALSHA of its script = %v, want 0", n)
	}
	if do(t, shop, "SCRIPT", "FLUSH") != "OK" || exists(billing) != 1 {
		t.Fatal("shop's SCRIPT FLUSH took billing's script away")
	}
	if do(t, billing, "SCRIPT", "FLUSH") != "OK" || exists(billing) != 0 {
		t.Fatal("billing's SCRIPT FLUSH left its script")
	}
}

// tenancyKind is what a tenant may get from one invocation of a command
// aimed at another tenant.
type tenancyKind int

const (
	// noPermKey: refused, the key outside the tenant's patterns.
	noPermKey tenancyKind = iota
	// noPermChannel: refused, the channel outside the tenant's patterns.
	noPermChannel
	// adminOnly: refused, an administrator's command.
	adminOnly
	// ownOnly: served, but the reply tells nothing of the other tenant
	// (the connection's own state, the proxy's own facts, or a view
	// scoped to the tenant).
	ownOnly
)

// tenancyRule is one invocation of a command by billing, aimed at shop's
// resources, channels, connections or scripts, and what billing gets.
type tenancyRule struct {
	kind tenancyKind
	args []any
	// want, for ownOnly, is the exact reply (fmt.Sprint of value and
	// error) when the rule needs more than "names nothing of shop's".
	want string
}

// tenancyRules gives every command of the table (both modes) its
// invocations; "SHA" stands for shop's script's SHA1.
func tenancyRules() map[string][]tenancyRule {
	k := func(args ...any) tenancyRule { return tenancyRule{kind: noPermKey, args: args} }
	own := func(args ...any) tenancyRule { return tenancyRule{kind: ownOnly, args: args} }
	return map[string][]tenancyRule{
		// Locks and the other primitives: every resource checked.
		"rlock":        {k("RLOCK", "shop:x", 1000), k("RLOCK", "shop:x", 1000, "WAIT", 10)},
		"runlock":      {k("RUNLOCK", "shop:x", "t")},
		"rextend":      {k("REXTEND", "shop:x", "t", 1000)},
		"rmultilock":   {k("RMULTILOCK", 1000, 2, "billing:a", "shop:x")},
		"rmultiunlock": {k("RMULTIUNLOCK", "t", "billing:a", "shop:x")},
		"rmultiextend": {k("RMULTIEXTEND", "t", 1000, "shop:x")},
		"rfairlock":    {k("RFAIRLOCK", "shop:x", 1000, "WAIT", 10)},
		"rrlock":       {k("RRLOCK", "shop:x", 1000)},
		"rrunlock":     {k("RRUNLOCK", "shop:x", "t")},
		"rrextend":     {k("RREXTEND", "shop:x", "t", 1000)},
		"rsemacquire":  {k("RSEMACQUIRE", "shop:s", 2, 1000)},
		"rsemrelease":  {k("RSEMRELEASE", "shop:s", "t")},
		"rsemextend":   {k("RSEMEXTEND", "shop:s", "t", 1000)},
		"rsemcount":    {k("RSEMCOUNT", "shop:s")},
		"rsemset":      {k("RSEMSET", "shop:s", 3)},
		"rlatch":       {k("RLATCH", "shop:l", 2, 1000)},
		"rlatchdown":   {k("RLATCHDOWN", "shop:l", "t")},
		"rlatchwait":   {k("RLATCHWAIT", "shop:l", 10)},
		"rlatchcount":  {k("RLATCHCOUNT", "shop:l")},
		"rlockinfo":    {k("RLOCKINFO", "shop:x")},
		"rlockbreak":   {k("RLOCKBREAK", "shop:x")},
		"relect": {k("RELECT", "CAMPAIGN", "shop:e", 1000, "v"), k("RELECT", "PROCLAIM", "shop:e", "t", "v"),
			k("RELECT", "RESIGN", "shop:e", "t"), k("RELECT", "LEADER", "shop:e"), k("RELECT", "OBSERVE", "shop:e"),
			k("RELECT", "UNOBSERVE", "shop:e"), k("RELECT", "WAITCHANGE", "shop:e", 0, "WAIT", 10)},
		// Views: scoped to the tenant.
		"rlocklist": {own("RLOCKLIST", 0, "COUNT", 1000)},
		"info":      {own("INFO"), own("INFO", "all"), own("INFO", "masters"), own("INFO", "commandstats")},
		"client": {own("CLIENT", "LIST"), own("CLIENT", "INFO"), own("CLIENT", "ID"), own("CLIENT", "GETNAME"),
			own("CLIENT", "SETNAME", "b"), own("CLIENT", "SETINFO", "LIB-NAME", "x"), own("CLIENT", "TRACKING", "ON"),
			own("CLIENT", "CACHING", "YES"), own("CLIENT", "GETREDIR"), own("CLIENT", "NO-EVICT", "ON"), own("CLIENT", "HELP")},
		// Operators' verbs.
		"rquarantine": {{kind: adminOnly, args: []any{"RQUARANTINE", "END", "0"}}},
		// Pub/sub.
		"subscribe":    {{kind: noPermChannel, args: []any{"SUBSCRIBE", "shop:chan"}}},
		"psubscribe":   {{kind: noPermChannel, args: []any{"PSUBSCRIBE", "*"}}, {kind: noPermChannel, args: []any{"PSUBSCRIBE", "shop:*"}}},
		"publish":      {{kind: noPermChannel, args: []any{"PUBLISH", "shop:chan", "forged"}}},
		"unsubscribe":  {own("UNSUBSCRIBE")},
		"punsubscribe": {own("PUNSUBSCRIBE")},
		// The connection's own state and the proxy's own facts.
		"ping": {own("PING")}, "echo": {own("ECHO", "x")}, "quit": {own("QUIT")}, "reset": {own("RESET")},
		"hello": {own("HELLO", "2")}, "auth": {own("AUTH", "billing", "billing-pw")}, "select": {own("SELECT", 0)},
		"command": {own("COMMAND", "COUNT"), own("COMMAND", "DOCS", "rlock"), own("COMMAND", "INFO", "rlock"), own("COMMAND", "LIST")},
		"multi":   {own("MULTI")}, "exec": {own("EXEC")}, "discard": {own("DISCARD")}, "unwatch": {own("UNWATCH")},
		"watch": {k("WATCH", "shop:x")},
		// Drop-in mode: the keys checked, the scripts per tenant.
		"get": {k("GET", "shop:x")}, "set": {k("SET", "shop:x", "v", "NX", "PX", 1000)},
		"del": {k("DEL", "shop:x")}, "unlink": {k("UNLINK", "shop:x")}, "exists": {k("EXISTS", "shop:x")},
		"pttl": {k("PTTL", "shop:x")}, "ttl": {k("TTL", "shop:x")}, "zrem": {k("ZREM", "shop:x", "m")},
		"pexpiretime": {k("PEXPIRETIME", "shop:x")}, "expiretime": {k("EXPIRETIME", "shop:x")},
		"mget": {k("MGET", "billing:x", "shop:x")}, "incr": {k("INCR", "shop:x")},
		"delifeq": {k("DELIFEQ", "shop:x", "v")}, "delex": {k("DELEX", "shop:x")},
		"hexists": {k("HEXISTS", "shop:x", "f")}, "hget": {k("HGET", "shop:x", "f")},
		"setnx": {k("SETNX", "shop:x", "v")}, "expire": {k("EXPIRE", "shop:x", 10)}, "pexpire": {k("PEXPIRE", "shop:x", 1000)},
		"eval":    {k("EVAL", `return redis.call("del", KEYS[1])`, 1, "shop:x")},
		"evalsha": {k("EVALSHA", "SHA", 1, "shop:x"), {kind: ownOnly, args: []any{"EVALSHA", "SHA", 1, "billing:x", "v"}, want: "<nil>NOSCRIPT No matching script. Please use EVAL."}},
		"script":  {{kind: ownOnly, args: []any{"SCRIPT", "EXISTS", "SHA"}, want: "[0] <nil>"}},
	}
}

// TestTenancyEveryCommand walks the command table of a plain and a
// drop-in proxy: every command has a tenancy rule (a command added
// without one fails here), and billing, aimed at shop's resources,
// channels, connections and scripts, gets exactly its rule's refusal, or
// a reply that names nothing of shop's (shop holds a lock, waits on it
// from a second connection, named its connection, subscribed, and
// loaded a script on the same proxy first).
func TestTenancyEveryCommand(t *testing.T) {
	busy(t)
	cl := newCluster(t, 3)
	ctx := context.Background()
	rules := tenancyRules()
	listed := map[string]bool{} // every command of either mode
	defer func() {
		for name := range rules {
			if !listed[name] {
				t.Errorf("tenancyRules has %q, which no proxy serves: a misspelt rule would hide a missing one", name)
			}
		}
	}()
	for _, mode := range []string{"plain", "dropin"} {
		t.Run(mode, func(t *testing.T) {
			cfg := defaults(cl.addrs())
			cfg.extra = tenantsYAML
			if mode == "plain" {
				cfg.extra = strings.Replace(tenantsYAML, "dropin: true\n", "", 1)
			}
			p := startProxy(t, cfg)
			client := func(user string) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: user + "-pw", MaxRetries: -1, PoolSize: 1, Protocol: 2})
				t.Cleanup(func() { c.Close() })
				return c
			}
			shop := client("shop")
			do(t, shop, "CLIENT", "SETNAME", "shopconn")
			res := "shop:held-" + mode
			held, _ := rlock(t, shop, res, 30000)
			sha := ""
			if mode == "dropin" {
				sha = do(t, shop, "SCRIPT", "LOAD", `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`).(string)
			}
			sub := client("shop").Subscribe(ctx, "shop:chan")
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil {
				t.Fatalf("shop SUBSCRIBE: %v", err)
			}
			waiter := redis.NewClient(&redis.Options{Addr: p.Addr, Username: "shop", Password: "shop-pw", MaxRetries: -1, PoolSize: 1, Protocol: 2, ReadTimeout: 30 * time.Second})
			t.Cleanup(func() { waiter.Close() })
			waited := make(chan error, 1)
			go func() { _, _, err := tryRlock(waiter, res, 1000, "WAIT", 20000); waited <- err }()
			ops := client("ops")
			waitFor(t, 5*time.Second, "shop's waiter to block", func() bool {
				return strings.Contains(do(t, ops, "CLIENT", "LIST").(string), "resource="+res)
			})
			// Shop's names, and what only an administrator sees: the
			// masters' addresses, every command's counts.
			traces := append([]string{"shop", "shopconn", "cmdstat_"}, cl.addrs()...)
			if sha != "" {
				traces = append(traces, sha)
			}
			names := do(t, ops, "COMMAND", "LIST").([]any)
			for _, n := range names {
				listed[n.(string)] = true
			}
			for _, n := range names {
				name := n.(string)
				rs, ok := rules[name]
				if !ok {
					t.Errorf("%s has no tenancy rule: say what a tenant gets from it aimed at another's (tenancyRules)", name)
					continue
				}
				for _, r := range rs {
					args := make([]any, len(r.args))
					for i, a := range r.args {
						if a == "SHA" {
							a = cmp.Or(sha, strings.Repeat("0", 40))
						}
						args[i] = a
					}
					v, err := client("billing").Do(ctx, args...).Result()
					if err == redis.Nil {
						err = nil
					}
					switch r.kind {
					case noPermKey, noPermChannel:
						want := "NOPERM No permissions to access a key"
						if r.kind == noPermChannel {
							want = "NOPERM No permissions to access a channel"
						}
						if err == nil || err.Error() != want {
							t.Errorf("billing %v: got %v, %v; want %q", args, v, err, want)
						}
					case adminOnly:
						if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
							t.Errorf("billing %v: got %v, %v; want NOPERM (admin only)", args, v, err)
						}
					case ownOnly:
						seen := fmt.Sprint(v, err)
						if r.want != "" && seen != r.want {
							t.Errorf("billing %v: got %s, want %s", args, seen, r.want)
						}
						for _, tr := range traces {
							if strings.Contains(seen, tr) {
								t.Errorf("billing %v shows shop's %q: %s", args, tr, seen)
							}
						}
					}
				}
			}
			do(t, shop, "RUNLOCK", res, held.token) // the waiter is granted
			waiter.Close()
			<-waited
		})
	}
}
