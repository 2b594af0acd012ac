package proxy

import (
	"context"
	"strings"
	"time"
)

// Client-side caching (CLIENT TRACKING), as Redis serves it in its default
// mode, OPTIN and OPTOUT, for RESP3 connections: the keys a tracking
// connection reads (the keys of a command without FlagWrite, and of a
// write whose keys move, a script) are remembered, and the connection is
// sent an invalidation push
// (">2 invalidate [key]") once, when the key may have changed:
//
//   - a command with FlagWrite names it, through this server (with
//     NOLOOP, not to the connection that wrote);
//   - the Broker reports a change made through another server (a
//     release, announced by the masters), if it implements KeyWatcher;
//   - the read found nothing (a nil reply, or -2 from PTTL/TTL): absent
//     keys change without notice (an acquire through another server), so
//     the invalidation follows the reply at once: absent keys are never
//     cached for long;
//   - the value's time runs out: the reply's Expires.After, else
//     trackMaxAge after the read (a lock that expires is then taken
//     through another server without notice).
//
// An invalidation for a key read by a command whose reply is not yet
// written is sent right after that reply, never before it.
// BCAST, PREFIX and REDIRECT are refused. RESP2 connections may turn
// tracking on (Redis accepts it) but, as with Redis without REDIRECT, are
// sent nothing.

// trackMaxAge bounds how long a read stays valid for a tracking client
// when its reply says nothing of its expiry.
const trackMaxAge = time.Second

// maxTracked bounds the keys tracked for all connections together (Redis's
// tracking_table_max_keys): beyond it the oldest reads are invalidated.
const maxTracked = 1 << 20

// Expires is a read's reply that holds for at most After (a lock's
// remaining validity). A handler returns it instead of the value; the
// client gets Value, and a client tracking the key is sent an
// invalidation once After has passed.
type Expires struct {
	Value any
	After time.Duration
}

// KeyWatcher is implemented by a Broker that can report changes to keys
// made through other servers, for CLIENT TRACKING.
type KeyWatcher interface {
	// WatchKeys turns the reports on (while some key is tracked) or off;
	// it does not wait.
	WatchKeys(on bool)
	// KeysWatched waits until the reports will arrive, or ctx ends.
	KeysWatched(ctx context.Context)
	// OnKeyChange sets the function told of each change.
	OnKeyChange(f func(key string))
}

// trackState is a connection's tracking, under the hub's mutex.
type trackState struct {
	optin, optout, noloop bool
	caching               int // CLIENT CACHING for the next command: 1 yes, -1 no
	keys                  map[string]struct{}
	// pending are keys read by commands whose replies are not written
	// yet; true: invalidated meanwhile, to be sent after the replies.
	pending map[string]bool
}

// tracking is the server's side: which connections track which keys.
type tracking struct {
	keys  map[string]map[*Session]struct{}
	count int
}

func (s *Server) clientTracking(sess *Session, args [][]byte) (any, error) {
	if len(args) == 0 {
		return nil, WrongArity("client|tracking")
	}
	on := false
	switch strings.ToUpper(string(args[0])) {
	case "ON":
		on = true
	case "OFF":
	default:
		return nil, ErrSyntax
	}
	st := &trackState{keys: map[string]struct{}{}, pending: map[string]bool{}}
	for _, a := range args[1:] {
		switch strings.ToUpper(string(a)) {
		case "OPTIN":
			st.optin = true
		case "OPTOUT":
			st.optout = true
		case "NOLOOP":
			st.noloop = true
		case "BCAST", "PREFIX", "REDIRECT":
			return nil, Errorf("CLIENT TRACKING %s is not served by redlock-proxy: use the default mode, OPTIN or OPTOUT over RESP3 (see docs/PROTOCOL.md, Client-side caching)", strings.ToUpper(string(a)))
		default:
			return nil, ErrSyntax
		}
	}
	if st.optin && st.optout {
		return nil, Errorf("You can't use both OPTIN and OPTOUT")
	}
	if on {
		sess.subs() // the writer that sends invalidations
	}
	h := &s.hub
	h.mu.Lock()
	s.untrackAll(sess)
	if on {
		sess.track = st
		sess.tracking.Store(true)
	}
	h.mu.Unlock()
	return OK, nil
}

func (s *Server) clientCaching(sess *Session, args [][]byte) (any, error) {
	if len(args) != 1 {
		return nil, WrongArity("client|caching")
	}
	yes := false
	switch strings.ToUpper(string(args[0])) {
	case "YES":
		yes = true
	case "NO":
	default:
		return nil, ErrSyntax
	}
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	st := sess.track
	if st == nil || (!st.optin && !st.optout) {
		return nil, Errorf("CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	}
	if yes && !st.optin {
		return nil, Errorf("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	}
	if !yes && !st.optout {
		return nil, Errorf("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	}
	st.caching = -1
	if yes {
		st.caching = 1
	}
	return OK, nil
}

// tracked runs after a command's handler: a write invalidates the keys it
// names; a read by a tracking connection remembers them. reply is the
// handler's, maybe an Expires, which it returns unwrapped.
func (s *Server) tracked(sess *Session, cmd *Command, args [][]byte, reply any, err error) any {
	exp, hasExp := reply.(Expires)
	if hasExp {
		reply = exp.Value
	}
	if err != nil || (s.trackCount.Load() == 0 && !sess.tracking.Load()) {
		return reply // the common case: nobody tracks anything
	}
	keys := cmd.KeysOf(args)
	if len(keys) == 0 {
		return reply
	}
	h := &s.hub
	write := cmd.Flags&FlagWrite != 0
	if write {
		h.mu.Lock()
		empty := h.track.count == 0
		h.mu.Unlock()
		if !empty {
			for _, k := range keys {
				s.invalidate(string(k), sess)
			}
		}
		if cmd.Keys == nil {
			return reply
		}
		// A script (movable keys) may read its keys too, as Redis
		// tracks the keys a script's commands read: they are tracked for
		// the caller (rueidislock waits for their invalidation).
	}
	h.mu.Lock()
	st := sess.track
	if st == nil || sess.sub == nil || sess.Proto() != 3 ||
		(st.optin && st.caching != 1) || (st.optout && st.caching == -1) {
		h.mu.Unlock()
		return reply
	}
	absent := !write && reply == nil
	if n, ok := reply.(int64); ok && n == -2 && !write {
		absent = true
	}
	after := trackMaxAge
	if hasExp {
		after = max(exp.After, 0)
	}
	for _, k := range keys {
		key := string(k)
		if h.track.keys == nil {
			h.track.keys = map[string]map[*Session]struct{}{}
		}
		set := h.track.keys[key]
		if set == nil {
			set = map[*Session]struct{}{}
			h.track.keys[key] = set
			h.track.count++
			s.trackCount.Store(int64(h.track.count))
			if h.track.count == 1 {
				if kw, ok := s.opts.Broker.(KeyWatcher); ok {
					kw.WatchKeys(true)
				}
			}
		}
		set[sess] = struct{}{}
		st.keys[key] = struct{}{}
		st.pending[key] = st.pending[key] || absent
		if !absent {
			time.AfterFunc(after, func() { s.invalidateFor(sess, key) })
		}
	}
	if h.track.count > maxTracked {
		// Beyond the bound, forget a key (Redis picks one at random):
		// its readers are told.
		for key := range h.track.keys {
			s.invalidateLocked(key, nil)
			break
		}
	}
	h.mu.Unlock()
	if kw, ok := s.opts.Broker.(KeyWatcher); ok {
		// The reply goes out once changes through other servers will
		// be reported (at once, but for the first key tracked).
		ctx, cancel := context.WithTimeout(sess.ctx, listenTimeout)
		kw.KeysWatched(ctx)
		cancel()
	}
	return reply
}

// endCommand clears CLIENT CACHING after a command, but CLIENT itself and
// MULTI (a transaction's commands are read with it).
func (s *Server) endCommand(sess *Session, cmd *Command) {
	if !sess.tracking.Load() || cmd.Name == "client" || cmd.Name == "multi" {
		return
	}
	h := &s.hub
	h.mu.Lock()
	if sess.track != nil {
		sess.track.caching = 0
	}
	h.mu.Unlock()
}

// invalidate tells every connection tracking key (but except, if it asked
// for NOLOOP) that it changed, and forgets them.
func (s *Server) invalidate(key string, except *Session) {
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	s.invalidateLocked(key, except)
}

// invalidateFor is invalidate for one connection (its read expired).
func (s *Server) invalidateFor(sess *Session, key string) {
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.track.keys[key][sess]; ok {
		s.invalidateOne(sess, key)
	}
}

func (s *Server) invalidateLocked(key string, except *Session) {
	for sess := range s.hub.track.keys[key] {
		if sess == except && sess.track.noloop {
			continue
		}
		s.invalidateOne(sess, key)
	}
}

// invalidateOne sends sess an invalidation of key (after its unwritten
// replies if one read key) and forgets it. Under the hub's mutex.
func (s *Server) invalidateOne(sess *Session, key string) {
	s.forgetTracked(sess, key)
	if _, ok := sess.track.pending[key]; ok {
		sess.track.pending[key] = true
		return
	}
	sess.queue(sess.sub.q, invalidation(key), false)
}

// forgetTracked removes key from sess's tracked keys. Under the hub's
// mutex.
func (s *Server) forgetTracked(sess *Session, key string) {
	h := &s.hub
	delete(sess.track.keys, key)
	set := h.track.keys[key]
	if set == nil {
		return
	}
	delete(set, sess)
	if len(set) == 0 {
		delete(h.track.keys, key)
		h.track.count--
		s.trackCount.Store(int64(h.track.count))
		if h.track.count == 0 {
			if kw, ok := s.opts.Broker.(KeyWatcher); ok {
				kw.WatchKeys(false)
			}
		}
	}
}

// untrackAll forgets every key sess tracks (CLIENT TRACKING OFF, RESET,
// close). Under the hub's mutex.
func (s *Server) untrackAll(sess *Session) {
	if sess.track == nil {
		return
	}
	for key := range sess.track.keys {
		s.forgetTracked(sess, key)
	}
	sess.track = nil
	sess.tracking.Store(false)
}

// flushTracked queues b (replies) and then the invalidations that came
// for keys those replies read. Under the hub's mutex.
func (s *Session) flushTracked(b []byte) {
	s.queue(s.sub.q, b, true)
	if s.track == nil {
		return
	}
	for key, inv := range s.track.pending {
		if inv {
			s.queue(s.sub.q, invalidation(key), false)
			if _, still := s.track.keys[key]; still {
				s.srv.forgetTracked(s, key)
			}
		}
	}
	clear(s.track.pending)
}

// invalidation is the RESP3 push that invalidates key.
func invalidation(key string) []byte {
	return appendReply(nil, Push{"invalidate", []string{key}}, 3)
}
