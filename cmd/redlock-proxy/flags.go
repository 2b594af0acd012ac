package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/config"
)

// Where a value set outside the configuration file comes from. The order
// is flags, then the environment, then the file, then the defaults: each
// overrides those after it.
const (
	envListen        = "REDLOCK_PROXY_LISTEN"
	envMetricsListen = "REDLOCK_PROXY_METRICS_LISTEN"
)

type flags struct {
	config        string
	dev           bool
	devMasters    int
	listen        string
	listenFD      int
	metricsListen string
	logLevel      string
	logFormat     string
	cpuProfile    string
	showVersion   bool
	set           map[string]bool // the flags given on the command line
}

// newFlagSet declares the flags into f. The set prints nothing itself:
// run prints the help (printHelp) or the one error.
func newFlagSet(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&f.config, "config", "", "the configuration `file` (YAML)")
	fs.BoolVar(&f.dev, "dev", false, "run with embedded in-process masters, for trying it out (nothing persisted; not for production)")
	fs.IntVar(&f.devMasters, "dev-masters", 3, "how many embedded masters with --dev")
	fs.StringVar(&f.listen, "listen", "", "listen on this `host:port` (overrides $"+envListen+" and listen:)")
	fs.IntVar(&f.listenFD, "listen-fd", 0, "serve on an inherited listening socket with this file descriptor (overrides --listen)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", `serve /metrics, /healthz and /readyz on this `+"`host:port`"+`, or "off" (overrides $`+envMetricsListen+" and metrics_listen:)")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (overrides log_level:)")
	fs.StringVar(&f.logFormat, "log-format", "", "text or json (overrides log_format:)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile to this `file` until the proxy stops")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	return fs
}

// parseFlags parses the command line. An unknown flag or a bad value is
// one error (run prints it once); an argument that is not a flag is an
// error too (the flag package would stop there and drop the flags after
// it). -h and --help return flag.ErrHelp and the set, for printHelp.
func parseFlags(args []string) (*flags, *flag.FlagSet, error) {
	f := &flags{set: map[string]bool{}}
	fs := newFlagSet(f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, fs, err
		}
		return nil, fs, fmt.Errorf("%w (redlock-proxy --help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q: redlock-proxy takes only flags (redlock-proxy --help lists them)", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, fs, nil
}

// apply puts the values given by flags and the environment onto cfg, in
// their order of precedence (a flag over the environment over the file),
// and returns where each value it set came from, by configuration key.
// Values are checked by cfg.Validate afterwards, except the log level,
// which is parsed here.
func (f *flags) apply(cfg *config.Config, getenv func(string) string) (map[string]string, error) {
	from := map[string]string{}
	pick := func(key, flagName, flagVal, env string) (string, bool) {
		if f.set[flagName] {
			from[key] = "flag --" + flagName
			return flagVal, true
		}
		if env != "" {
			if v := getenv(env); v != "" {
				from[key] = "environment " + env
				return v, true
			}
		}
		return "", false
	}
	if v, ok := pick("listen", "listen", f.listen, envListen); ok {
		cfg.Listen = v
	}
	if v, ok := pick("metrics_listen", "metrics-listen", f.metricsListen, envMetricsListen); ok {
		cfg.MetricsListen = v // "off" turns it off, as in the file (Validate)
	}
	if v, ok := pick("log_level", "log-level", f.logLevel, ""); ok {
		var l slog.Level
		if !validLevel(v) || l.UnmarshalText([]byte(v)) != nil {
			return nil, fmt.Errorf("--log-level %q: must be debug, info, warn or error", v)
		}
		cfg.LogLevel = l
	}
	if v, ok := pick("log_format", "log-format", f.logFormat, ""); ok {
		cfg.LogFormat = v
	}
	return from, nil
}

func validLevel(v string) bool {
	switch strings.ToLower(v) {
	case "debug", "info", "warn", "error":
		return true
	}
	return false
}

// printHelp is --help: what the proxy is, where its configuration and
// documentation are, then the flags.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `redlock-proxy: a lock service that speaks the Redis protocol. Any Redis
client sends RLOCK, RUNLOCK, REXTEND (and multi-resource, fair and
read-write locks, semaphores, latches); the proxy runs the Redlock
algorithm against N independent Redis masters and answers with a token, a
validity and a fencing token from the same quorum. It keeps no state of
its own: run several side by side.

Usage:
  redlock-proxy --config FILE [flags]   serve with the masters of FILE
  redlock-proxy --dev [flags]           try it with embedded masters on 127.0.0.1:6380

Configuration: --config FILE, a YAML file (config.yaml in the source is a
commented sample with every key and its default; the container image
reads /etc/redlock-proxy/config.yaml). A flag overrides the environment
($`+envListen+`, $`+envMetricsListen+`), which overrides the file,
which overrides the defaults. The values that differ from the defaults
are logged at start, each with where it came from.

Documentation: README.md (start here), docs/PROTOCOL.md (every command,
reply, error and configuration key), docs/troubleshooting.md,
docs/metrics.md.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
