package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// builtins are the connection and server commands of PROTOCOL.md
// ("Connection and server commands").
func (s *Server) builtins() []*Command {
	conn := "connection"
	return []*Command{
		{Name: "ping", Arity: -1, Flags: FlagNoAuth | FlagFast, Handler: s.ping,
			Doc: Doc{Summary: "Returns the server's liveliness response.", Since: "1.0.0", Group: conn,
				Args: []ArgDoc{{Name: "message", Type: "string", Optional: true}}}},
		{Name: "echo", Arity: 2, Flags: FlagFast, Handler: echo,
			Doc: Doc{Summary: "Returns the given string.", Since: "1.0.0", Group: conn,
				Args: []ArgDoc{{Name: "message", Type: "string"}}}},
		{Name: "quit", Arity: -1, Flags: FlagNoAuth | FlagFast | FlagTx, Handler: quit,
			Doc: Doc{Summary: "Closes the connection.", Since: "1.0.0", Group: conn}},
		{Name: "reset", Arity: 1, Flags: FlagFast | FlagTx, Handler: s.reset,
			Doc: Doc{Summary: "Resets the connection.", Since: "6.2.0", Group: conn}},
		{Name: "hello", Arity: -1, Flags: FlagNoAuth | FlagFast, Handler: s.hello,
			Doc: Doc{Summary: "Handshakes with the server.", Since: "6.0.0", Group: conn,
				Args: []ArgDoc{{Name: "arguments", Type: "block", Optional: true, Args: []ArgDoc{
					{Name: "protover", Type: "integer"},
					{Name: "username-password", Type: "block", Token: "AUTH", Optional: true, Args: []ArgDoc{
						{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}},
					{Name: "clientname", Type: "string", Token: "SETNAME", Optional: true},
				}}}}},
		{Name: "auth", Arity: -2, Flags: FlagNoAuth | FlagFast, Handler: s.auth,
			Doc: Doc{Summary: "Authenticates the connection.", Since: "1.0.0", Group: conn,
				Args: []ArgDoc{{Name: "username", Type: "string", Optional: true}, {Name: "password", Type: "string"}}}},
		{Name: "select", Arity: 2, Flags: FlagFast, Handler: selectDB,
			Doc: Doc{Summary: "Changes the selected database (only 0 exists).", Since: "1.0.0", Group: conn,
				Args: []ArgDoc{{Name: "index", Type: "integer"}}}},
		{Name: "client", Arity: -2, Flags: FlagFast, Handler: s.client,
			Doc: Doc{Summary: "A container for client connection commands.", Since: "2.4.0", Group: conn}},
		{Name: "command", Arity: -1, Handler: s.command,
			Doc: Doc{Summary: "Returns detailed information about all commands.", Since: "2.8.13", Group: "server"}},
		{Name: "info", Arity: -1, Handler: s.info,
			Doc: Doc{Summary: "Returns information and statistics about the server.", Since: "1.0.0", Group: "server",
				Args: []ArgDoc{{Name: "section", Type: "string", Optional: true, Multiple: true}}}},
	}
}

func (s *Server) ping(_ context.Context, sess *Session, args [][]byte) (any, error) {
	if len(args) <= 1 && sess.Proto() == 2 && sess.subscribed() > 0 {
		// Redis's answer in RESP2 subscribe mode.
		msg := ""
		if len(args) == 1 {
			msg = string(args[0])
		}
		return []any{"pong", msg}, nil
	}
	switch len(args) {
	case 0:
		return SimpleString("PONG"), nil
	case 1:
		return args[0], nil
	}
	return nil, WrongArity("ping")
}

func echo(_ context.Context, _ *Session, args [][]byte) (any, error) { return args[0], nil }

func quit(_ context.Context, sess *Session, _ [][]byte) (any, error) {
	sess.mu.Lock()
	sess.quit = true
	sess.mu.Unlock()
	return OK, nil
}

func (s *Server) reset(_ context.Context, sess *Session, _ [][]byte) (any, error) {
	sess.endTx()
	s.unsubscribeAll(sess)
	sess.mu.Lock()
	sess.proto, sess.name, sess.libName, sess.libVer = 2, "", "", ""
	// As Redis: back to the default user, authenticated only if it needs
	// no password.
	sess.user = s.users.open
	sess.mu.Unlock()
	return SimpleString("RESET"), nil
}

func selectDB(_ context.Context, _ *Session, args [][]byte) (any, error) {
	n, ok := ParseInt(args[0])
	if !ok {
		return nil, ErrNotInteger
	}
	if n != 0 {
		return nil, Errorf("DB index is out of range")
	}
	return OK, nil
}

// authenticate checks a user name and password and, if they are right,
// makes the session that user. A wrong pair is counted and logged (never
// the password) and leaves the session as it was, as in Redis.
func (s *Server) authenticate(sess *Session, name, pass string) error {
	var u *user
	if s.users.required {
		u = s.users.check(name, pass)
	} else if name == "default" {
		u = s.users.open // no password configured: any is accepted, as Redis's nopass
	}
	if u == nil {
		s.authFailures.Add(1)
		if s.opts.Observer != nil {
			s.opts.Observer.AuthFailed()
		}
		s.log.Warn("authentication failed", "user", name[:min(len(name), 64)], "addr", sess.addr)
		return errWrongPass
	}
	sess.mu.Lock()
	sess.user = u
	sess.mu.Unlock()
	return nil
}

func (s *Server) auth(_ context.Context, sess *Session, args [][]byte) (any, error) {
	switch len(args) {
	case 1:
		if !s.users.required {
			return nil, Errorf("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		}
		if err := s.authenticate(sess, "default", string(args[0])); err != nil {
			return nil, err
		}
		return OK, nil
	case 2:
		if err := s.authenticate(sess, string(args[0]), string(args[1])); err != nil {
			return nil, err
		}
		return OK, nil
	}
	return nil, ErrSyntax
}

func (s *Server) hello(_ context.Context, sess *Session, args [][]byte) (any, error) {
	a := NewArgs(args)
	proto := sess.Proto()
	if a.More() {
		v, _ := a.Next()
		n, ok := ParseInt(v)
		if !ok {
			return nil, Errorf("Protocol version is not an integer or out of range")
		}
		if n < 2 || n > 3 {
			return nil, &Error{Code: "NOPROTO", Msg: "unsupported protocol version"}
		}
		proto = int(n)
	}
	var name *string
	authed := false
	for a.More() {
		opt := a.Option()
		switch {
		case opt == "AUTH" && a.Left() >= 2:
			user, _ := a.String()
			pass, _ := a.String()
			if err := s.authenticate(sess, user, pass); err != nil {
				return nil, err
			}
			authed = true
		case opt == "SETNAME" && a.Left() >= 1:
			n, _ := a.String()
			if err := checkClientName(n); err != nil {
				return nil, err
			}
			name = &n
		default:
			return nil, Errorf("Syntax error in HELLO option '%s'", strings.ToLower(opt))
		}
	}
	if !authed && sess.User() == "" {
		return nil, &Error{Code: "NOAUTH", Msg: "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"}
	}
	sess.mu.Lock()
	sess.proto = proto
	if name != nil {
		sess.name = *name
	}
	sess.mu.Unlock()
	return Map{
		{"server", "redis"},
		{"version", s.opts.RedisVersion},
		{"proto", proto},
		{"id", sess.id},
		{"mode", "standalone"},
		{"role", "master"},
		{"modules", []any{}},
	}, nil
}

func checkClientName(n string) error {
	for i := 0; i < len(n); i++ {
		if n[i] < '!' || n[i] > '~' {
			return Errorf("Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

func (s *Server) client(_ context.Context, sess *Session, args [][]byte) (any, error) {
	sub := strings.ToLower(string(args[0]))
	rest := args[1:]
	arity := func(ok bool) error {
		if !ok {
			return WrongArity("client|" + sub)
		}
		return nil
	}
	switch sub {
	case "setname":
		if err := arity(len(rest) == 1); err != nil {
			return nil, err
		}
		if err := checkClientName(string(rest[0])); err != nil {
			return nil, err
		}
		sess.setName(string(rest[0]))
		return OK, nil
	case "getname":
		if err := arity(len(rest) == 0); err != nil {
			return nil, err
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if sess.name == "" {
			return nil, nil
		}
		return sess.name, nil
	case "id":
		if err := arity(len(rest) == 0); err != nil {
			return nil, err
		}
		return sess.id, nil
	case "setinfo":
		if err := arity(len(rest) == 2); err != nil {
			return nil, err
		}
		v := string(rest[1])
		if strings.ContainsAny(v, " \r\n") {
			return nil, Errorf("%s cannot contain spaces, newlines or special characters.", strings.ToLower(string(rest[0])))
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		switch strings.ToUpper(string(rest[0])) {
		case "LIB-NAME":
			sess.libName = v
		case "LIB-VER":
			sess.libVer = v
		default:
			return nil, Errorf("Unrecognized option '%s'", rest[0])
		}
		return OK, nil
	case "info":
		if err := arity(len(rest) == 0); err != nil {
			return nil, err
		}
		return sess.line(time.Now()) + "\n", nil
	case "list":
		// A tenant sees its own connections only.
		var b strings.Builder
		now := time.Now()
		sess.mu.Lock()
		me, tenant := sess.user, sess.user != nil && sess.user.tenant() != ""
		sess.mu.Unlock()
		for _, o := range s.sessionsSorted() {
			if tenant {
				o.mu.Lock()
				mine := o.user == me
				o.mu.Unlock()
				if !mine {
					continue
				}
			}
			b.WriteString(o.line(now))
			b.WriteByte('\n')
		}
		return b.String(), nil
	case "tracking":
		return s.clientTracking(sess, rest)
	case "caching":
		return s.clientCaching(sess, rest)
	case "getredir":
		if err := arity(len(rest) == 0); err != nil {
			return nil, err
		}
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		if sess.track == nil {
			return -1, nil
		}
		return 0, nil // tracking, without REDIRECT
	case "no-evict", "no-touch":
		if err := arity(len(rest) >= 1); err != nil {
			return nil, err
		}
		return OK, nil
	case "help":
		return []string{
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"ID",
			"    Return the ID of the current connection.",
			"INFO",
			"    Return information about the current client connection.",
			"LIST",
			"    Return information about client connections.",
			"SETNAME <name>",
			"    Assign the name <name> to the current connection.",
			"GETNAME",
			"    Return the name of the current connection.",
			"SETINFO <LIB-NAME|LIB-VER> <value>",
			"    Set client library name or version.",
			"TRACKING (ON|OFF) [OPTIN] [OPTOUT] [NOLOOP]",
			"    Client-side caching: invalidations of the keys read, over RESP3.",
			"CACHING (YES|NO)",
			"    Whether the next command's keys are tracked (OPTIN / OPTOUT).",
			"GETREDIR",
			"    -1 if tracking is off, else 0 (REDIRECT is not served).",
			"NO-EVICT, NO-TOUCH",
			"    Accepted and ignored.",
			"HELP",
			"    Print this help.",
		}, nil
	}
	return nil, Errorf("unknown subcommand '%s'. Try CLIENT HELP.", args[0])
}

func (s *Server) command(_ context.Context, _ *Session, args [][]byte) (any, error) {
	all := s.table.Commands()
	if len(args) == 0 {
		out := make([]any, len(all))
		for i, c := range all {
			out[i] = c.info()
		}
		return out, nil
	}
	sub := strings.ToLower(string(args[0]))
	rest := args[1:]
	switch sub {
	case "count":
		return len(all), nil
	case "list":
		out := make([]string, len(all))
		for i, c := range all {
			out[i] = c.Name
		}
		return out, nil
	case "info":
		if len(rest) == 0 {
			return s.command(context.Background(), nil, nil)
		}
		out := make([]any, len(rest))
		for i, n := range rest {
			if c := s.table.Lookup(n); c != nil {
				out[i] = c.info()
			}
		}
		return out, nil
	case "docs":
		var cmds []*Command
		if len(rest) == 0 {
			cmds = all
		}
		for _, n := range rest {
			if c := s.table.Lookup(n); c != nil {
				cmds = append(cmds, c)
			}
		}
		out := make(Map, 0, len(cmds))
		for _, c := range cmds {
			out = append(out, KV{c.Name, c.docs()})
		}
		return out, nil
	case "help":
		return []string{
			"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)",
			"    Return details about all commands the proxy serves.",
			"COUNT",
			"    Return the number of commands.",
			"LIST",
			"    Return the names of all commands.",
			"INFO [<command-name> ...]",
			"    Return details about the given commands, or all of them.",
			"DOCS [<command-name> ...]",
			"    Return documentation details about the given commands, or all of them.",
			"HELP",
			"    Print this help.",
		}, nil
	}
	return nil, Errorf("unknown subcommand '%s'. Try COMMAND HELP.", args[0])
}

func (s *Server) info(_ context.Context, sess *Session, args [][]byte) (any, error) {
	tenant := sess.Tenant() != ""
	sections := []InfoSection{
		{Name: "server", Lines: s.infoServer, Tenants: true},
		{Name: "clients", Lines: s.infoClients},
		{Name: "stats", Lines: s.infoStats},
		{Name: "commandstats", Lines: s.infoCommandstats, NotDefault: true},
		{Name: "errorstats", Lines: s.infoErrorstats},
		{Name: "locks", Lines: s.infoLocks},
	}
	sections = append(sections, s.opts.Info...)
	want := map[string]bool{}
	for _, a := range args {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	dflt := len(want) == 0 || want["default"]
	var b strings.Builder
	for _, sec := range sections {
		if !all && !want[sec.Name] && (!dflt || sec.NotDefault) || tenant && !sec.Tenants {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(sec.Name[:1]) + sec.Name[1:] + "\r\n")
		for _, l := range sec.Lines() {
			b.WriteString(l)
			b.WriteString("\r\n")
		}
	}
	return b.String(), nil
}

func (s *Server) infoServer() []string {
	port := ""
	s.mu.Lock()
	if s.ln != nil {
		_, port, _ = net.SplitHostPort(s.ln.Addr().String())
	}
	s.mu.Unlock()
	up := time.Since(s.start)
	return []string{
		"redis_version:" + s.opts.RedisVersion,
		"redlock_proxy_version:" + s.opts.Version,
		"redis_mode:standalone",
		"os:" + runtime.GOOS + " " + runtime.GOARCH,
		"go_version:" + runtime.Version(),
		"process_id:" + strconv.Itoa(os.Getpid()),
		"tcp_port:" + port,
		"uptime_in_seconds:" + strconv.Itoa(int(up.Seconds())),
		"uptime_in_days:" + strconv.Itoa(int(up.Hours()/24)),
	}
}

func (s *Server) infoClients() []string {
	return []string{
		fmt.Sprintf("connected_clients:%d", s.open.Load()),
		fmt.Sprintf("blocked_clients:%d", s.blocked.Load()),
		fmt.Sprintf("maxclients:%d", s.opts.MaxClients),
	}
}

func (s *Server) infoStats() []string {
	return []string{
		fmt.Sprintf("total_connections_received:%d", s.totalConn.Load()),
		fmt.Sprintf("total_commands_processed:%d", s.totalCmd.Load()),
		fmt.Sprintf("rejected_connections:%d", s.rejected.Load()),
		fmt.Sprintf("protocol_error_connections:%d", s.protocolErrors.Load()),
		fmt.Sprintf("timed_out_connections:%d", s.timedOut.Load()),
		fmt.Sprintf("acl_access_denied_auth:%d", s.authFailures.Load()),
	}
}

// infoCommandstats is INFO commandstats, in Redis's layout: one line per
// command called (or refused) since the start, in table order. usec
// counts from reading the command to its reply, WAIT included.
func (s *Server) infoCommandstats() []string {
	var out []string
	for _, c := range s.table.order {
		st := s.stats[c]
		calls, usec, rej, failed := st.calls.Load(), st.usec.Load(), st.rejected.Load(), st.failed.Load()
		if calls == 0 && rej == 0 {
			continue
		}
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		out = append(out, fmt.Sprintf("cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
			c.Name, calls, usec, per, rej, failed))
	}
	return out
}

// infoErrorstats is INFO errorstats, as Redis 7 prints it: error replies
// since the start, by code.
func (s *Server) infoErrorstats() []string {
	var out []string
	s.errStats.Range(func(k, v any) bool {
		out = append(out, fmt.Sprintf("errorstat_%s:count=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(out)
	return out
}

// infoLocks are the lock figures the proxy knows without asking the
// masters (docs/metrics.md, "INFO"): the clients blocked now in a command
// that waits (an acquire with WAIT, RLATCHWAIT), the distinct resources
// they wait on, and since the start the replies that granted (an acquire
// or extension granted, a release that released) and those that did not.
func (s *Server) infoLocks() []string {
	s.mu.Lock()
	resources := len(s.waitingOn)
	s.mu.Unlock()
	return []string{
		fmt.Sprintf("waiting_clients:%d", s.blocked.Load()),
		fmt.Sprintf("waiting_resources:%d", resources),
		fmt.Sprintf("granted_replies:%d", s.granted.Load()),
		fmt.Sprintf("not_granted_replies:%d", s.refused.Load()),
	}
}
