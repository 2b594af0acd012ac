package tests

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/internal/testcert"
)

// scriptCalls sums the EVAL/EVALSHA calls every master has served: what
// the proxy sent them.
func (c *cluster) scriptCalls(t testing.TB) int {
	t.Helper()
	re := regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`)
	n := 0
	for _, rc := range c.direct {
		info, err := rc.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatalf("INFO commandstats: %v", err)
		}
		for _, m := range re.FindAllStringSubmatch(info, -1) {
			x, _ := strconv.Atoi(m[1])
			n += x
		}
	}
	return n
}

const authYAML = `auth:
  password: "${RP_TEST_DEFAULT_PASSWORD}"
  users:
    - name: billing
      password: "${RP_TEST_BILLING_PASSWORD}"
      resources: ["billing:*"]
    - name: ops
      password_sha256: "%s"
      resources: ["ops:*", "shared:[0-9]*"]
`

// TestAuthNamespaces: users authenticate with go-redis's usual options and
// lock only inside their namespaces; a resource outside is NOPERM and
// nothing reaches the masters; wrong and missing passwords are refused and
// the password never appears in the log.
func TestAuthNamespaces(t *testing.T) {
	t.Setenv("RP_TEST_DEFAULT_PASSWORD", "default-pw")
	t.Setenv("RP_TEST_BILLING_PASSWORD", "billing-pw")
	digest := sha256.Sum256([]byte("ops-pw"))
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.metricsListen = "127.0.0.1:0"
	cfg.extra = fmt.Sprintf(authYAML, hex.EncodeToString(digest[:]))
	p := startProxy(t, cfg)
	client := func(user, pass string, proto int) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: pass, Protocol: proto, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, proto := range []int{2, 3} {
		billing := client("billing", "billing-pw", proto)
		g, ok := rlock(t, billing, "billing:inv-1", 10000)
		if !ok {
			t.Fatalf("RESP%d: billing could not lock its own resource", proto)
		}
		// Real masters count the scripts they ran; embedded ones (no
		// redis-server installed) do not, and only the keys are checked.
		before := 0
		if redistest.Real() {
			before = cl.scriptCalls(t)
		}
		for _, args := range [][]any{
			{"RLOCK", "refused:1", 10000}, {"RLOCK", "billing", 10000}, {"RUNLOCK", "refused:1", g.token},
			{"REXTEND", "refused:2", g.token, 1000},
			// Every member of a multi-lock is checked, wherever it stands.
			{"RMULTILOCK", 10000, 2, "billing:a", "refused:3"},
			{"RMULTILOCK", 10000, 2, "refused:3", "billing:a", "WAIT", 10},
			{"RMULTIUNLOCK", g.token, "billing:inv-1", "refused:1"},
			{"RMULTIEXTEND", g.token, 1000, "billing:inv-1", "refused:1"},
		} {
			expectErr(t, billing, "NOPERM No permissions to access a key", args...)
		}
		if redistest.Real() {
			if after := cl.scriptCalls(t); after != before {
				t.Fatalf("RESP%d: refused commands reached the masters: %d script calls, was %d", proto, after, before)
			}
		}
		for i, rc := range cl.direct {
			// An acquire that ran would have left its lock and fence keys.
			if keys, _ := rc.Keys(context.Background(), "*refused*").Result(); len(keys) > 0 || rc.Exists(context.Background(), "redlock-proxy:fence:billing", "billing:a", "redlock-proxy:fence:billing:a").Val() > 0 {
				t.Fatalf("RESP%d: master%d has %v after refused commands", proto, i, keys)
			}
		}
		if do(t, billing, "RUNLOCK", "billing:inv-1", g.token) != int64(1) {
			t.Fatalf("RESP%d: RUNLOCK of its own lock failed", proto)
		}
		ops := client("ops", "ops-pw", proto) // password_sha256
		for res, allowed := range map[string]bool{"ops:x": true, "shared:7a": true, "shared:a": false, "billing:1": false} {
			g, ok, err := tryRlock(ops, res, 5000)
			switch {
			case allowed && (!ok || err != nil):
				t.Fatalf("RESP%d: ops RLOCK %s: %v %v", proto, res, ok, err)
			case !allowed && (err == nil || !strings.HasPrefix(err.Error(), "NOPERM")):
				t.Fatalf("RESP%d: ops RLOCK %s outside its patterns: %v", proto, res, err)
			case ok:
				do(t, ops, "RUNLOCK", res, g.token)
			}
		}
		def := client("", "default-pw", proto) // AUTH <password>: the default user, every resource
		g, ok = rlock(t, def, "orders:1", 5000)
		if !ok {
			t.Fatalf("RESP%d: default user could not lock", proto)
		}
		do(t, def, "RUNLOCK", "orders:1", g.token)

		for _, c := range []*redis.Client{client("billing", "nope", proto), client("", "nope", proto), client("nobody", "billing-pw", proto)} {
			if err := c.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("RESP%d: wrong credentials: %v", proto, err)
			}
		}
	}
	anon := client("", "", 2)
	expectErr(t, anon, "NOAUTH Authentication required.", "RLOCK", "billing:1", 1000)
	if err := anon.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING before AUTH (health probes): %v", err)
	}
	cl.expectNoLocks(t)
	log := p.log.String()
	for _, secret := range []string{"billing-pw", "default-pw", "ops-pw", "nope"} {
		if strings.Contains(log, secret) {
			t.Fatalf("the proxy log contains a password (%q)", secret)
		}
	}
	// Six clients with wrong credentials; go-redis tries HELLO ... AUTH and
	// then AUTH on each new connection, so at least six.
	n := strings.Count(log, "authentication failed")
	if n < 6 {
		t.Fatalf("%d authentication failures logged, want at least 6", n)
	}
	if m := metricsBody(t, p); !strings.Contains(m, fmt.Sprintf("redlock_proxy_auth_failures_total %d\n", n)) {
		t.Fatalf("metrics do not count the %d logged auth failures:\n%s", n, grepLines(m, "auth_failures"))
	}
}

// TestRedisPyAuth: redis-py's username/password options.
func TestRedisPyAuth(t *testing.T) {
	python := requirePython(t)
	t.Setenv("RP_TEST_DEFAULT_PASSWORD", "default-pw")
	t.Setenv("RP_TEST_BILLING_PASSWORD", "billing-pw")
	digest := sha256.Sum256([]byte("ops-pw"))
	cl := newCluster(t, 3)
	cfg := defaults(cl.addrs())
	cfg.extra = fmt.Sprintf(authYAML, hex.EncodeToString(digest[:]))
	p := startProxy(t, cfg)
	_, port, _ := strings.Cut(p.Addr, ":")
	runScript(t, python, "clients.py", port, "auth")
	cl.expectNoLocks(t)
}

// TestClientTLS: the listener speaks TLS only (1.2 at least), and with
// client_ca_file asks every client for a certificate signed by it.
func TestClientTLS(t *testing.T) {
	busy(t)
	certs := testcert.Generate(t, t.TempDir())
	cl := newCluster(t, 3)
	for _, mutual := range []bool{false, true} {
		t.Run(fmt.Sprintf("mutual=%v", mutual), func(t *testing.T) {
			cfg := defaults(cl.addrs())
			cfg.extra = fmt.Sprintf("tls:\n  cert_file: %q\n  key_file: %q\n", certs.ServerCert, certs.ServerKey)
			if mutual {
				cfg.extra += fmt.Sprintf("  client_ca_file: %q\n", certs.CA)
			}
			cfg.clientTLS = certs.ClientConfig(mutual)
			p := startProxy(t, cfg)
			dial := func(tc *tls.Config) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: p.Addr, TLSConfig: tc, MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
				t.Cleanup(func() { c.Close() })
				return c
			}
			good := dial(certs.ClientConfig(true))
			g, ok := rlock(t, good, "tls:r", 10000)
			if !ok {
				t.Fatal("RLOCK over TLS not granted")
			}
			do(t, good, "RUNLOCK", "tls:r", g.token)
			// A waiter that hangs up is noticed through TLS too.
			g, _ = rlock(t, good, "tls:door", 60000)
			waiter := redis.NewClient(&redis.Options{Addr: p.Addr, TLSConfig: certs.ClientConfig(true), Protocol: 2, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond})
			if err := waiter.Do(context.Background(), "RLOCK", "tls:door", 60000, "WAIT", 60000).Err(); err == nil {
				t.Fatal("waiter returned without a timeout")
			}
			waiter.Close()
			waitFor(t, 5*time.Second, "the proxy to notice the TLS hang-up", func() bool {
				return strings.Contains(do(t, good, "INFO", "clients").(string), "blocked_clients:0")
			})
			do(t, good, "RUNLOCK", "tls:door", g.token)
			if err := dial(nil).Ping(context.Background()).Err(); err == nil {
				t.Fatal("a plain-text client was served by the TLS listener")
			}
			old := certs.ClientConfig(true)
			old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			if err := dial(old).Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "protocol version") {
				t.Fatalf("a TLS 1.1 client: %v, want a protocol version alert", err)
			}
			noCert := dial(certs.ClientConfig(false))
			err := noCert.Ping(context.Background()).Err()
			if mutual && err == nil {
				t.Fatal("a client without a certificate was served with client_ca_file set")
			}
			if !mutual && err != nil {
				t.Fatalf("a client without a certificate was refused without client_ca_file: %v", err)
			}
			cl.expectNoLocks(t)
		})
	}
}

// TestMasterTLSAndACL: masters that accept only TLS with a client
// certificate, and only an ACL user (default user off); the proxy reaches
// them with master_defaults and one master's own settings.
func TestMasterTLSAndACL(t *testing.T) {
	certs := testcert.Generate(t, t.TempDir())
	var masters []*redistest.Server
	for range 3 {
		masters = append(masters, redistest.StartTLS(t, certs.ClientConfig(true), certs.ServerCert, certs.ServerKey, certs.CA, true,
			"--user", "default", "off", "--user", "locker", "on", ">locker-pw", "~*", "&*", "+@all"))
	}
	cfg := defaults(redistest.Addrs(masters))
	// Master 0 gives its own server name; the others take the defaults.
	cfg.masters = nil
	cfg.extra = fmt.Sprintf(`masters:
  - addr: %q
    tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: localhost}
  - addr: %q
  - addr: %q
master_defaults:
  username: locker
  password: "${RP_TEST_MASTER_PASSWORD}"
  tls: {ca_file: %q, cert_file: %q, key_file: %q}
`, masters[0].Addr, certs.CA, certs.ClientCert, certs.ClientKey, masters[1].Addr, masters[2].Addr, certs.CA, certs.ClientCert, certs.ClientKey)
	t.Setenv("RP_TEST_MASTER_PASSWORD", "locker-pw")
	p := startProxy(t, cfg)
	c := p.Client()
	g, ok := rlock(t, c, "mtls:r", 10000)
	if !ok {
		t.Fatalf("RLOCK through TLS masters not granted; proxy log:\n%s", p.log.String())
	}
	held := 0
	for _, m := range masters {
		rc := redis.NewClient(&redis.Options{Addr: m.Addr, TLSConfig: certs.ClientConfig(true), Username: "locker", Password: "locker-pw"})
		if v, err := rc.Get(context.Background(), "mtls:r").Result(); err == nil && v == g.token {
			held++
		}
		rc.Close()
	}
	if held < 2 {
		t.Fatalf("lock held on %d masters, want a quorum", held)
	}
	if do(t, c, "RUNLOCK", "mtls:r", g.token) != int64(1) {
		t.Fatal("RUNLOCK through TLS masters failed")
	}
	if strings.Contains(p.log.String(), "locker-pw") {
		t.Fatal("the master password appears in the proxy log")
	}
}
