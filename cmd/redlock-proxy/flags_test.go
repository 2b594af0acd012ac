package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/config"
)

// TestRunArgs: what the command line gives before anything starts: help,
// the version, and each kind of mistake reported once, on its own.
func TestRunArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		err     string // substring of the error; "" for none
		isHelp  bool
		stdout  []string
		noStdio bool // nothing printed on stderr (run's caller prints err once)
	}{
		{name: "help", args: []string{"--help"}, isHelp: true, stdout: []string{
			"redlock-proxy: a lock service that speaks the Redis protocol",
			"Configuration: --config FILE", "/etc/redlock-proxy/config.yaml",
			"A flag overrides the environment", "docs/PROTOCOL.md", "Flags:\n", "-metrics-listen host:port"}},
		{name: "-h", args: []string{"-h"}, isHelp: true, stdout: []string{"Flags:\n"}},
		{name: "version", args: []string{"--version"}, stdout: []string{"redlock-proxy ", "(go"}},
		{name: "unknown flag", args: []string{"--dev", "--bogus"}, err: "flag provided but not defined: -bogus (redlock-proxy --help lists the flags)", noStdio: true},
		{name: "bad value", args: []string{"--dev-masters", "many"}, err: `invalid value "many" for flag -dev-masters`, noStdio: true},
		{name: "stray argument", args: []string{"--dev", "config.yaml", "--listen", "127.0.0.1:1"}, err: `unexpected argument "config.yaml"`, noStdio: true},
		{name: "stray argument first", args: []string{"run"}, err: `unexpected argument "run"`, noStdio: true},
		{name: "neither", args: nil, err: "give --config FILE, or --dev", noStdio: true},
		{name: "both", args: []string{"--dev", "--config", "x.yaml"}, err: "--dev and --config exclude each other", noStdio: true},
		{name: "bad log level", args: []string{"--dev", "--log-level", "loud"}, err: `--log-level "loud": must be debug, info, warn or error`, noStdio: true},
		{name: "bad log format", args: []string{"--dev", "--log-format", "xml"}, err: `log_format: "xml" must be text or json`, noStdio: true},
		{name: "bad metrics address", args: []string{"--dev", "--metrics-listen", "nowhere"}, err: "metrics_listen:", noStdio: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, func(string) string { return "" }, &out, &errOut)
			switch {
			case tc.isHelp:
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want flag.ErrHelp", err)
				}
			case tc.err == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want one containing %q", err, tc.err)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, out.String())
				}
			}
			if tc.noStdio && (out.Len() > 0 || errOut.Len() > 0) {
				t.Errorf("printed besides the error: stdout %q stderr %q", out.String(), errOut.String())
			}
		})
	}
}

// TestPrecedence: a flag overrides the environment, which overrides the
// file, which overrides the defaults; "off" turns the metrics listener off
// from any of them; each value says where it came from.
func TestPrecedence(t *testing.T) {
	const file = "masters: [{addr: \"127.0.0.1:7001\"}]\nlisten: \"127.0.0.1:7100\"\nmetrics_listen: \"127.0.0.1:7101\"\nlog_format: json\n"
	for _, tc := range []struct {
		name                string
		args                []string
		env                 map[string]string
		yaml                string
		listen, metrics     string
		listenFrom, metFrom string // "" when the file or the defaults gave it
		format              string
		level               slog.Level
	}{
		{name: "defaults", yaml: "masters: [{addr: \"127.0.0.1:7001\"}]\n",
			listen: "127.0.0.1:6380", metrics: "127.0.0.1:9121", format: "text"},
		{name: "file", yaml: file, listen: "127.0.0.1:7100", metrics: "127.0.0.1:7101", format: "json"},
		{name: "env over file", yaml: file,
			env:    map[string]string{envListen: "0.0.0.0:6380", envMetricsListen: "0.0.0.0:9121"},
			listen: "0.0.0.0:6380", metrics: "0.0.0.0:9121", format: "json",
			listenFrom: "environment " + envListen, metFrom: "environment " + envMetricsListen},
		{name: "flag over env", yaml: file, args: []string{"--listen", "127.0.0.1:7200", "--metrics-listen", "off", "--log-format", "text", "--log-level", "DEBUG"},
			env:    map[string]string{envListen: "0.0.0.0:6380", envMetricsListen: "0.0.0.0:9121"},
			listen: "127.0.0.1:7200", metrics: "", format: "text", level: slog.LevelDebug,
			listenFrom: "flag --listen", metFrom: "flag --metrics-listen"},
		{name: "off in the file", yaml: "masters: [{addr: \"127.0.0.1:7001\"}]\nmetrics_listen: \"off\"\n",
			listen: "127.0.0.1:6380", metrics: "", format: "text"},
		{name: "off in the environment", yaml: file, env: map[string]string{envMetricsListen: "off"},
			listen: "127.0.0.1:7100", metrics: "", format: "json", metFrom: "environment " + envMetricsListen},
		{name: "an empty variable is unset", yaml: file, env: map[string]string{envListen: ""},
			listen: "127.0.0.1:7100", metrics: "127.0.0.1:7101", format: "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			from, err := f.apply(cfg, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if cfg.Listen != tc.listen || cfg.MetricsListen != tc.metrics || cfg.LogFormat != tc.format || cfg.LogLevel != tc.level {
				t.Errorf("listen %q metrics_listen %q log_format %q log_level %v, want %q %q %q %v",
					cfg.Listen, cfg.MetricsListen, cfg.LogFormat, cfg.LogLevel, tc.listen, tc.metrics, tc.format, tc.level)
			}
			if from["listen"] != tc.listenFrom || from["metrics_listen"] != tc.metFrom {
				t.Errorf("from = %v, want listen from %q, metrics_listen from %q", from, tc.listenFrom, tc.metFrom)
			}
		})
	}
}
