package tests

import (
	"context"
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
	// shop's own message crosses from p1 to its subscriber on p2; it is
	// the first message that subscriber gets (the forged one never came).
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
