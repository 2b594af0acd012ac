package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestSampleLoads(t *testing.T) {
	cfg, err := Load("../config.yaml")
	if err != nil {
		t.Fatalf("sample config.yaml: %v", err)
	}
	if len(cfg.Masters) != 3 || cfg.MasterTimeout != 50*time.Millisecond || cfg.Limits.MaxTTL != time.Hour {
		t.Fatalf("unexpected sample: %+v", cfg)
	}
}

func TestDefaultsApply(t *testing.T) {
	cfg, err := Parse([]byte("masters: [{addr: 'a:1'}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	if cfg.Listen != want.Listen || cfg.MetaPrefix != "redlock-proxy:" || cfg.RetryDelay != want.RetryDelay || !cfg.RestartQuarantine || cfg.LogLevel != slog.LevelInfo {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

// TestZeroDuration: a bare 0 is a duration (0s), as Go's syntax has it.
func TestZeroDuration(t *testing.T) {
	cfg, err := Parse([]byte("masters: [{addr: 'a:1'}]\nmaster_flush_delay: 0\nlimits: {idle_timeout: 0, request_timeout: '5s'}\n"))
	if err != nil || cfg.MasterFlushDelay != 0 || cfg.Limits.IdleTimeout != 0 || cfg.Limits.RequestTimeout != 5*time.Second {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

// TestLogLevel: the four levels, in any case.
func TestLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "ERROR": slog.LevelError} {
		cfg, err := Parse([]byte("masters: [{addr: 'a:1'}]\nlog_level: " + in + "\n"))
		if err != nil || cfg.LogLevel != want {
			t.Errorf("log_level %s: %v, %v; want %v", in, cfg, err, want)
		}
	}
}

// TestFairStaleAfterUnused: fair.stale_after is still read (the
// contract's configuration sets it), whatever its value, and governs
// nothing: 10s by default, a value that is set is kept, and only a
// negative one is refused.
func TestFairStaleAfterUnused(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"masters: [{addr: 'a:1'}]\n", 10 * time.Second},
		{"masters: [{addr: 'a:1'}]\nretry_delay: 10s\nretry_jitter: 0s\n", 10 * time.Second},
		{"masters: [{addr: 'a:1'}]\nfair: {stale_after: 300ms}\n", 300 * time.Millisecond},
	} {
		cfg, err := Parse([]byte(tc.yaml))
		if err != nil || cfg.Fair.StaleAfter != tc.want {
			t.Errorf("%q: stale_after %v (%v), want %v", tc.yaml, cfg.Fair.StaleAfter, err, tc.want)
		}
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("RP_TEST_ADDR", "10.0.0.1:6379")
	t.Setenv("RP_TEST_Q", "2")
	cfg, err := Parse([]byte("masters: [{addr: '${RP_TEST_ADDR}'}, {addr: 'b:1'}, {addr: 'c:1'}]\nquorum: ${RP_TEST_Q}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Masters[0].Addr != "10.0.0.1:6379" || cfg.Quorum != 2 {
		t.Fatalf("env not expanded: %+v", cfg)
	}
	_, err = Parse([]byte("masters: [{addr: '${RP_TEST_MISSING_VAR}'}]\n"))
	if err == nil || !strings.Contains(err.Error(), "RP_TEST_MISSING_VAR") {
		t.Fatalf("missing variable: %v", err)
	}
}

func TestMasterDefaults(t *testing.T) {
	cfg, err := Parse([]byte("masters: [{addr: 'a:1'}, {addr: 'b:1', username: own, tls: {server_name: b}}]\n" +
		"master_defaults: {username: shared, password: pw, tls: {ca_file: ca.pem}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.MasterFor(0), cfg.MasterFor(1)
	if a.Username != "shared" || a.Password != "pw" || a.TLS == nil || a.TLS.CAFile != "ca.pem" {
		t.Fatalf("defaults not applied: %+v", a)
	}
	if b.Username != "own" || b.Password != "pw" || b.TLS.ServerName != "b" || b.TLS.CAFile != "" {
		t.Fatalf("own fields not kept: %+v %+v", b, b.TLS)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every one must appear in the error
	}{
		{"unknown key", "masters: [{addr: 'a:1'}]\nfoo: 1\n", []string{"foo: unknown key (line 2)"}},
		{"unknown nested key", "masters: [{addr: 'a:1', port: 3}]\n", []string{"masters[0].port: unknown key (line 1)"}},
		{"no masters", "listen: ':1'\n", []string{"masters: at least one"}},
		{"empty and duplicate addr", "masters: [{addr: ''}, {addr: 'a:1'}, {addr: 'a:1'}]\n",
			[]string{"masters[0].addr: empty", "masters[2].addr: a:1 duplicates masters[1].addr"}},
		{"quorum below majority", "masters: [{addr: 'a:1'}, {addr: 'b:1'}, {addr: 'c:1'}]\nquorum: 1\n", []string{"quorum: 1 is below the majority (2 of 3"}},
		{"quorum above N", "masters: [{addr: 'a:1'}]\nquorum: 2\n", []string{"quorum: 2 is more than"}},
		{"bad duration", "masters: [{addr: 'a:1'}]\nmaster_timeout: fast\n", []string{"invalid duration \"fast\""}},
		{"duration without a unit", "masters: [{addr: 'a:1'}]\nretry_delay: 100\n", []string{"retry_delay: invalid duration \"100\""}},
		{"bad log level", "masters: [{addr: 'a:1'}]\nlog_level: verbose\n", []string{"log_level: \"verbose\" must be debug, info, warn or error (line 2)"}},
		{"log level offset", "masters: [{addr: 'a:1'}]\nlog_level: info+2\n", []string{"log_level: \"info+2\" must be debug, info, warn or error"}},
		{"every reading problem at once, with its key", "masters: [{addr: 'a:1', tls: 3}]\nfoo: 1\nquorum: two\nmaster_timeout: fast\nlimits: {max_ttl: xx, bogus: 2}\nrestart_quarantine: maybe\n",
			[]string{"masters[0].tls: want a mapping of keys (line 1)", "foo: unknown key (line 2)", "quorum: want an integer, not \"two\" (line 3)",
				"master_timeout: invalid duration \"fast\"", "limits.max_ttl: invalid duration \"xx\"", "limits.bogus: unknown key (line 5)",
				"restart_quarantine: want true or false, not \"maybe\" (line 6)"}},
		{"timeout vs max_ttl", "masters: [{addr: 'a:1'}]\nmaster_timeout: 1s\nlimits: {max_ttl: 5s}\n", []string{"master_timeout: 1s must be well below limits.max_ttl"}},
		{"several at once", "masters: [{addr: 'nohost'}]\ndrift_factor: 0.9\nmeta_prefix: ''\nretry_delay: 0s\n",
			[]string{"masters[0].addr", "drift_factor", "meta_prefix: empty", "retry_delay"}},
		{"key prefix inside meta", "masters: [{addr: 'a:1'}]\nkey_prefix: 'redlock-proxy:x'\n", []string{"key_prefix"}},
		{"users", "masters: [{addr: 'a:1'}]\nauth:\n  users:\n  - {name: default, password: x, resources: ['*']}\n  - {name: b, resources: []}\n  - {name: c, password: x, password_sha256: abc, resources: ['']}\n  - {name: c, password_sha256: abc, resources: ['x']}\n  - {name: d, password: x, resources: ['x'], channels: ['']}\n",
			[]string{"auth.users[4].channels[0]: empty pattern", "auth.users[0].name: the default user", "auth.users[1]: needs password", "auth.users[1].resources: empty",
				"auth.users[2]: password and password_sha256 exclude", "auth.users[2].resources[0]: empty pattern",
				"auth.users[3].name: \"c\" duplicates auth.users[2]", "auth.users[3].password_sha256: must be 64"}},
		{"tls", "masters: [{addr: 'a:1', tls: {cert_file: a}}]\ntls: {cert_file: a, min_version: '1.1'}\n",
			[]string{"tls: cert_file and key_file are both required", "tls.min_version", "masters[0].tls: cert_file and key_file go together"}},
		{"fair stale_after negative", "masters: [{addr: 'a:1'}]\nfair: {stale_after: -1s}\n",
			[]string{"fair.stale_after: must not be negative"}},
		{"dropin_scripts", "masters: [{addr: 'a:1'}]\ndropin_scripts:\n- {sha1: abc, shape: release, value: 1}\n- {shape: release, value: 1}\n- {sha1: 0123456789012345678901234567890123456789, shape: teleport, value: 1}\n- {sha1: 0123456789012345678901234567890123456789, shape: acquire, value: 1}\n- {file: /nonexistent.lua, shape: release, value: 1}\n",
			[]string{"dropin_scripts[0]: sha1 \"abc\": 40 hex digits", "dropin_scripts[1]: give file or sha1", "dropin_scripts[2]: unknown shape \"teleport\"",
				"dropin_scripts[3]: acquire needs the ARGV index of the ttl", "dropin_scripts[4]: open /nonexistent.lua"}},
		{"limits", "masters: [{addr: 'a:1'}]\nlimits: {max_command_bytes: 1000, idle_timeout: -1s, request_timeout: 0s}\n",
			[]string{"limits.max_command_bytes: 1000 must be at least", "limits.idle_timeout", "limits.request_timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
