package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// Session is one client connection's state. Handlers receive it; the
// fields other goroutines read (CLIENT LIST, INFO) are behind a mutex.
type Session struct {
	id      int64
	srv     *Server
	conn    redcon.Conn
	cc      *clientConn
	addr    string
	laddr   string
	created time.Time
	ctx     context.Context
	cancel  context.CancelFunc
	wbuf    []byte

	mu      sync.Mutex
	proto   int
	name    string
	libName string
	libVer  string
	user    string
	authed  bool
	lastCmd string
	lastAt  time.Time
	quit    bool
}

// ID is the connection's id, as CLIENT ID returns it.
func (s *Session) ID() int64 { return s.id }

// Proto is the protocol version in use: 2 or 3.
func (s *Session) Proto() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proto
}

// User is the authenticated user name ("default" when none is configured).
func (s *Session) User() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user
}

// RemoteAddr is the client's address.
func (s *Session) RemoteAddr() string { return s.addr }

func (s *Session) setName(name string) {
	s.mu.Lock()
	s.name = name
	s.mu.Unlock()
}

func (s *Session) write(reply any) {
	s.wbuf = appendReply(s.wbuf[:0], reply, s.Proto())
	s.conn.WriteRaw(s.wbuf)
	if cap(s.wbuf) > 64<<10 {
		s.wbuf = nil // do not keep a large buffer for an idle connection
	}
}

// line is the session's CLIENT LIST / CLIENT INFO line.
func (s *Session) line(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.lastCmd
	if last == "" {
		last = "NULL"
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s",
		s.id, s.addr, s.laddr, s.name, int(now.Sub(s.created).Seconds()), int(now.Sub(s.lastAt).Seconds()),
		strings.ToLower(last), s.user, s.proto, s.libName, s.libVer)
}
