package main

import (
	"log/slog"
	"time"

	"github.com/redlock-proxy/redlock-proxy/config"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// longQuarantine is the limits.max_ttl above which the start-up warns:
// a master restarted empty whose quarantine cannot be sized (a majority
// restarted at once) keeps its vote out for max_ttl.
const longQuarantine = 10 * time.Minute

// warnQuarantine logs at start what the restart quarantine may cost, and
// who may end one (docs/troubleshooting.md, "All masters quarantined").
func warnQuarantine(log *slog.Logger, cfg *config.Config) {
	if cfg.RestartQuarantine && cfg.Limits.MaxTTL > longQuarantine {
		log.Warn("limits.max_ttl is long: if a majority of masters restart empty at once, their quarantine cannot be sized and lasts max_ttl, with the service answering NOQUORUM meanwhile; lower max_ttl to the longest ttl your clients use (redlock_proxy_granted_ttl_max_seconds shows it)",
			"max_ttl", cfg.Limits.MaxTTL)
	}
	authOn := cfg.Auth.Password != "" || len(cfg.Auth.Users) > 0
	if cfg.Admin && !authOn {
		log.Warn("admin is true and auth is off: every client may run RQUARANTINE END")
	}
}

// withAdmin sets whether the default user may run admin commands.
func withAdmin(a proxy.Auth, admin bool) proxy.Auth {
	a.DefaultAdmin = admin
	return a
}

// releaseRetry is the engine's ReleaseRetry for the configuration's
// release_retry: 0s there turns it off (negative for the engine, whose 0
// is its default).
func releaseRetry(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
