package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Server.
type Options struct {
	// Commands are added to the built-in connection and server commands.
	Commands []*Command
	// MapError turns a handler's error into a RESP error. Errors that are
	// already *Error are written as they are. nil maps everything else to
	// "ERR internal error".
	MapError func(error) *Error
	// Version is the proxy's version, shown in INFO.
	Version string
	// RedisVersion is the Redis version the proxy claims in HELLO and INFO
	// (clients read it); default "7.2.0".
	RedisVersion string
	// MaxClients caps connections; 0 means 10000. Extra connections are
	// answered "-ERR max number of clients reached" and closed.
	MaxClients int
	// Limits bound each command a client sends; zero fields take the
	// defaults of PROTOCOL.md (1024 arguments of 64 KB, 1 MB in all).
	Limits Limits
	// IdleTimeout closes a connection that sends nothing for this long;
	// 0 never does (Redis's "timeout 0").
	IdleTimeout time.Duration
	// RequestTimeout bounds how long a command may take to arrive once its
	// first bytes have (a client trickling a command is closed), and the TLS
	// handshake; 0 means 10s.
	RequestTimeout time.Duration
	// Auth configures authentication; the zero value turns it off.
	Auth Auth
	// TLS, if set, makes the listener speak TLS only.
	TLS *tls.Config
	// Info adds sections to INFO (for example "masters").
	Info []InfoSection
	// Broker, if set, carries pub/sub messages to and from the other
	// servers sharing the masters; nil keeps them on this server.
	Broker Broker
	// Unknown, if set, is the error for a command not in the table,
	// instead of Redis's "unknown command" (drop-in mode explains itself).
	Unknown func(args [][]byte) *Error
	// Observer is told about commands and connections; nil means none.
	Observer Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	pushLimit int // maxPushBuffer; tests set less
}

// InfoSection is one section of INFO, produced on demand.
type InfoSection struct {
	// Name is the lower-case section name.
	Name string
	// Lines returns "key:value" lines.
	Lines func() []string
	// NotDefault leaves the section out of a bare INFO (as Redis does
	// with commandstats); INFO all, everything or its name shows it.
	NotDefault bool
	// Tenants shows the section to tenants (Session.Tenant) too. Other
	// sections (every tenant's counts, the masters' addresses and run
	// ids) are for the sessions that see the whole proxy.
	Tenants bool
}

// Observer is told about commands and connections, for metrics. It must be
// safe for concurrent use and must not block.
type Observer interface {
	// Command reports one command: its table name ("unknown" if none), how
	// long it took until its reply was written (to the connection's
	// buffer), its result ("granted", "not_granted", "ok" or "error": see
	// Result) and the RESP error code it answered ("" for none).
	Command(name string, d time.Duration, result, errCode string)
	// Connections reports the number of open client connections.
	Connections(open int)
	// Rejected reports a connection refused by max_clients.
	Rejected()
	// Dropped reports a connection the server closed: reason is
	// "protocol_error" (malformed or over the limits), "timeout",
	// "tls_handshake" (failed or too slow) or "output_buffer" (a
	// subscriber that left too many messages unread).
	Dropped(reason string)
	// AuthFailed reports a wrong user name or password.
	AuthFailed()
}

// Server is the RESP server: connections, handshake commands, the command
// table and dispatch. It knows nothing of Redlock.
type Server struct {
	opts    Options
	table   *Table
	users   *users
	limits  Limits // after authentication
	preAuth Limits // before
	log     *slog.Logger
	start   time.Time
	bufPool sync.Pool // *[]byte of pooledBufSize: reads and replies

	base   context.Context
	cancel context.CancelFunc

	hub        hub          // pub/sub subscriptions, tracked keys
	trackCount atomic.Int64 // keys tracked (hub.track.count), read on every command

	mu       sync.Mutex
	sessions map[int64]*Session
	ln       net.Listener
	stopping bool
	conns    sync.WaitGroup

	nextID         atomic.Int64
	inflight       atomic.Int64
	parallelNow    atomic.Int64 // pipelined commands running beside others
	blocked        atomic.Int64
	open           atomic.Int64
	totalConn      atomic.Int64
	totalCmd       atomic.Int64
	rejected       atomic.Int64
	protocolErrors atomic.Int64
	timedOut       atomic.Int64
	authFailures   atomic.Int64

	stats     map[*Command]*cmdStats // INFO commandstats; fixed after New
	errStats  sync.Map               // error code -> *atomic.Int64, INFO errorstats
	granted   atomic.Int64           // INFO locks
	refused   atomic.Int64
	waitingOn map[string]int // resource -> blocked clients waiting on it, under mu
}

// cmdStats are one command's INFO commandstats figures, as Redis keeps
// them: calls that ran (failed ones included), their time, the calls
// refused before they ran (authentication, arity, permissions) and the
// calls that ran and answered an error.
type cmdStats struct {
	calls, usec, rejected, failed atomic.Int64
}

// record is what dispatch learns about a command as it runs, for metrics,
// INFO commandstats and CLIENT LIST.
type record struct {
	cmd      *Command // nil: not in the table
	name     string
	t0       time.Time
	rejected bool // refused before its handler ran
	queued   bool // queued in MULTI: recorded when EXEC runs it
	// resources are the resources the command names, kept only when the
	// log is at debug level (for its one line per command in done).
	resources []string
}

// New returns a server with the built-in commands and opts.Commands.
func New(opts Options) (*Server, error) {
	if opts.RedisVersion == "" {
		opts.RedisVersion = "7.2.0"
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = 10000
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.pushLimit <= 0 {
		opts.pushLimit = maxPushBuffer
	}
	lim := opts.Limits
	if lim.MaxArgs <= 0 {
		lim.MaxArgs = 1024
	}
	if lim.MaxArgBytes <= 0 {
		lim.MaxArgBytes = 64 << 10
	}
	if lim.MaxCommandBytes <= 0 {
		lim.MaxCommandBytes = 1 << 20
	}
	users, err := newUsers(opts.Auth)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, users: users, limits: lim, log: opts.Logger, start: time.Now(), sessions: map[int64]*Session{}}
	s.hub.channels = map[string]map[*Session]struct{}{}
	s.hub.patterns = map[string]map[*Session]struct{}{}
	s.preAuth = Limits{
		MaxArgs:         min(lim.MaxArgs, preAuthMaxArgs),
		MaxArgBytes:     min(lim.MaxArgBytes, preAuthMaxArgBytes),
		MaxCommandBytes: min(lim.MaxCommandBytes, preAuthMaxArgs*(preAuthMaxArgBytes+32)),
		preAuth:         true,
	}
	s.bufPool.New = func() any {
		b := make([]byte, pooledBufSize)
		return &b
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	t, err := NewTable(append(append(append(s.builtins(), s.txBuiltins()...), s.pubsubCommands()...), opts.Commands...)...)
	if err != nil {
		return nil, err
	}
	s.table = t
	s.stats = make(map[*Command]*cmdStats, len(t.order))
	for _, c := range t.order {
		s.stats[c] = &cmdStats{}
	}
	s.waitingOn = map[string]int{}
	if opts.Broker != nil {
		opts.Broker.Receive(s.deliver)
	}
	if kw, ok := opts.Broker.(KeyWatcher); ok {
		kw.OnKeyChange(func(key string) { s.invalidate(key, nil) })
	}
	return s, nil
}

// Table is the server's command table.
func (s *Server) Table() *Table { return s.table }

// Blocked is how many clients wait in a blocking command (WAIT) now.
func (s *Server) Blocked() int { return int(s.blocked.Load()) }

// Serve accepts connections on ln until Shutdown, each served by its own
// goroutine. It returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ln != nil || s.stopping {
		s.mu.Unlock()
		return errors.New("proxy: Serve called twice or after Shutdown")
	}
	s.ln = ln
	s.mu.Unlock()
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			if stopping || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors and the like: pause rather than spin.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "pause", pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		s.accept(nc)
	}
}

// Shutdown stops accepting connections, cancels commands that are waiting
// (their clients get an error), lets the other in-flight commands finish,
// then closes every connection. If ctx ends first, connections are closed
// at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	s.cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
	for s.inflight.Load() > 0 && err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
		}
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.cancel() // whatever its command still waits for
		sess.nc.Close()
	}
	s.mu.Unlock()
	s.conns.Wait()
	return err
}

// accept admits a new connection or refuses it (max_clients, shutdown).
func (s *Server) accept(nc net.Conn) {
	if int(s.open.Load()) >= s.opts.MaxClients {
		s.rejected.Add(1)
		if s.opts.Observer != nil {
			s.opts.Observer.Rejected()
		}
		// Written before any TLS: like Redis, which answers in plain text.
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		nc.Close()
		return
	}
	if s.opts.TLS != nil {
		nc = tls.Server(nc, s.opts.TLS)
	}
	now := time.Now()
	sess := &Session{
		id:      s.nextID.Add(1),
		srv:     s,
		nc:      nc,
		cc:      &clientConn{Conn: nc},
		addr:    nc.RemoteAddr().String(),
		laddr:   nc.LocalAddr().String(),
		created: now,
		lastAt:  now,
		proto:   2,
		user:    s.users.open,
		multi:   -1,
	}
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.sessions[sess.id] = sess
	s.conns.Add(1)
	s.mu.Unlock()
	s.totalConn.Add(1)
	n := s.open.Add(1)
	if s.opts.Observer != nil {
		s.opts.Observer.Connections(int(n))
	}
	go s.serveConn(sess)
}

// closed ends a connection's life: called once its goroutine is done.
func (s *Server) closed(sess *Session) {
	sess.cancel()
	// Pipelined commands still running finish; their Late replies see the
	// cancelled context and give back what they were granted.
	sess.drain()
	if q := sess.pushQueue(); q != nil {
		q.finish() // what a subscriber was sent (QUIT's +OK) goes out first
	}
	sess.wmu.Lock()
	sess.nc.Close()
	sess.wmu.Unlock()
	sess.out = nil
	s.unsubscribeAll(sess)
	sess.runClosers()
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
	n := s.open.Add(-1)
	if s.opts.Observer != nil {
		s.opts.Observer.Connections(int(n))
	}
	s.conns.Done()
}

// dispatch runs one command, in the fixed order: panic boundary, auth gate,
// arity, handler, then the reply or the mapped error, then metrics. more
// says whether the client has already sent more commands (pipelined).
//
// A pipelined command whose table entry allows it (Command.Concurrent)
// starts at once on a goroutine of its own, beside the commands of the
// connection still running, unless it names a resource one of them names;
// its reply is written in order once those before it are written. Any
// other command first waits for the running ones and writes their replies.
//
// Inside MULTI nothing starts beside others: commands are queued (see
// multi.go).
func (s *Server) dispatch(sess *Session, args [][]byte, more bool) {
	if sess.tx == nil && (more || len(sess.running) > 0) {
		if cmd := s.table.Lookup(args[0]); cmd != nil && s.parallel(sess, cmd, args) {
			s.spawn(sess, cmd, args)
			return
		}
	}
	sess.drain()
	t0 := time.Now()
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	s.totalCmd.Add(1)

	rec := record{name: "unknown", t0: t0}
	reply := s.run(sess, args, &rec, false)
	sess.write(reply)
	s.done(sess, &rec, reply)
}

// done records a command's end, once its final reply (a Late one
// computed) is known, for metrics, INFO and CLIENT LIST. A command queued
// in MULTI is recorded when EXEC runs it.
func (s *Server) done(sess *Session, rec *record, reply any) {
	if rec.queued {
		sess.mu.Lock()
		sess.lastAt = time.Now()
		sess.mu.Unlock()
		return
	}
	d := time.Since(rec.t0)
	code := ""
	if e, ok := reply.(*Error); ok {
		code = e.Code
		s.countError(code)
	}
	result := ResultLabelOK
	if rec.cmd != nil {
		st := s.stats[rec.cmd]
		if rec.rejected {
			st.rejected.Add(1)
		} else {
			st.calls.Add(1)
			st.usec.Add(d.Microseconds())
			if code != "" {
				st.failed.Add(1)
			}
		}
		result = rec.cmd.Result.Of(reply)
		switch result {
		case ResultGranted:
			s.granted.Add(1)
		case ResultNotGranted:
			s.refused.Add(1)
		}
	} else if code != "" {
		result = ResultError
	}
	if s.opts.Observer != nil {
		s.opts.Observer.Command(rec.name, d, result, code)
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		// The command's outcome: its name, resources, result and error
		// code; never its other arguments (tokens, passwords, values).
		s.log.Debug("command", "command", rec.name, "resources", rec.resources, "result", result, "error", code,
			"latency", d, "client", sess.addr)
	}
	sess.mu.Lock()
	sess.lastCmd, sess.lastAt = rec.name, time.Now()
	sess.mu.Unlock()
}

// countError counts one error reply by its code, for INFO errorstats.
func (s *Server) countError(code string) {
	v, ok := s.errStats.Load(code)
	if !ok {
		v, _ = s.errStats.LoadOrStore(code, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// maxRunning bounds the pipelined commands one connection runs at once,
// maxParallel those of every connection together: beyond what the machine
// can push through the masters, more commands at once only lengthen every
// round until they time out (a master's answer that waits behind hundreds
// of others in the proxy's own queues counts as late). A command over
// either bound runs in turn, as if it were not pipelined.
const (
	maxRunning  = 16
	maxParallel = 32
)

// parallel reports whether cmd may start beside the connection's running
// commands: its table entry allows it for these arguments, the session is
// authenticated, fewer than maxRunning run, and it names no resource that
// one of them names (commands on one resource keep their order).
func (s *Server) parallel(sess *Session, cmd *Command, args [][]byte) bool {
	if cmd.Concurrent == nil || len(sess.running) >= maxRunning || s.parallelNow.Load() >= maxParallel ||
		!cmd.arityOK(len(args)) || !cmd.Concurrent(args) {
		return false
	}
	sess.mu.Lock()
	authed := sess.user != nil
	sess.mu.Unlock()
	if !authed {
		return false
	}
	for _, k := range cmd.KeysOf(args) {
		for _, r := range sess.running {
			for _, rk := range r.keys {
				if string(rk) == string(k) {
					return false
				}
			}
		}
	}
	return true
}

// spawn runs a pipelined command on its own goroutine; drain writes its
// reply in turn.
func (s *Server) spawn(sess *Session, cmd *Command, args [][]byte) {
	args = cloneArgs(args) // the reader reuses its buffer
	sl := &slot{done: make(chan struct{}), keys: cmd.KeysOf(args), rec: record{name: "unknown", t0: time.Now()}}
	sess.running = append(sess.running, sl)
	s.inflight.Add(1)
	s.totalCmd.Add(1)
	s.parallelNow.Add(1)
	go func() {
		// drain records its end once its reply (maybe Late) is computed.
		sl.reply = s.run(sess, args, &sl.rec, true)
		s.inflight.Add(-1)
		s.parallelNow.Add(-1)
		close(sl.done)
	}()
}

// cloneArgs copies args into one allocation.
func cloneArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}

// run runs one command and returns its reply (a mapped error is a reply)
// and fills rec. For a command run beside others (parallel) a Late reply
// is left for the writer; otherwise handle computed it while the
// command's context lived.
func (s *Server) run(sess *Session, args [][]byte, rec *record, parallel bool) any {
	reply, err := s.handle(sess, args, rec, parallel)
	if err != nil {
		return s.mapError(err)
	}
	return reply
}

func (s *Server) handle(sess *Session, args [][]byte, rec *record, parallel bool) (reply any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in command", "command", rec.name, "panic", r, "stack", string(debug.Stack()))
			reply, err = nil, Errorf("internal error")
		}
	}()
	cmd := s.table.Lookup(args[0])
	if cmd != nil {
		rec.cmd, rec.name = cmd, cmd.Name
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			// Key positions only: never a token, a value or a password.
			for _, r := range cmd.KeysOf(args) {
				rec.resources = append(rec.resources, string(r))
			}
		}
		sess.mu.Lock()
		sess.lastCmd = cmd.Name // CLIENT LIST shows a blocked client's command
		sess.mu.Unlock()
	}
	err = s.admit(sess, cmd, args)
	if !parallel && sess.tx != nil {
		// Inside MULTI: a refused command aborts the transaction; others
		// but the transaction's own are queued, not run.
		if err != nil {
			rec.rejected = true
			sess.tx.abort()
			sess.setMulti(0)
			return nil, err
		}
		if cmd.Flags&FlagTx == 0 {
			return s.queue(sess, rec, args)
		}
	}
	if err != nil {
		rec.rejected = true
		return nil, err
	}
	if sess.subscribed() > 0 && !pubsubAllowed[cmd.Name] && sess.Proto() == 2 {
		rec.rejected = true
		return nil, subscribeModeError(cmd.Name)
	}
	if parallel {
		// Its reply is written in turn, and a Late reply (a grant's
		// validity) is computed then; Concurrent promised it does not wait.
		reply, err = cmd.Handler(sess.ctx, sess, args[1:])
		reply = s.tracked(sess, cmd, args, reply, err)
		s.endCommand(sess, cmd)
		return reply, err
	}
	if cmd.Flags&FlagFast == 0 {
		// Replies to earlier pipelined commands go out before this one
		// waits on the masters: a grant's validity is computed just before
		// its reply and must not sit in a buffer behind a later command.
		if err := sess.flush(); err != nil {
			return nil, err
		}
	}
	ctx := sess.ctx
	if cmd.Flags&FlagMayBlock != 0 && (cmd.Blocks == nil || cmd.Blocks(args)) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// A waiting command ends when its client hangs up or the server
		// shuts down.
		stopShutdown := context.AfterFunc(s.base, cancel)
		defer stopShutdown()
		stop := sess.cc.watch(cancel)
		defer stop()
		s.blocked.Add(1)
		defer s.blocked.Add(-1)
		keys := cmd.KeysOf(args)
		s.wait(sess, keys, 1)
		defer s.wait(sess, keys, -1)
		ctx = cctx
	}
	reply, err = cmd.Handler(ctx, sess, args[1:])
	if l, ok := reply.(Late); ok && err == nil {
		// Computed while ctx lives: a client that left gets no grant.
		reply = l.value(s)
	}
	reply = s.tracked(sess, cmd, args, reply, err)
	s.endCommand(sess, cmd)
	return reply, err
}

// admit checks a command before it runs (or is queued in MULTI): it is
// known (cmd not nil), the session authenticated unless the command needs
// none, the arity, and the user's resource patterns.
func (s *Server) admit(sess *Session, cmd *Command, args [][]byte) error {
	if cmd == nil {
		if s.opts.Unknown != nil {
			return s.opts.Unknown(args)
		}
		return unknownCommand(args)
	}
	sess.mu.Lock()
	u := sess.user
	sess.mu.Unlock()
	if u == nil && cmd.Flags&FlagNoAuth == 0 {
		return &Error{Code: "NOAUTH", Msg: "Authentication required."}
	}
	if !cmd.arityOK(len(args)) {
		return WrongArity(cmd.Name)
	}
	if u != nil && !cmd.allows(u, args) {
		return ErrNoPerm
	}
	if u != nil && !cmd.allowsChannels(u, args) {
		return ErrNoPermChannel
	}
	if cmd.Flags&FlagAdmin != 0 && (u == nil || !u.admin) {
		return noPermCommand(u, cmd.Name)
	}
	return nil
}

func (s *Server) mapError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if s.opts.MapError != nil {
		if e := s.opts.MapError(err); e != nil {
			return e
		}
	}
	s.log.Error("unmapped error", "err", err)
	return Errorf("internal error")
}

// noPermCommand is Redis's ACL error for a command the user may not run.
func noPermCommand(u *user, name string) *Error {
	who := "default"
	if u != nil {
		who = u.name
	}
	return &Error{Code: "NOPERM", Msg: fmt.Sprintf("User %s has no permissions to run the '%s' command", who, name)}
}

// WrongArity is Redis's error for a wrong number of arguments.
func WrongArity(name string) *Error {
	return Errorf("wrong number of arguments for '%s' command", name)
}

// UnknownCommand is Redis's error for a command it does not know, with
// the start of its arguments, for an Options.Unknown that adds to it.
func UnknownCommand(args [][]byte) *Error { return unknownCommand(args) }

func unknownCommand(args [][]byte) *Error {
	var b []byte
	for _, a := range args[1:] {
		if len(b) >= 128 {
			break
		}
		a = a[:min(len(a), 128-len(b))]
		b = fmt.Appendf(b, "'%s' ", a)
	}
	name := args[0][:min(len(args[0]), 128)]
	return Errorf("unknown command '%s', with args beginning with: %s", name, b)
}

// sessionsSorted returns the open sessions ordered by id.
func (s *Server) sessionsSorted() []*Session {
	s.mu.Lock()
	out := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}
