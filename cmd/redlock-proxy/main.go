// Command redlock-proxy is a RESP server that runs the Redlock algorithm
// against N independent Redis masters for any Redis client.
//
//	redlock-proxy --dev                  # embedded in-process masters, for trying it out
//	redlock-proxy --config config.yaml   # real masters
//
// Flags override single configuration values; see --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-proxy/redlock-proxy/commands"
	"github.com/redlock-proxy/redlock-proxy/config"
	"github.com/redlock-proxy/redlock-proxy/internal/buildinfo"
	"github.com/redlock-proxy/redlock-proxy/metrics"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/quorum/redisnode"
	"github.com/redlock-proxy/redlock-proxy/relay"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h / --help: the usage was printed, as asked
		}
		fmt.Fprintln(os.Stderr, "redlock-proxy:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f, fset, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, fset)
		return err
	}
	if err != nil {
		return err
	}
	if f.showVersion {
		fmt.Fprintf(stdout, "redlock-proxy %s (%s %s/%s)\n", buildinfo.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			pf.Close()
		}()
	}
	var cfg *config.Config
	var devMasters []*miniredis.Miniredis
	switch {
	case f.dev && f.config != "":
		return errors.New("--dev and --config exclude each other")
	case f.dev:
		cfg = config.Default()
		cfg.MasterTimeout = devMasterTimeout
		if devMasters, err = startDevMasters(f.devMasters); err != nil {
			return err
		}
		for _, m := range devMasters {
			defer m.Close()
			cfg.Masters = append(cfg.Masters, config.Master{Addr: m.Addr()})
		}
	case f.config != "":
		if cfg, err = config.Load(f.config); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no configuration at %s: write one (config.yaml in the repository is a commented sample), or mount it there in a container", f.config)
			}
			return fmt.Errorf("%s: %w", f.config, err)
		}
	default:
		return errors.New("give --config FILE, or --dev to try it with embedded masters")
	}
	from, err := f.apply(cfg, getenv)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}

	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	cfgFile := "file " + f.config
	if f.dev {
		cfgFile = "--dev"
	}
	for _, st := range cfg.NonDefault() {
		src, ok := from[st.Key]
		if !ok {
			src = cfgFile
		}
		log.Info("setting", "key", st.Key, "value", st.Value, "from", src)
	}
	if n := len(cfg.Masters); n < 3 {
		log.Warn("fewer than 3 masters: no fault tolerance, every master must answer for a quorum; use 3 or 5 independent masters",
			"masters", n, "quorum", max(cfg.Quorum, n/2+1))
	}
	if f.dev && cfg.LogFormat == "json" {
		// One JSON object a line, the banner too.
		log.Warn("DEV MODE: embedded in-process masters (miniredis). NOT FOR PRODUCTION: nothing is persisted and every master dies with this process",
			"masters", len(devMasters))
	} else if f.dev {
		fmt.Fprintf(stderr, "\n*** DEV MODE: %d embedded in-process masters (miniredis). NOT FOR PRODUCTION: ***\n"+
			"*** nothing is persisted and every master dies with this process.           ***\n\n", len(devMasters))
	}
	quarantine := cfg.Limits.MaxTTL
	warnQuarantine(log, cfg)
	if !cfg.RestartQuarantine {
		quarantine = 0
		log.Warn("restart_quarantine is off: a master that restarts without persistence forgets its locks, and its vote counts again at once, so a second client can be granted a lock that is still held")
	}

	wake := quorum.NewWakeups()
	bus := relay.NewBus()
	notify := func(channel, message string) {
		if !bus.Notify(channel, message) {
			wake.Notify(channel, message)
		}
	}
	nodes := make([]quorum.Node, 0, len(cfg.Masters))
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	clusterOf := map[string]int{} // node ID -> master index, for cluster masters
	for i := range cfg.Masters {
		m := cfg.MasterFor(i)
		tlsCfg, err := masterTLS(m.TLS, fmt.Sprintf("masters[%d]", i))
		if err != nil {
			return err
		}
		o := redisnode.Options{Addr: m.Addr, Username: m.Username, Password: m.Password, TLS: tlsCfg,
			FlushDelay: cfg.MasterFlushDelay, Notify: notify, NotifyPattern: func(pattern, channel, message string) { bus.NotifyPattern(pattern, channel, message) },
			Logger: log}
		if len(m.Cluster) > 0 {
			c, err := redisnode.NewCluster(redisnode.ClusterOptions{Seeds: m.Cluster, Node: o, Quarantine: quarantine})
			if err != nil {
				return err
			}
			closers = append(closers, c.Close)
			// Two entries that are one cluster would cast two votes.
			for _, id := range c.NodeIDs() {
				if j, dup := clusterOf[id]; dup {
					return fmt.Errorf("masters[%d] and masters[%d] are one Redis Cluster (both list node %s): each master must be an independent cluster", j, i, id)
				}
				clusterOf[id] = i
			}
			nodes = append(nodes, c)
			continue
		}
		n, err := redisnode.New(o)
		if err != nil {
			return err
		}
		closers = append(closers, n.Close)
		nodes = append(nodes, n)
	}
	var eng *quorum.Engine
	met := metrics.New(func() []quorum.NodeStatus { return eng.Operator().Status().Masters })
	eng, err = quorum.New(nodes, quorum.Options{
		Quorum:        cfg.Quorum,
		DriftFactor:   cfg.DriftFactor,
		MasterTimeout: cfg.MasterTimeout,
		RetryDelay:    cfg.RetryDelay,
		RetryJitter:   cfg.RetryJitter,
		ReleaseRetry:  releaseRetry(cfg.ReleaseRetry),
		KeyPrefix:     cfg.KeyPrefix,
		MetaPrefix:    cfg.MetaPrefix,
		Quarantine:    quarantine,
		MaxTTL:        cfg.Limits.MaxTTL,
		Wakeups:       wake,
		Relay:         bus,
		Observer:      met,
		Logger:        log,
	})
	if err != nil {
		return err
	}
	defer eng.Close()

	listenTLS, err := serverTLS(cfg.TLS)
	if err != nil {
		return err
	}
	cmds, cmdInfo := commands.AllWithInfo(commands.FromQuorum(eng), commands.Limits{MaxTTL: cfg.Limits.MaxTTL, MaxWait: cfg.Limits.MaxWait, MaxLatchCount: cfg.Limits.MaxArgs,
		MaxAutoExtend: cfg.Limits.MaxAutoExtendPerConn, Leases: met, DropIn: cfg.DropIn, DropinScripts: met.DropinScript,
		DropinRefused: met.DropinRefused, Log: log,
		DropinDeclared: declaredScripts(cfg.DropinScripts), Publisher: bus})
	unknown := commands.PlainUnknown()
	if cfg.DropIn {
		unknown = commands.DropinUnknown
	}
	srv, err := proxy.New(proxy.Options{
		Commands:   cmds,
		Broker:     bus,
		Unknown:    unknown,
		MapError:   commands.MapError,
		Version:    buildinfo.Version(),
		MaxClients: cfg.Limits.MaxClients,
		Limits: proxy.Limits{
			MaxArgs:         cfg.Limits.MaxArgs,
			MaxArgBytes:     cfg.Limits.MaxArgBytes,
			MaxCommandBytes: cfg.Limits.MaxCommandBytes,
		},
		IdleTimeout:    cfg.Limits.IdleTimeout,
		RequestTimeout: cfg.Limits.RequestTimeout,
		Auth:           withAdmin(authOptions(cfg.Auth), cfg.Admin),
		TLS:            listenTLS,
		Info:           append([]proxy.InfoSection{commands.MastersInfo(commands.FromQuorum(eng))}, cmdInfo...),
		Observer:       met,
		Logger:         log,
	})
	if err != nil {
		return err
	}
	met.Waiting(srv.Blocked)
	met.Masters(len(nodes), eng.Operator().Status().Quorum)
	met.InitCommands(commandLabels(srv.Table()))
	met.GrantedTTL(func() time.Duration { return eng.Operator().Status().MaxGrantedTTL })

	var ln net.Listener
	if f.listenFD > 0 {
		file := os.NewFile(uintptr(f.listenFD), "listener")
		ln, err = net.FileListener(file)
		file.Close()
	} else {
		ln, err = net.Listen("tcp", cfg.Listen)
	}
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}

	var hs *http.Server
	metricsAddr := ""
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics_listen: %w", err)
		}
		hs = &http.Server{
			Handler:           met.Handler(func() bool { return eng.Operator().Status().Ready() }),
			ReadHeaderTimeout: 5 * time.Second,
		}
		go hs.Serve(mln)
		metricsAddr = mln.Addr().String()
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("redlock-proxy listening", "addr", ln.Addr().String(), "tls", listenTLS != nil,
		"auth", cfg.Auth.Password != "" || len(cfg.Auth.Users) > 0, "masters", len(nodes), "quorum", eng.Operator().Status().Quorum,
		"metrics", metricsAddr, "version", buildinfo.Version())

	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown cut short", "err", err)
	}
	if hs != nil {
		hs.Shutdown(sctx)
	}
	return nil
}

// newLogger logs at level and above, as logfmt text or (format "json")
// one JSON object a line.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// commandLabels are the metric labels of every command in the table: its
// result values, and NOQUORUM for a command that asks the masters (one
// that names resources).
func commandLabels(t *proxy.Table) []metrics.CommandLabels {
	var out []metrics.CommandLabels
	for _, c := range t.Commands() {
		l := metrics.CommandLabels{Name: c.Name, Results: c.Result.Labels()}
		if c.FirstKey > 0 || c.Keys != nil {
			l.Errors = []string{"NOQUORUM"}
		}
		out = append(out, l)
	}
	return out
}

// declaredScripts maps dropin_scripts onto the commands' declarations
// (Validate checked each already).
func declaredScripts(ds []config.DropinScript) []commands.DeclaredScript {
	var out []commands.DeclaredScript
	for _, d := range ds {
		if sha, decl, err := d.Resolve(); err == nil {
			out = append(out, commands.DeclaredScript{SHA1: sha, Declaration: decl})
		}
	}
	return out
}
