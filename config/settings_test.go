package config

import (
	"strings"
	"testing"
)

// TestNonDefault: the settings logged at start are those that differ from
// the defaults, by key, and no password or digest is ever shown.
func TestNonDefault(t *testing.T) {
	cfg, err := Parse([]byte(`
masters:
  - {addr: "127.0.0.1:7001", password: "m-secret-1"}
  - {addr: "127.0.0.1:7002"}
  - {addr: "127.0.0.1:7003"}
master_defaults: {username: locker, password: "m-secret-2"}
limits: {max_ttl: 30s}
log_format: json
auth:
  password: "a-secret-3"
  users:
    - {name: billing, password_sha256: "` + strings.Repeat("ab", 32) + `", resources: ["billing:*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var all []string
	for _, s := range cfg.NonDefault() {
		got[s.Key] = s.Value
		all = append(all, s.Key+"="+s.Value)
	}
	want := map[string]string{
		"masters[0].addr":               "127.0.0.1:7001",
		"masters[0].password":           "(set)",
		"masters[2].addr":               "127.0.0.1:7003",
		"master_defaults.username":      "locker",
		"master_defaults.password":      "(set)",
		"limits.max_ttl":                "30s",
		"log_format":                    "json",
		"auth.password":                 "(set)",
		"auth.users[0].name":            "billing",
		"auth.users[0].password_sha256": "(set)",
		"auth.users[0].resources":       "[billing:*]",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"listen", "limits.max_wait", "masters[1].password", "masters[1].username", "fair.stale_after", "log_level"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q listed, but it is the default", k, v)
		}
	}
	joined := strings.Join(all, " ")
	for _, secret := range []string{"m-secret-1", "m-secret-2", "a-secret-3", "abab"} {
		if strings.Contains(joined, secret) {
			t.Errorf("a secret is shown: %s", joined)
		}
	}
}
