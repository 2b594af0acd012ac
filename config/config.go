// Package config is redlock-proxy's configuration: one typed struct read
// from YAML (gopkg.in/yaml.v3, unknown keys refused), defaults filled in
// first, and a validation that reports every problem at once, each named by
// its YAML key. Any value may be written ${NAME} to take it from the
// environment. It is imported only by main.
package config

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/redlock-proxy/redlock-proxy/internal/luashape"
)

// Config is the whole configuration; PROTOCOL.md ("Configuration") is its
// reference.
type Config struct {
	Listen        string        `yaml:"listen"`
	MetricsListen string        `yaml:"metrics_listen"`
	Masters       []Master      `yaml:"masters"`
	Quorum        int           `yaml:"quorum"`
	KeyPrefix     string        `yaml:"key_prefix"`
	MetaPrefix    string        `yaml:"meta_prefix"`
	DriftFactor   float64       `yaml:"drift_factor"`
	MasterTimeout time.Duration `yaml:"master_timeout"`
	// MasterFlushDelay makes a write to a master wait this long for more
	// commands to join it when others are in flight. Default 0: commands
	// issued while a write is in progress already go out together in the
	// next write (see quorum/redisnode), and a lone command never waits.
	MasterFlushDelay  time.Duration `yaml:"master_flush_delay"`
	RetryDelay        time.Duration `yaml:"retry_delay"`
	RetryJitter       time.Duration `yaml:"retry_jitter"`
	RestartQuarantine bool          `yaml:"restart_quarantine"`
	// DropIn serves lock libraries written for one Redis unchanged (SET
	// NX PX, their lock scripts) as quorum operations; default false.
	DropIn bool `yaml:"dropin"`
	// DropinScripts declares lock scripts that drop-in mode's recogniser
	// cannot place: each names the script (its file, or its SHA1) and the
	// lock operation it is.
	DropinScripts []DropinScript `yaml:"dropin_scripts"`
	// Admin lets the default user run admin commands (RQUARANTINE): every
	// client when auth is off, a client that gave auth.password
	// otherwise; default false. Named users have their own admin flag.
	Admin bool `yaml:"admin"`
	// ReleaseRetry is how long a release or extension whose answers
	// within master_timeout decide nothing keeps asking the masters that
	// failed or stayed silent before answering NOQUORUM (a release also
	// until the lock's validity ends, when that is later); default 1s,
	// 0s turns it off.
	ReleaseRetry time.Duration `yaml:"release_retry"`
	// MasterDefaults apply to every master that does not set the field
	// itself: shared ACL credentials and TLS.
	MasterDefaults MasterDefaults `yaml:"master_defaults"`
	Limits         Limits         `yaml:"limits"`
	Fair           Fair           `yaml:"fair"`
	Auth           Auth           `yaml:"auth"`
	TLS            *TLS           `yaml:"tls"`
	// LogLevel is debug, info, warn or error; default info.
	LogLevel slog.Level `yaml:"log_level"`
	// LogFormat is text (logfmt, the default) or json (one object a line,
	// for log shippers).
	LogFormat string `yaml:"log_format"`
}

// Master is one Redis master: a single server (Addr) or a Redis Cluster
// (Cluster, its seed nodes), whose shards together cast the master's vote.
type Master struct {
	Addr     string     `yaml:"addr"`
	Cluster  []string   `yaml:"cluster"`
	Username string     `yaml:"username"`
	Password string     `yaml:"password"`
	TLS      *MasterTLS `yaml:"tls"`
}

// MasterDefaults are the fields masters share unless they set their own.
type MasterDefaults struct {
	Username string     `yaml:"username"`
	Password string     `yaml:"password"`
	TLS      *MasterTLS `yaml:"tls"`
}

// MasterTLS configures TLS to a master: the CA that signed its certificate
// (empty: the system's), a client certificate if the master asks for one,
// and the name to verify (empty: the host of addr).
type MasterTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// Limits bound what clients may ask for and send.
type Limits struct {
	MaxTTL      time.Duration `yaml:"max_ttl"`
	MaxWait     time.Duration `yaml:"max_wait"`
	MaxClients  int           `yaml:"max_clients"`
	MaxArgBytes int           `yaml:"max_arg_bytes"`
	MaxArgs     int           `yaml:"max_args"`
	// MaxCommandBytes caps one command on the wire; default 1 MiB.
	MaxCommandBytes int `yaml:"max_command_bytes"`
	// MaxAutoExtendPerConn caps the AUTOEXTEND leases one connection keeps
	// alive; default 1000.
	MaxAutoExtendPerConn int `yaml:"max_autoextend_per_conn"`
	// IdleTimeout closes a connection silent for this long; 0s (the
	// default) never does, as Redis's "timeout 0": lock clients keep pooled
	// connections idle for long stretches.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// RequestTimeout closes a connection whose command has started to
	// arrive but is not complete after this long (a slowloris), and bounds
	// the TLS handshake; default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
}

// Fair configures fair locks (RFAIRLOCK).
type Fair struct {
	// StaleAfter is accepted and not used: a waiter whose proxy died
	// leaves its queue within about a second whatever it says (its place
	// lives one second past the proxy's latest try, and a waiting proxy
	// tries at least every 250 ms; docs/design/waiters.md). Default 10s.
	StaleAfter time.Duration `yaml:"stale_after"`
}

// Auth configures client authentication.
type Auth struct {
	Password string `yaml:"password"`
	Users    []User `yaml:"users"`
}

// User is a named user limited to resource patterns.
type User struct {
	Name           string   `yaml:"name"`
	Password       string   `yaml:"password"`
	PasswordSHA256 string   `yaml:"password_sha256"`
	Resources      []string `yaml:"resources"`
	// Channels are the glob patterns of the pub/sub channels the user may
	// subscribe to and publish on; omitted, the resources patterns; an
	// empty list allows none.
	Channels []string `yaml:"channels"`
	// Admin lets the user run admin commands (RQUARANTINE); default false.
	Admin bool `yaml:"admin"`
}

// TLS configures TLS on the RESP listener.
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.2" (the default) or "1.3".
	MinVersion string `yaml:"min_version"`
}

// Default returns the configuration with every default of PROTOCOL.md and
// no masters.
func Default() *Config {
	return &Config{
		Listen:            "127.0.0.1:6380",
		MetricsListen:     "127.0.0.1:9121",
		MetaPrefix:        "redlock-proxy:",
		DriftFactor:       0.01,
		MasterTimeout:     50 * time.Millisecond,
		MasterFlushDelay:  0,
		RetryDelay:        100 * time.Millisecond,
		ReleaseRetry:      time.Second,
		RetryJitter:       50 * time.Millisecond,
		RestartQuarantine: true,
		Fair:              Fair{StaleAfter: 10 * time.Second},
		Limits: Limits{
			MaxTTL:               time.Hour,
			MaxWait:              5 * time.Minute,
			MaxClients:           10000,
			MaxArgBytes:          65536,
			MaxArgs:              1024,
			MaxCommandBytes:      1 << 20,
			MaxAutoExtendPerConn: 1000,
			RequestTimeout:       10 * time.Second,
		},
		LogLevel:  slog.LevelInfo,
		LogFormat: "text",
	}
}

// Load reads path onto the defaults and validates the result.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse reads YAML onto the defaults and validates the result.
func Parse(b []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	cfg := Default()
	if root.Kind == 0 {
		return cfg, cfg.Validate()
	}
	if err := expandEnv(&root); err != nil {
		return nil, err
	}
	// Every unknown key and every value of the wrong type, each with its
	// key, before decoding (which would stop at the first).
	var problems []error
	if len(root.Content) == 1 {
		checkNode(root.Content[0], reflect.TypeOf(Config{}), "", &problems)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	expanded, err := yaml.Marshal(&root)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return nil, err
	}
	return cfg, cfg.Validate()
}

// checkNode checks a YAML node against the Go type it decodes into,
// appending one "key: problem (line n)" per unknown key or value of the
// wrong kind.
func checkNode(n *yaml.Node, t reflect.Type, path string, problems *[]error) {
	bad := func(format string, args ...any) {
		key := path
		if key == "" {
			key = "configuration"
		}
		*problems = append(*problems, fmt.Errorf("%s: %s (line %d)", key, fmt.Sprintf(format, args...), n.Line))
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return
	}
	switch {
	case t == reflect.TypeOf(slog.Level(0)):
		// The four names only (slog would also take "info+2").
		if n.Kind != yaml.ScalarNode || !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(n.Value)) {
			bad("%q must be debug, info, warn or error", n.Value)
		}
	case t == reflect.TypeOf(time.Duration(0)):
		if n.Kind != yaml.ScalarNode {
			bad("want a duration such as 50ms, 30s, 1h")
		} else if _, err := time.ParseDuration(n.Value); err != nil {
			bad("invalid duration %q (use Go syntax such as 50ms, 30s, 1h)", n.Value)
		} else {
			// A bare 0 is a valid duration but a YAML integer, which yaml.v3
			// refuses for a time.Duration: decode it as the string it is.
			n.Tag = "!!str"
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("want a mapping of keys")
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if path != "" {
				key = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				*problems = append(*problems, fmt.Errorf("%s: unknown key (line %d)", key, k.Line))
				continue
			}
			checkNode(v, ft, key, problems)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("want a list")
			return
		}
		for i, e := range n.Content {
			checkNode(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), problems)
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!bool" && !slices.Contains([]string{"true", "false"}, strings.ToLower(n.Value))) {
			bad("want true or false, not %q", n.Value)
		}
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		if _, err := strconv.ParseInt(n.Value, 0, 64); n.Kind != yaml.ScalarNode || err != nil {
			bad("want an integer, not %q", n.Value)
		}
	case t.Kind() == reflect.Float64:
		if _, err := strconv.ParseFloat(n.Value, 64); n.Kind != yaml.ScalarNode || err != nil {
			bad("want a number, not %q", n.Value)
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			bad("want a string")
		}
	}
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func validateMasterTLS(bad func(key, format string, args ...any), key string, t *MasterTLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad(key, "cert_file and key_file go together")
	}
}

// MasterFor returns master i with master_defaults filled in.
func (c *Config) MasterFor(i int) Master {
	m := c.Masters[i]
	d := c.MasterDefaults
	if m.Username == "" {
		m.Username = d.Username
	}
	if m.Password == "" {
		m.Password = d.Password
	}
	if m.TLS == nil {
		m.TLS = d.TLS
	}
	return m
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${NAME} in every scalar with the environment variable
// NAME; a variable that is not set is an error naming it.
func expandEnv(n *yaml.Node) error {
	var errs []error
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && envRef.MatchString(n.Value) {
			n.Value = envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
				name := envRef.FindStringSubmatch(ref)[1]
				v, ok := os.LookupEnv(name)
				if !ok {
					errs = append(errs, fmt.Errorf("line %d: environment variable %s is not set", n.Line, name))
				}
				return v
			})
			if n.Style == 0 {
				// An unquoted ${NAME} takes the type of its value (quorum: ${Q}).
				n.Tag = ""
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return errors.Join(errs...)
}

// Validate reports every problem at once, each prefixed with its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	for i, d := range c.DropinScripts {
		if _, _, err := d.Resolve(); err != nil {
			bad(fmt.Sprintf("dropin_scripts[%d]", i), "%v", err)
		}
	}
	if c.Listen == "" {
		bad("listen", "empty")
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if c.MetricsListen == "off" {
		c.MetricsListen = "" // as --metrics-listen off
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			bad("metrics_listen", "%v", err)
		}
	}
	n := len(c.Masters)
	if n == 0 {
		bad("masters", "at least one master is required")
	}
	seen := map[string]int{}
	for i, m := range c.Masters {
		key := fmt.Sprintf("masters[%d]", i)
		switch {
		case m.Addr != "" && len(m.Cluster) > 0:
			bad(key, "addr and cluster exclude each other: a master is one server or one cluster")
		case len(m.Cluster) > 0:
			for j, a := range m.Cluster {
				ck := fmt.Sprintf("%s.cluster[%d]", key, j)
				if _, _, err := net.SplitHostPort(a); err != nil {
					bad(ck, "%v", err)
					continue
				}
				if k, dup := seen[a]; dup {
					bad(ck, "%s is also in masters[%d]", a, k)
				}
				seen[a] = i
			}
		case m.Addr == "":
			bad(key+".addr", "empty (or give cluster: seed nodes)")
		default:
			if _, _, err := net.SplitHostPort(m.Addr); err != nil {
				bad(key+".addr", "%v", err)
			}
			if j, dup := seen[m.Addr]; dup {
				bad(key+".addr", "%s duplicates masters[%d].addr", m.Addr, j)
			}
			seen[m.Addr] = i
		}
		if m.TLS != nil {
			validateMasterTLS(bad, key+".tls", m.TLS)
		}
	}
	if c.MasterDefaults.TLS != nil {
		validateMasterTLS(bad, "master_defaults.tls", c.MasterDefaults.TLS)
	}
	majority := n/2 + 1
	switch {
	case c.Quorum < 0:
		bad("quorum", "must not be negative (0 means majority)")
	case c.Quorum != 0 && c.Quorum < majority:
		bad("quorum", "%d is below the majority (%d of %d masters): unsafe", c.Quorum, majority, n)
	case c.Quorum > n && n > 0:
		bad("quorum", "%d is more than the %d masters", c.Quorum, n)
	}
	if c.MetaPrefix == "" {
		bad("meta_prefix", "empty: the proxy's own keys need a namespace")
	} else if len(c.KeyPrefix) >= len(c.MetaPrefix) && c.KeyPrefix[:len(c.MetaPrefix)] == c.MetaPrefix {
		bad("key_prefix", "%q lies inside meta_prefix %q: every resource would be reserved", c.KeyPrefix, c.MetaPrefix)
	}
	if c.DriftFactor < 0 || c.DriftFactor >= 0.5 {
		bad("drift_factor", "%v must be in [0, 0.5)", c.DriftFactor)
	}
	if c.MasterTimeout <= 0 {
		bad("master_timeout", "must be positive")
	} else if c.Limits.MaxTTL > 0 && c.MasterTimeout*10 > c.Limits.MaxTTL {
		bad("master_timeout", "%v must be well below limits.max_ttl %v (at most a tenth)", c.MasterTimeout, c.Limits.MaxTTL)
	}
	if c.MasterFlushDelay < 0 || (c.MasterTimeout > 0 && c.MasterFlushDelay*10 > c.MasterTimeout) {
		bad("master_flush_delay", "must be between 0 and a tenth of master_timeout")
	}
	if c.RetryDelay <= 0 {
		bad("retry_delay", "must be positive")
	}
	if c.ReleaseRetry < 0 {
		bad("release_retry", "must not be negative (0s: a release does not ask again)")
	}
	if c.RetryJitter < 0 || c.RetryJitter > c.RetryDelay {
		bad("retry_jitter", "must be between 0 and retry_delay")
	}
	if c.Fair.StaleAfter < 0 {
		bad("fair.stale_after", "must not be negative (it is not used: a dead proxy's waiters leave within a second)")
	}
	if c.Limits.MaxTTL <= 0 {
		bad("limits.max_ttl", "must be positive")
	}
	if c.Limits.MaxWait < 0 {
		bad("limits.max_wait", "must not be negative")
	}
	if c.Limits.MaxClients <= 0 {
		bad("limits.max_clients", "must be positive")
	}
	if c.Limits.MaxArgBytes < 1024 {
		bad("limits.max_arg_bytes", "must be at least 1024")
	}
	if c.Limits.MaxAutoExtendPerConn < 1 {
		bad("limits.max_autoextend_per_conn", "must be positive")
	}
	if c.Limits.MaxArgs < 16 {
		bad("limits.max_args", "must be at least 16")
	}
	if c.Limits.MaxCommandBytes < c.Limits.MaxArgBytes {
		bad("limits.max_command_bytes", "%d must be at least limits.max_arg_bytes (%d)", c.Limits.MaxCommandBytes, c.Limits.MaxArgBytes)
	}
	if c.Limits.IdleTimeout < 0 {
		bad("limits.idle_timeout", "must not be negative (0s: never)")
	}
	if c.Limits.RequestTimeout <= 0 {
		bad("limits.request_timeout", "must be positive")
	}
	users := map[string]int{}
	for i, u := range c.Auth.Users {
		key := fmt.Sprintf("auth.users[%d]", i)
		switch {
		case u.Name == "":
			bad(key+".name", "empty")
		case u.Name == "default":
			bad(key+".name", "the default user's password is auth.password")
		case users[u.Name] > 0:
			bad(key+".name", "%q duplicates auth.users[%d]", u.Name, users[u.Name]-1)
		}
		users[u.Name] = i + 1
		switch {
		case u.Password == "" && u.PasswordSHA256 == "":
			bad(key, "needs password or password_sha256")
		case u.Password != "" && u.PasswordSHA256 != "":
			bad(key, "password and password_sha256 exclude each other")
		case u.PasswordSHA256 != "" && !sha256Hex.MatchString(u.PasswordSHA256):
			bad(key+".password_sha256", "must be 64 hexadecimal digits")
		}
		if len(u.Resources) == 0 {
			bad(key+".resources", "empty: the user could lock nothing (\"*\" allows every resource)")
		}
		for j, p := range u.Resources {
			if p == "" {
				bad(fmt.Sprintf("%s.resources[%d]", key, j), "empty pattern")
			}
		}
		for j, p := range u.Channels {
			if p == "" {
				bad(fmt.Sprintf("%s.channels[%d]", key, j), "empty pattern")
			}
		}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format", "%q must be text or json", c.LogFormat)
	}
	if t := c.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" {
			bad("tls", "cert_file and key_file are both required (omit tls: for plain TCP)")
		}
		if t.MinVersion != "" && t.MinVersion != "1.2" && t.MinVersion != "1.3" {
			bad("tls.min_version", "%q must be \"1.2\" or \"1.3\"", t.MinVersion)
		}
	}
	return errors.Join(errs...)
}

// DropinScript declares one lock script for drop-in mode (dropin_scripts),
// for a script the recogniser cannot place. Indexes are 1-based, as in Lua.
type DropinScript struct {
	// File is the script's text (its SHA1 is computed); or SHA1 names it.
	File string `yaml:"file"`
	SHA1 string `yaml:"sha1"`
	// Shape is the lock operation: acquire, release, extend, check,
	// semacquire, semrelease or semextend.
	Shape string `yaml:"shape"`
	// Reentrant: an acquire that refreshes a key already holding the value.
	Reentrant bool `yaml:"reentrant"`
	// Key is the KEYS index of the lock key (the semaphore); 0: every KEYS.
	Key int `yaml:"key"`
	// Value is the ARGV index of the value (the semaphore's token).
	Value int `yaml:"value"`
	// TTL is the ARGV index of the ttl, in TTLUnit ("ms", the default, or
	// "s").
	TTL     int    `yaml:"ttl"`
	TTLUnit string `yaml:"ttl_unit"`
	// Limit and Count are the ARGV indexes of a semaphore's limit and of
	// the permits taken (0: one).
	Limit int `yaml:"limit"`
	Count int `yaml:"count"`
}

// Resolve reads the declaration: the script's SHA1 (lower-case hex) and its
// shape, checked.
func (d DropinScript) Resolve() (sha string, decl luashape.Declaration, err error) {
	switch {
	case (d.File == "") == (d.SHA1 == ""):
		return "", decl, errors.New("give file or sha1, one of them")
	case d.File != "":
		b, err := os.ReadFile(d.File)
		if err != nil {
			return "", decl, err
		}
		sum := sha1.Sum(b)
		sha = hex.EncodeToString(sum[:])
	default:
		sha = strings.ToLower(d.SHA1)
		if b, err := hex.DecodeString(sha); err != nil || len(b) != sha1.Size {
			return "", decl, fmt.Errorf("sha1 %q: 40 hex digits", d.SHA1)
		}
	}
	decl = luashape.Declaration{Shape: luashape.Kind(d.Shape), Reentrant: d.Reentrant, Key: d.Key, Value: d.Value,
		TTL: d.TTL, TTLUnit: d.TTLUnit, Limit: d.Limit, Count: d.Count}
	if _, err := luashape.Declare(decl); err != nil {
		return "", decl, err
	}
	return sha, decl, nil
}
