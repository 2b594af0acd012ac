package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
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
	// MaxClients caps connections; 0 means 10000.
	MaxClients int
	// Info adds sections to INFO (for example "masters").
	Info []InfoSection
	// Observer is told about commands and connections; nil means none.
	Observer Observer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// InfoSection is one section of INFO, produced on demand.
type InfoSection struct {
	// Name is the lower-case section name.
	Name string
	// Lines returns "key:value" lines.
	Lines func() []string
}

// Observer is told about commands and connections, for metrics. It must be
// safe for concurrent use and must not block.
type Observer interface {
	// Command reports one command: its table name ("unknown" if none), how
	// long it took and the RESP error code it answered ("" for none).
	Command(name string, d time.Duration, errCode string)
	// Connections reports the number of open client connections.
	Connections(open int)
	// Rejected reports a connection refused by max_clients.
	Rejected()
}

// Server is the RESP server: connections, handshake commands, the command
// table and dispatch. It knows nothing of Redlock.
type Server struct {
	opts  Options
	table *Table
	log   *slog.Logger
	start time.Time

	base   context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[int64]*Session
	rc       *redcon.Server
	ln       *listener
	served   chan struct{}

	nextID    atomic.Int64
	inflight  atomic.Int64
	blocked   atomic.Int64
	conns     atomic.Int64
	totalConn atomic.Int64
	totalCmd  atomic.Int64
	rejected  atomic.Int64
}

// New returns a server with the built-in commands and opts.Commands.
func New(opts Options) (*Server, error) {
	if opts.RedisVersion == "" {
		opts.RedisVersion = "7.2.0"
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger, start: time.Now(), sessions: map[int64]*Session{}}
	s.base, s.cancel = context.WithCancel(context.Background())
	t, err := NewTable(append(s.builtins(), opts.Commands...)...)
	if err != nil {
		return nil, err
	}
	s.table = t
	return s, nil
}

// Table is the server's command table.
func (s *Server) Table() *Table { return s.table }

// Serve accepts connections on ln until Shutdown. It returns nil after
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	l := newListener(ln)
	rc := redcon.NewServerNetwork(ln.Addr().Network(), ln.Addr().String(), s.handle, s.accept, s.closed)
	s.mu.Lock()
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("proxy: Serve called twice")
	}
	s.ln, s.rc, s.served = l, rc, make(chan struct{})
	s.mu.Unlock()
	defer close(s.served)
	return rc.Serve(l)
}

// Shutdown stops accepting connections, cancels commands that are waiting
// (their clients get an error), lets the other in-flight commands finish,
// then closes every connection. If ctx ends first, connections are closed
// at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	l, served := s.ln, s.served
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	l.stop()
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
	l.release()
	<-served
	return err
}

func (s *Server) accept(conn redcon.Conn) bool {
	if int(s.conns.Load()) >= s.opts.MaxClients {
		s.rejected.Add(1)
		if s.opts.Observer != nil {
			s.opts.Observer.Rejected()
		}
		conn.WriteError("ERR max number of clients reached")
		return false
	}
	now := time.Now()
	sess := &Session{
		id:      s.nextID.Add(1),
		srv:     s,
		conn:    conn,
		addr:    conn.RemoteAddr(),
		created: now,
		lastAt:  now,
		proto:   2,
		user:    "default",
		authed:  true,
	}
	if cc, ok := conn.NetConn().(*clientConn); ok {
		sess.cc = cc
		sess.laddr = cc.LocalAddr().String()
	}
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	conn.SetContext(sess)
	s.mu.Lock()
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	s.totalConn.Add(1)
	n := s.conns.Add(1)
	if s.opts.Observer != nil {
		s.opts.Observer.Connections(int(n))
	}
	return true
}

func (s *Server) closed(conn redcon.Conn, err error) {
	sess, ok := conn.Context().(*Session)
	if !ok {
		return
	}
	sess.cancel()
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
	n := s.conns.Add(-1)
	if s.opts.Observer != nil {
		s.opts.Observer.Connections(int(n))
	}
	if err != nil {
		s.log.Debug("client connection closed", "addr", sess.addr, "err", err)
	}
}

func (s *Server) handle(conn redcon.Conn, cmd redcon.Command) {
	sess, ok := conn.Context().(*Session)
	if !ok || len(cmd.Args) == 0 {
		return
	}
	s.dispatch(sess, cmd.Args)
}

// dispatch runs one command, in the fixed order: panic boundary, auth gate,
// arity, handler, then the reply or the mapped error, then metrics.
func (s *Server) dispatch(sess *Session, args [][]byte) {
	t0 := time.Now()
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	s.totalCmd.Add(1)

	name := "unknown"
	reply, err := s.run(sess, args, &name)
	code := ""
	if err != nil {
		e := s.mapError(err)
		reply, code = e, e.Code
	}
	sess.write(reply)
	if s.opts.Observer != nil {
		s.opts.Observer.Command(name, time.Since(t0), code)
	}
	sess.mu.Lock()
	sess.lastCmd, sess.lastAt = name, time.Now()
	quit := sess.quit
	sess.mu.Unlock()
	if quit {
		sess.conn.Close()
	}
}

func (s *Server) run(sess *Session, args [][]byte, name *string) (reply any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in command", "command", *name, "panic", r, "stack", string(debug.Stack()))
			reply, err = nil, Errorf("internal error")
		}
	}()
	cmd := s.table.Lookup(args[0])
	if cmd == nil {
		return nil, unknownCommand(args)
	}
	*name = cmd.Name
	sess.mu.Lock()
	authed := sess.authed
	sess.mu.Unlock()
	if !authed && cmd.Flags&FlagNoAuth == 0 {
		return nil, &Error{Code: "NOAUTH", Msg: "Authentication required."}
	}
	if !cmd.arityOK(len(args)) {
		return nil, WrongArity(cmd.Name)
	}
	ctx := sess.ctx
	if cmd.Flags&FlagMayBlock != 0 && sess.cc != nil {
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
		ctx = cctx
	}
	return cmd.Handler(ctx, sess, args[1:])
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

// WrongArity is Redis's error for a wrong number of arguments.
func WrongArity(name string) *Error {
	return Errorf("wrong number of arguments for '%s' command", name)
}

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
