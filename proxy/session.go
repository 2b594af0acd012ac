package proxy

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one client connection's state. Handlers receive it; the
// fields other goroutines read (CLIENT LIST, INFO) are behind a mutex.
type Session struct {
	id      int64
	srv     *Server
	nc      net.Conn // the accepted connection (maybe TLS)
	cc      *clientConn
	addr    string
	laddr   string
	created time.Time
	ctx     context.Context
	cancel  context.CancelFunc

	// Owned by the connection's goroutine.
	out      *[]byte // replies not yet written; a pooled buffer, nil when none
	partial  bool    // a read deadline for a partial command is running
	deadline bool    // a read deadline may be set
	werr     error   // the first write error: nothing more is written
	running  []*slot // pipelined commands running, in arrival order
	tx       *tx     // the open transaction (MULTI), nil when none

	mu      sync.Mutex
	proto   int
	name    string
	libName string
	libVer  string
	user    *user // nil: not authenticated
	lastCmd string
	lastAt  time.Time
	blocked bool     // a command that may block is running
	waitsOn []string // the resources it names
	multi   int      // commands queued in MULTI, -1 outside one (CLIENT LIST)
	quit    bool
	closers []func() // run once the connection is closed
	closed  bool

	// values are what other packages keep per session (Value), under vmu.
	vmu    sync.Mutex
	values []sessionValue

	// sub is the pub/sub state, nil until the first pub/sub command (or
	// CLIENT TRACKING ON); track is CLIENT TRACKING's, nil when off. Both
	// under srv.hub.mu.
	sub   *subState
	track *trackState
	// Mirrors read without the hub's mutex on every command: sub is set,
	// how many subscriptions, tracking is on.
	pushMode atomic.Bool
	subCount atomic.Int32
	tracking atomic.Bool

	// wmu serializes writes to the connection: replies from the
	// connection's goroutine, push messages from others.
	wmu sync.Mutex
}

// sessionValue is one value of Session.Value.
type sessionValue struct {
	key, val any
}

// Value returns the session's value for key, calling make to create it the
// first time. It is how a package keeps state per connection without a map
// keyed by the session: the value lives and dies with the session. Keys
// compare with ==, as context.Context's do: use a key of an unexported type
// of the package that owns the value, so no other package can reach it.
//
// make runs once per key and session, with the session's values locked:
// it must not call Value or Lookup. It may call OnClose to have the value
// cleaned up when the connection ends; if the connection has ended
// already, that function runs at once, inside make (so a value made late
// is cleaned up too, and that function must not call Value or Lookup
// either). Value is safe for concurrent use.
func (s *Session) Value(key any, make func() any) any {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	for _, v := range s.values {
		if v.key == key {
			return v.val
		}
	}
	val := make()
	s.values = append(s.values, sessionValue{key, val})
	return val
}

// Lookup returns the session's value for key, and whether Value made one.
// It is safe for concurrent use.
func (s *Session) Lookup(key any) (any, bool) {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	for _, v := range s.values {
		if v.key == key {
			return v.val, true
		}
	}
	return nil, false
}

// OnClose registers f to run once the connection has ended, whatever
// ended it (the client, a timeout, a protocol error, the server's
// shutdown). The functions run in the order they were registered, on the
// goroutine that served the connection, once the connection is closed and
// its commands have returned (those still running were cancelled and
// waited for), so no command of the session runs beside them. If the
// connection has ended already, f runs at once, on the caller's goroutine.
// A panic in f is logged and does not stop the functions after it. f must
// not block for long: the connection's slot is not freed until it returns.
func (s *Session) OnClose(f func()) {
	s.mu.Lock()
	if !s.closed {
		s.closers = append(s.closers, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.runCloser(f)
}

// runClosers runs the OnClose functions, once. A function registered once
// they have started runs at once (OnClose).
func (s *Session) runClosers() {
	s.mu.Lock()
	fs := s.closers
	s.closers, s.closed = nil, true
	s.mu.Unlock()
	for _, f := range fs {
		s.runCloser(f)
	}
}

// runCloser runs one OnClose function, logging a panic.
func (s *Session) runCloser(f func()) {
	defer func() {
		if r := recover(); r != nil {
			s.srv.log.Error("panic in a connection's close hook", "addr", s.addr, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// Push sends a RESP3 push message (">N elem...") at once, between
// replies, if the connection speaks RESP3; it reports whether it did. It
// is safe to call from any goroutine.
func (s *Session) Push(elems ...string) bool {
	if s.Proto() != 3 {
		return false
	}
	b := appendInt(nil, '>', int64(len(elems)))
	for _, e := range elems {
		b = appendBulk(b, e)
	}
	if q := s.pushQueue(); q != nil {
		// In order with the subscriber's replies and messages.
		s.queue(q, b, false)
		return true
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.nc.SetWriteDeadline(time.Now().Add(s.srv.opts.RequestTimeout))
	_, err := s.nc.Write(b)
	return err == nil
}

// ID is the connection's id, as CLIENT ID returns it.
func (s *Session) ID() int64 { return s.id }

// Proto is the protocol version in use: 2 or 3.
func (s *Session) Proto() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proto
}

// User is the authenticated user's name ("default" when authentication is
// off, "" before authentication).
func (s *Session) User() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user == nil {
		return ""
	}
	return s.user.name
}

// Tenant is the name of the session's user when that user is a tenant:
// a named user limited to resource patterns and not an administrator.
// A tenant's views of the proxy (CLIENT LIST, INFO, the drop-in script
// cache) show only what is its own. "" for a session that sees the
// whole proxy: authentication off, the default user, an admin user, or
// not authenticated yet.
func (s *Session) Tenant() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user == nil {
		return ""
	}
	return s.user.tenant()
}

// Allows reports whether the session's user may use resource (its
// resource patterns; every resource when it has none). A command that
// names resources outside its key positions (RLOCKLIST's entries) checks
// each with it.
func (s *Session) Allows(resource string) bool {
	s.mu.Lock()
	u := s.user
	s.mu.Unlock()
	return u != nil && u.allows([]byte(resource))
}

// AllowsChannel reports whether the session's user may publish on (or
// subscribe to) channel: its channel patterns, every channel when it has
// none. A drop-in script's PUBLISH, whose channel is an argument, checks
// it with this.
func (s *Session) AllowsChannel(channel string) bool {
	s.mu.Lock()
	u := s.user
	s.mu.Unlock()
	return u != nil && u.allowsChannel([]byte(channel))
}

// RemoteAddr is the client's address.
func (s *Session) RemoteAddr() string { return s.addr }

func (s *Session) setName(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

// wait marks sess as blocked in a command naming keys (delta 1), or no
// longer (delta -1), for CLIENT LIST and INFO locks.
func (srv *Server) wait(sess *Session, keys [][]byte, delta int) {
	var names []string
	if delta > 0 {
		names = make([]string, len(keys))
		for i, k := range keys {
			names[i] = string(k)
		}
	}
	sess.mu.Lock()
	sess.blocked, sess.waitsOn = delta > 0, names
	sess.mu.Unlock()
	srv.mu.Lock()
	for _, k := range keys {
		if n := srv.waitingOn[string(k)] + delta; n > 0 {
			srv.waitingOn[string(k)] = n
		} else {
			delete(srv.waitingOn, string(k))
		}
	}
	srv.mu.Unlock()
}

// setMulti records how many commands the open transaction holds, for
// CLIENT LIST (-1: none).
func (s *Session) setMulti(n int) {
	s.mu.Lock()
	s.multi = n
	s.mu.Unlock()
}

// endTx drops the open transaction, if any (EXEC, DISCARD, RESET).
func (s *Session) endTx() {
	s.tx = nil
	s.setMulti(-1)
}

func (s *Session) quitting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quit
}

// limits are the input limits for the session's next command: tighter
// before authentication.
func (s *Session) limits() *Limits {
	s.mu.Lock()
	authed := s.user != nil
	s.mu.Unlock()
	if authed {
		return &s.srv.limits
	}
	return &s.srv.preAuth
}

// slot is a pipelined command running beside others: its reply, once done
// closes, and the resources it names.
type slot struct {
	done  chan struct{}
	reply any
	keys  [][]byte
	rec   record // filled by the command's goroutine before done closes
}

// drain waits for the pipelined commands running and writes their
// replies, in order.
func (s *Session) drain() {
	for i, sl := range s.running {
		<-sl.done
		reply := sl.reply
		if l, ok := reply.(Late); ok {
			reply = l.value(s.srv)
		}
		s.write(reply)
		s.srv.done(s, &sl.rec, reply)
		s.running[i] = nil
	}
	s.running = s.running[:0]
}

// write encodes a reply after the ones not yet written; a Late reply is
// computed now.
func (s *Session) write(reply any) {
	if l, ok := reply.(Late); ok {
		reply = l.value(s.srv)
	}
	if s.out == nil {
		s.out = s.srv.bufPool.Get().(*[]byte)
		*s.out = (*s.out)[:0]
	}
	*s.out = appendReply(*s.out, reply, s.Proto())
}

// flush writes the replies gathered so far, those of the pipelined
// commands still running included (it waits for them). The buffer goes
// back to the pool, so an idle connection holds none.
func (s *Session) flush() error {
	s.drain()
	if s.out == nil {
		return s.werr
	}
	b := s.out
	s.out = nil
	if s.werr == nil && s.pushMode.Load() {
		h := &s.srv.hub
		h.mu.Lock()
		if s.sub != nil {
			// A subscriber's replies go in order with its messages (and
			// invalidations), through its writer, which returns the
			// buffer to the pool.
			s.flushTracked(*b)
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
	}
	if s.werr == nil {
		// A client that does not read its replies is cut after
		// RequestTimeout, like one that does not send its command.
		s.wmu.Lock()
		s.nc.SetWriteDeadline(time.Now().Add(s.srv.opts.RequestTimeout))
		_, s.werr = s.nc.Write(*b)
		s.wmu.Unlock()
	}
	if cap(*b) <= pooledBufSize {
		*b = (*b)[:pooledBufSize]
		s.srv.bufPool.Put(b)
	}
	return s.werr
}

// line is the session's CLIENT LIST / CLIENT INFO line.
func (s *Session) line(now time.Time) string {
	sub, psub := 0, 0
	s.srv.hub.mu.Lock()
	if s.sub != nil {
		sub, psub = len(s.sub.channels), len(s.sub.patterns)
	}
	s.srv.hub.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.lastCmd
	if last == "" {
		last = "NULL"
	}
	name := "default"
	if s.user != nil {
		name = s.user.name
	}
	flags := "N"
	switch {
	case s.blocked:
		flags = "b"
	case s.multi >= 0:
		flags = "x"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=0 multi=%d cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s resource=%s",
		s.id, s.addr, s.laddr, s.name, int(now.Sub(s.created).Seconds()), int(now.Sub(s.lastAt).Seconds()), flags, sub, psub,
		s.multi, strings.ToLower(last), name, s.proto, s.libName, s.libVer, clientListResources(s.waitsOn))
}

// maxListedResource bounds the bytes of resource names one CLIENT LIST
// line shows.
const maxListedResource = 128

// clientListResources is the resource= field of CLIENT LIST: the
// resources a blocked client waits on, comma-separated, each byte outside
// printable ASCII and each space, '=', ',' and '%' written as %XX (so that
// the line still splits on spaces and '='), cut at maxListedResource
// bytes with "..." after; empty when the client waits on nothing.
func clientListResources(rs []string) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := 0; j < len(r); j++ {
			if b.Len() >= maxListedResource {
				b.WriteString("...")
				return b.String()
			}
			c := r[j]
			if c <= ' ' || c > '~' || c == '=' || c == ',' || c == '%' {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}
