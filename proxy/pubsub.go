package proxy

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Broker carries pub/sub messages between this server's subscribers and
// those of the other servers that share its backend (the masters). With
// no Broker, PUBLISH reaches this server's subscribers only.
type Broker interface {
	// Publish hands message to every subscriber of channel: this
	// server's, through the function given to Receive, and the other
	// servers'. It returns how many of this server's subscribers received
	// it; an error means some other servers' may not have.
	Publish(ctx context.Context, channel, message string) (int, error)
	// Listen asks for the other servers' messages on channel (or, if
	// pattern, on the channels matching it); it returns once they will
	// arrive, or ctx ends. Calls are counted: Unlisten withdraws one.
	Listen(ctx context.Context, name string, pattern bool)
	// Unlisten withdraws one Listen.
	Unlisten(name string, pattern bool)
	// Receive sets the function that hands a message to this server's
	// subscribers (called once per publication).
	Receive(f func(channel, message string) int)
}

// maxPushBuffer bounds what a subscriber's connection holds unwritten
// (pub/sub messages and the replies behind them): a client slower than the
// messages it subscribed to is disconnected when it is exceeded, as Redis
// does with its "client-output-buffer-limit pubsub 32mb" hard limit. A
// client that takes nothing for RequestTimeout is disconnected too.
const maxPushBuffer = 32 << 20

// listenTimeout bounds how long SUBSCRIBE waits for the masters to
// confirm a new channel before it answers.
const listenTimeout = time.Second

// noReply is what a handler returns when it has written its replies
// itself (the pub/sub commands queue theirs in order with messages).
type noReply struct{}

// Push is a RESP3 push message (">"), an array in RESP2: the pub/sub
// replies and messages.
type Push []any

// hub is the server's pub/sub registry: which sessions subscribe to which
// channels and patterns.
type hub struct {
	mu       sync.Mutex
	channels map[string]map[*Session]struct{}
	patterns map[string]map[*Session]struct{}
	track    tracking // CLIENT TRACKING's keys
}

// subState is a session's pub/sub state, under the hub's mutex (but q,
// set once).
type subState struct {
	channels map[string]struct{}
	patterns map[string]struct{}
	q        *pushQueue
}

func (st *subState) count() int { return len(st.channels) + len(st.patterns) }

// pushQueue holds what is to be written to a subscriber's connection, in
// order: replies and messages. One goroutine writes it.
type pushQueue struct {
	mu      sync.Mutex
	bufs    [][]byte
	pooled  []bool // bufs[i] goes back to the server's pool once written
	size    int
	limit   int  // maxPushBuffer, or Options.pushLimit in tests
	dead    bool // over maxPushBuffer
	closing bool // the connection is closing: write what is queued, then stop
	wake    chan struct{}
	done    chan struct{} // closed when the writer stops
}

// finish makes the writer stop once the queue is written, and waits for
// it (a write is bounded by RequestTimeout).
func (q *pushQueue) finish() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// add queues b. It reports false if the queue is closed, or went over its
// limit now (died: the caller closes the connection, once).
func (q *pushQueue) add(b []byte, pooled bool) (ok, died bool) {
	q.mu.Lock()
	if q.dead {
		q.mu.Unlock()
		return false, false
	}
	if q.size+len(b) > q.limit {
		q.dead, q.bufs, q.pooled = true, nil, nil
		q.mu.Unlock()
		return false, true
	}
	q.bufs = append(q.bufs, b)
	q.pooled = append(q.pooled, pooled)
	q.size += len(b)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true, false
}

// subs returns the session's pub/sub state, creating it (and its writer)
// on first use. Called on the connection's goroutine.
func (s *Session) subs() *subState {
	h := &s.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.sub == nil {
		s.sub = &subState{channels: map[string]struct{}{}, patterns: map[string]struct{}{},
			q: &pushQueue{limit: s.srv.opts.pushLimit, wake: make(chan struct{}, 1), done: make(chan struct{})}}
		go s.pushWriter(s.sub.q)
		s.pushMode.Store(true)
	}
	return s.sub
}

// pushQueue returns the session's queue, nil if it has none.
func (s *Session) pushQueue() *pushQueue {
	h := &s.srv.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.sub == nil {
		return nil
	}
	return s.sub.q
}

// subscribed is how many channels and patterns the session subscribes to.
func (s *Session) subscribed() int { return int(s.subCount.Load()) }

// pushWriter writes the session's queue until the connection closes. A
// write that fails or takes longer than RequestTimeout closes it.
func (s *Session) pushWriter(q *pushQueue) {
	defer func() {
		q.mu.Lock()
		q.dead, q.bufs, q.pooled = true, nil, nil // nothing more is kept
		q.mu.Unlock()
		close(q.done)
	}()
	for {
		<-q.wake
		q.mu.Lock()
		bufs, pooled := q.bufs, q.pooled
		q.bufs, q.pooled, q.size = nil, nil, 0
		dead, closing := q.dead, q.closing
		q.mu.Unlock()
		if dead {
			return
		}
		if len(bufs) == 0 {
			if closing {
				return
			}
			continue
		}
		if closing {
			// Come back for what may have been queued meanwhile.
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
		nb := net.Buffers(slices.Clone(bufs))
		s.wmu.Lock()
		s.nc.SetWriteDeadline(time.Now().Add(s.srv.opts.RequestTimeout))
		_, err := nb.WriteTo(s.nc)
		s.wmu.Unlock()
		for i, b := range bufs {
			if pooled[i] && cap(b) <= pooledBufSize {
				b = b[:pooledBufSize]
				s.srv.bufPool.Put(&b)
			}
		}
		if err != nil {
			s.srv.log.Debug("subscriber write failed, closing the connection", "addr", s.addr, "err", err)
			s.nc.Close()
			return
		}
	}
}

// overflow closes a subscriber whose queue went over maxPushBuffer: a
// write in progress fails, and the connection's reader sees it closed.
func (s *Session) overflow() {
	s.srv.log.Warn("subscriber too slow for its messages, closing the connection", "addr", s.addr, "unwritten_bytes_over", s.srv.opts.pushLimit)
	if s.srv.opts.Observer != nil {
		s.srv.opts.Observer.Dropped("output_buffer")
	}
	s.nc.Close()
}

// queue hands encoded replies to the session's writer. Under the hub's
// mutex when it must keep its place among messages.
func (s *Session) queue(q *pushQueue, b []byte, pooled bool) {
	if _, died := q.add(b, pooled); died {
		s.overflow()
		select {
		case q.wake <- struct{}{}: // the writer stops
		default:
		}
	}
}

// pubsubAllowed are the commands a RESP2 connection in subscribe mode
// may send.
var pubsubAllowed = map[string]bool{
	"subscribe": true, "psubscribe": true, "unsubscribe": true, "punsubscribe": true,
	"ping": true, "quit": true, "reset": true,
}

func (s *Server) pubsubCommands() []*Command {
	ps := "pubsub"
	return []*Command{
		{Name: "subscribe", Arity: -2, Flags: FlagNoMulti, Channels: allChannels(false), Handler: s.subscribe(false),
			Doc: Doc{Summary: "Listens for messages published to channels, through any proxy.", Since: "2.0.0", Group: ps,
				Args: []ArgDoc{{Name: "channel", Type: "string", Multiple: true}}}},
		{Name: "psubscribe", Arity: -2, Flags: FlagNoMulti, Channels: allChannels(true), Handler: s.subscribe(true),
			Doc: Doc{Summary: "Listens for messages published to channels that match one or more patterns.", Since: "2.0.0", Group: ps,
				Args: []ArgDoc{{Name: "pattern", Type: "pattern", Multiple: true}}}},
		{Name: "unsubscribe", Arity: -1, Flags: FlagNoMulti, Handler: s.unsubscribe(false),
			Doc: Doc{Summary: "Stops listening to messages posted to channels.", Since: "2.0.0", Group: ps,
				Args: []ArgDoc{{Name: "channel", Type: "string", Optional: true, Multiple: true}}}},
		{Name: "punsubscribe", Arity: -1, Flags: FlagNoMulti, Handler: s.unsubscribe(true),
			Doc: Doc{Summary: "Stops listening to messages published to channels that match one or more patterns.", Since: "2.0.0", Group: ps,
				Args: []ArgDoc{{Name: "pattern", Type: "pattern", Optional: true, Multiple: true}}}},
		{Name: "publish", Arity: 3, Channels: firstChannel, Handler: s.publish,
			Doc: Doc{Summary: "Posts a message to a channel, for the subscribers of every proxy; answers how many of this proxy's received it.", Since: "2.0.0", Group: ps,
				Args: []ArgDoc{{Name: "channel", Type: "string"}, {Name: "message", Type: "string"}}}},
	}
}

// allChannels locates the channels of SUBSCRIBE (patterns of PSUBSCRIBE):
// every argument.
func allChannels(patterns bool) func(args [][]byte) ([][]byte, bool) {
	return func(args [][]byte) ([][]byte, bool) { return args[1:], patterns }
}

// firstChannel locates PUBLISH's channel: its first argument.
func firstChannel(args [][]byte) ([][]byte, bool) {
	if len(args) < 2 {
		return nil, false
	}
	return args[1:2], false
}

func kind(pattern bool, verb string) string {
	if pattern {
		return "p" + verb
	}
	return verb
}

func (s *Server) subscribe(pattern bool) Handler {
	return func(ctx context.Context, sess *Session, args [][]byte) (any, error) {
		st := sess.subs()
		h := &s.hub
		h.mu.Lock()
		set := st.channels
		if pattern {
			set = st.patterns
		}
		fresh := map[string]bool{}
		for _, a := range args {
			if _, ok := set[string(a)]; !ok {
				fresh[string(a)] = true
			}
		}
		over := st.count()+len(fresh) > s.limits.MaxArgs
		h.mu.Unlock()
		if over {
			return nil, Errorf("max number of subscriptions per connection reached (limits.max_args: %d)", s.limits.MaxArgs)
		}
		// Earlier replies go out before the confirmations, which the
		// writer sends from now on.
		if err := sess.flush(); err != nil {
			return nil, err
		}
		if s.opts.Broker != nil {
			// The masters confirm first: a message published after
			// the client has its confirmation reaches it.
			lctx, cancel := context.WithTimeout(ctx, listenTimeout)
			var wg sync.WaitGroup
			for name := range fresh {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.opts.Broker.Listen(lctx, name, pattern)
				}()
			}
			wg.Wait()
			cancel()
		}
		proto := sess.Proto()
		h.mu.Lock()
		defer h.mu.Unlock()
		reg := h.channels
		if pattern {
			reg = h.patterns
		}
		var b []byte
		for _, a := range args {
			name := string(a)
			if _, ok := set[name]; !ok {
				set[name] = struct{}{}
				if reg[name] == nil {
					reg[name] = map[*Session]struct{}{}
				}
				reg[name][sess] = struct{}{}
				sess.subCount.Store(int32(st.count()))
			}
			b = appendReply(b, Push{kind(pattern, "subscribe"), name, st.count()}, proto)
		}
		sess.queue(st.q, b, false)
		return noReply{}, nil
	}
}

func (s *Server) unsubscribe(pattern bool) Handler {
	return func(_ context.Context, sess *Session, args [][]byte) (any, error) {
		st := sess.subs()
		if err := sess.flush(); err != nil {
			return nil, err
		}
		proto := sess.Proto()
		h := &s.hub
		h.mu.Lock()
		set := st.channels
		if pattern {
			set = st.patterns
		}
		names := make([]string, 0, len(args))
		for _, a := range args {
			names = append(names, string(a))
		}
		if len(args) == 0 {
			for name := range set {
				names = append(names, name)
			}
			slices.Sort(names)
		}
		var b []byte
		var gone []string
		for _, name := range names {
			if _, ok := set[name]; ok {
				s.forget(sess, name, pattern)
				gone = append(gone, name)
			}
			b = appendReply(b, Push{kind(pattern, "unsubscribe"), name, st.count()}, proto)
		}
		if len(names) == 0 {
			b = appendReply(b, Push{kind(pattern, "unsubscribe"), nil, st.count()}, proto)
		}
		sess.queue(st.q, b, false)
		h.mu.Unlock()
		s.unlisten(gone, pattern)
		return noReply{}, nil
	}
}

// forget removes one subscription of sess. Under the hub's mutex.
func (s *Server) forget(sess *Session, name string, pattern bool) {
	h := &s.hub
	set, reg := sess.sub.channels, h.channels
	if pattern {
		set, reg = sess.sub.patterns, h.patterns
	}
	delete(set, name)
	sess.subCount.Store(int32(sess.sub.count()))
	delete(reg[name], sess)
	if len(reg[name]) == 0 {
		delete(reg, name)
	}
}

func (s *Server) unlisten(names []string, pattern bool) {
	if s.opts.Broker == nil {
		return
	}
	for _, n := range names {
		s.opts.Broker.Unlisten(n, pattern)
	}
}

// unsubscribeAll drops every subscription of sess, without replies, and
// its tracking (RESET, and a closed connection).
func (s *Server) unsubscribeAll(sess *Session) {
	h := &s.hub
	h.mu.Lock()
	s.untrackAll(sess)
	if sess.sub == nil {
		h.mu.Unlock()
		return
	}
	var chans, pats []string
	for name := range sess.sub.channels {
		chans = append(chans, name)
		s.forget(sess, name, false)
	}
	for name := range sess.sub.patterns {
		pats = append(pats, name)
		s.forget(sess, name, true)
	}
	h.mu.Unlock()
	s.unlisten(chans, false)
	s.unlisten(pats, true)
}

func (s *Server) publish(ctx context.Context, _ *Session, args [][]byte) (any, error) {
	if s.opts.Broker == nil {
		return s.deliver(string(args[0]), string(args[1])), nil
	}
	return s.opts.Broker.Publish(ctx, string(args[0]), string(args[1]))
}

// Deliver hands a message to this server's subscribers of channel (and
// of the patterns it matches), and returns how many received it, as
// Redis's PUBLISH counts: one per matching subscription. It never blocks:
// a subscriber whose queue is full is disconnected.
func (s *Server) deliver(channel, message string) int {
	h := &s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	var enc [4][]byte // by protocol
	for sess := range h.channels[channel] {
		p := sess.Proto()
		if enc[p] == nil {
			enc[p] = appendReply(nil, Push{"message", channel, message}, p)
		}
		sess.queue(sess.sub.q, enc[p], false)
		n++
	}
	for pat, set := range h.patterns {
		if !globMatch(pat, []byte(channel)) {
			continue
		}
		var penc [4][]byte
		for sess := range set {
			p := sess.Proto()
			if penc[p] == nil {
				penc[p] = appendReply(nil, Push{"pmessage", pat, channel, message}, p)
			}
			sess.queue(sess.sub.q, penc[p], false)
			n++
		}
	}
	return n
}

// subscribeModeError is Redis's refusal of a command in RESP2 subscribe
// mode.
func subscribeModeError(name string) *Error {
	return Errorf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", strings.ToLower(name))
}
