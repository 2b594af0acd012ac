// Package redisnode implements quorum.Node for one Redis master.
//
// Scripts go over one pipelined connection per master of our own (pipe.go):
// requests reach the master in the order they were issued; a request's
// completion runs on the connection's reader, so that a round needs no
// goroutine per master call; and concurrent requests share one write (one
// system call on each side) whenever they arrive while a write is in
// progress, with no timer, so that a lone request pays nothing. It replaced
// rueidis for scripts because rueidis flushed each master's commands as
// they came under load (about 30% of the proxy's CPU in write system
// calls) and exposes neither its write loop nor asynchronous completion.
// Before a connection carries a script the handshake authenticates and
// reads the master's run_id (handshake.go); a connection that fails, or
// that has requests waiting and has not answered for StallTimeout, is
// closed (its waiting requests fail) and dialled again in the background.
//
// Every operation is one Lua script (package scripts), so it is atomic on
// the master and token-checked. The first use of a script on a connection
// sends it in full with EVAL (which also caches it), later ones EVALSHA, so
// no request waits for a SCRIPT LOAD and none is reordered by a NOSCRIPT
// retry; NOSCRIPT (after SCRIPT FLUSH) is answered by sending it in full
// again.
//
// Release notifications, and the pub/sub messages proxies exchange
// (relay.Bus), use a separate dedicated rueidis connection per master in
// subscribe mode, kept in line with the set of channels and patterns the
// engine asks for and re-subscribed after a reconnect.
//
// A master that cannot be reached when the Node is built is dialled again in
// the background; until then every call fails at once with ErrNotConnected.
package redisnode

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-proxy/redlock-proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// ErrNotConnected is returned while no connection to the master exists.
var ErrNotConnected = errors.New("redisnode: not connected")

// Options configure a Node.
type Options struct {
	// Addr is host:port of the master.
	Addr string
	// Username and Password authenticate to the master (its ACL); empty
	// means none.
	Username, Password string
	// TLS, if not nil, is used to connect.
	TLS *tls.Config
	// DialTimeout bounds each connection attempt; default 1s.
	DialTimeout time.Duration
	// RedialInterval spaces background connection attempts; default 500ms.
	RedialInterval time.Duration
	// FlushDelay makes a write wait this long when other requests are in
	// flight, so that more join it: fewer system calls on both sides under
	// load, at most that much latency. 0 (the default) relies on the
	// natural batching of requests issued while a write is in progress.
	FlushDelay time.Duration
	// StallTimeout closes a connection that has requests waiting and has
	// not answered any for this long; default 10s.
	StallTimeout time.Duration
	// Notify is called with the channel and the message of every release
	// notification (and pub/sub message of relay.Bus).
	Notify func(channel, message string)
	// NotifyPattern, if set, is called instead of Notify for the messages
	// of pattern subscriptions (PSubscribe), with the pattern.
	NotifyPattern func(pattern, channel, message string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Sharded says the master is a shard of a Redis Cluster: requests
	// batched into one script call (see pipe.evalScript) then all hold
	// keys of one hash slot, as a cluster requires.
	Sharded bool
}

// Node is one Redis master. It is safe for concurrent use.
type Node struct {
	opts    Options
	log     *slog.Logger
	pipe    atomic.Pointer[pipe]
	dialMu  sync.Mutex
	dialing bool
	lastErr error

	scripts map[string]*script // by name, from package scripts

	identity atomic.Pointer[quorum.Identity]
	conns    atomic.Uint64

	// sc is the rueidis client of the subscriber's dedicated connections.
	sc     atomic.Pointer[rueidis.Client]
	sub    *subscriber
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// script is one embedded script with its SHA1, and its batch wrapper (see
// batchSource).
type script struct {
	name, src, sha string
	batch          *script
	// desc is the script's descriptor (for its plain form; nil for a
	// batch wrapper).
	desc *scripts.Script
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

var _ quorum.Node = (*Node)(nil)

// New returns a Node for opts.Addr. It tries to connect once, synchronously;
// if that fails it keeps trying in the background and New still succeeds.
func New(opts Options) (*Node, error) {
	if opts.Addr == "" {
		return nil, errors.New("redisnode: empty address")
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = time.Second
	}
	if opts.RedialInterval <= 0 {
		opts.RedialInterval = 500 * time.Millisecond
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	n := &Node{opts: opts, log: opts.Logger.With("master", opts.Addr)}
	n.scripts = map[string]*script{}
	for _, d := range scripts.All() {
		s := newScript(d.Name, d.Source())
		s.batch = newScript(d.Name+" (batch)", batchSource(d.Source()))
		s.desc = d
		n.scripts[d.Name] = s
	}
	n.identity.Store(&quorum.Identity{})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.dial(); err != nil {
		n.log.Warn("master not reachable; retrying in the background", "err", err)
		n.redial()
	}
	n.sub = newSubscriber(n)
	n.wg.Add(1)
	go n.watch()
	return n, nil
}

// dial makes what is missing: the script connection and the subscriber's
// client.
func (n *Node) dial() error {
	if n.pipe.Load() == nil {
		ctx, cancel := context.WithTimeout(n.ctx, n.opts.DialTimeout)
		nc, err := n.dialConn(ctx, n.opts.Addr, &net.Dialer{Timeout: n.opts.DialTimeout, KeepAlive: 30 * time.Second}, n.opts.TLS)
		cancel()
		if err != nil {
			return n.failed(fmt.Errorf("connect: %w", err))
		}
		p := newPipe(nc, n.opts.FlushDelay, n.pipeFailed)
		if !n.pipe.CompareAndSwap(nil, p) || n.ctx.Err() != nil {
			p.close()
			n.pipe.CompareAndSwap(p, nil)
		}
	}
	if n.sc.Load() == nil {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{n.opts.Addr},
			Username:          n.opts.Username,
			Password:          n.opts.Password,
			TLSConfig:         n.opts.TLS,
			Dialer:            net.Dialer{Timeout: n.opts.DialTimeout, KeepAlive: 30 * time.Second},
			DisableCache:      true,
			ForceSingleClient: true,
			DisableRetry:      true,
		})
		if err != nil {
			return n.failed(fmt.Errorf("connect: %w", err))
		}
		if !n.sc.CompareAndSwap(nil, &c) {
			c.Close()
		}
	}
	return nil
}

func (n *Node) failed(err error) error {
	n.dialMu.Lock()
	n.lastErr = err
	n.dialMu.Unlock()
	return err
}

// pipeFailed drops a failed connection and dials again.
func (n *Node) pipeFailed(p *pipe, err error) {
	if n.pipe.CompareAndSwap(p, nil) && n.ctx.Err() == nil {
		n.failed(err)
		n.log.Warn("master connection lost; reconnecting", "err", err)
		n.redial()
	}
}

// redial starts a background dialler unless one is running.
func (n *Node) redial() {
	n.dialMu.Lock()
	defer n.dialMu.Unlock()
	if n.dialing || n.ctx.Err() != nil {
		return
	}
	n.dialing = true
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() {
			n.dialMu.Lock()
			n.dialing = false
			n.dialMu.Unlock()
		}()
		t := time.NewTicker(n.opts.RedialInterval)
		defer t.Stop()
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-t.C:
			}
			if err := n.dial(); err == nil {
				n.log.Info("master connected")
				return
			}
		}
	}()
}

// watch closes a connection that has requests waiting and answered none
// for StallTimeout (a master stopped or cut off without a reset): its
// requests fail and a new connection is dialled, rather than requests
// queueing behind it without end.
func (n *Node) watch() {
	defer n.wg.Done()
	tick := min(time.Second, n.opts.StallTimeout/4)
	t := time.NewTicker(tick)
	defer t.Stop()
	var last *pipe
	var replies uint64
	var since time.Time
	for {
		select {
		case <-n.ctx.Done():
			return
		case now := <-t.C:
			p := n.pipe.Load()
			if p == nil {
				last = nil
				continue
			}
			if r := p.replies.Load(); p != last || r != replies || p.inFlight() == 0 {
				last, replies, since = p, r, now
				continue
			}
			if now.Sub(since) >= n.opts.StallTimeout {
				p.fail(fmt.Errorf("no reply for %v", now.Sub(since).Round(time.Millisecond)))
			}
		}
	}
}

// Close stops the background work and closes the connections.
func (n *Node) Close() {
	n.cancel()
	n.sub.close()
	n.wg.Wait()
	if p := n.pipe.Load(); p != nil {
		p.close()
	}
	if c := n.sc.Load(); c != nil {
		(*c).Close()
	}
}

// notConnected is the error of a request made while there is no
// connection; it starts a background dialler if none runs.
func (n *Node) notConnected() error {
	n.redial()
	n.dialMu.Lock()
	defer n.dialMu.Unlock()
	return fmt.Errorf("%w: %w", ErrNotConnected, n.lastErr)
}

// Addr implements quorum.Node.
func (n *Node) Addr() string { return n.opts.Addr }

// Send implements quorum.Node: it sends the embedded script name with keys
// and args and returns; done gets the reply as plain Go values (int64,
// string, nil, []any; an error reply is an Error), on the connection's
// reader goroutine, or at once on the caller's if there is no connection.
// A call the script has a plain form for (scripts.Script.Plain) is sent as
// that form's commands instead, except to a cluster shard.
func (n *Node) Send(name string, keys, args []string, done func(v any, err error)) {
	if s, p := n.ready(name, done); p != nil {
		if !n.opts.Sharded {
			if st := s.desc.Plain(keys, args); st != nil {
				p.plain(st, s, keys, args, done)
				return
			}
		}
		p.evalScript(s, keys, args, done, n.slotOf(keys))
	}
}

// ready returns the script called name and the connection to send it on,
// or answers done with why not and returns a nil connection.
func (n *Node) ready(name string, done func(v any, err error)) (*script, *pipe) {
	s, ok := n.scripts[name]
	if !ok {
		done(nil, fmt.Errorf("redisnode: no script %q", name))
		return nil, nil
	}
	p := n.pipe.Load()
	if p == nil {
		done(nil, n.notConnected())
	}
	return s, p
}

// slotOf is the hash slot of keys (their first's) on a shard, -1 elsewhere
// or without keys.
func (n *Node) slotOf(keys []string) int {
	if !n.opts.Sharded || len(keys) == 0 {
		return -1
	}
	return quorum.KeySlot(keys[0])
}

// sendAsking is Send preceded by ASKING on the same connection, with
// nothing in between: a request redirected by ASK during a resharding.
func (n *Node) sendAsking(name string, keys, args []string, done func(v any, err error)) {
	if s, p := n.ready(name, done); p != nil {
		p.asking(s, keys, args, done)
	}
}

// Command sends a plain command (no script) and waits for its reply.
func (n *Node) Command(ctx context.Context, args ...string) (any, error) {
	p := n.pipe.Load()
	if p == nil {
		return nil, n.notConnected()
	}
	return wait(ctx, func(done func(any, error)) { p.command(args, done) })
}

// Eval implements quorum.Node: Send, waiting for the reply or ctx's end.
func (n *Node) Eval(ctx context.Context, name string, keys, args []string) (any, error) {
	return wait(ctx, func(done func(any, error)) { n.Send(name, keys, args, done) })
}

// Ping implements quorum.Node.
func (n *Node) Ping(ctx context.Context) error {
	p := n.pipe.Load()
	if p == nil {
		return n.notConnected()
	}
	_, err := wait(ctx, func(done func(any, error)) { p.command([]string{"PING"}, done) })
	return err
}

// Exists implements quorum.Node.
func (n *Node) Exists(ctx context.Context, keys ...string) (int64, error) {
	p := n.pipe.Load()
	if p == nil {
		return 0, n.notConnected()
	}
	v, err := wait(ctx, func(done func(any, error)) { p.command(append([]string{"EXISTS"}, keys...), done) })
	if err != nil {
		return 0, err
	}
	c, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("EXISTS answered %T, want an integer", v)
	}
	return c, nil
}

type result struct {
	v   any
	err error
}

// wait runs send and waits for its completion or ctx's end.
func wait(ctx context.Context, send func(done func(any, error))) (any, error) {
	ch := make(chan result, 1)
	send(func(v any, err error) { ch <- result{v, err} })
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Identity implements quorum.Node.
func (n *Node) Identity() quorum.Identity { return *n.identity.Load() }

// Subscribe implements quorum.Node.
func (n *Node) Subscribe(channel string) { n.sub.want(topic{name: channel}, true) }

// Unsubscribe implements quorum.Node.
func (n *Node) Unsubscribe(channel string) { n.sub.want(topic{name: channel}, false) }

// Subscribed implements quorum.Node.
func (n *Node) Subscribed(ctx context.Context, channel string) error {
	return n.sub.subscribed(ctx, topic{name: channel})
}

// PSubscribe implements quorum.Node.
func (n *Node) PSubscribe(pattern string) { n.sub.want(topic{name: pattern, pattern: true}, true) }

// PUnsubscribe implements quorum.Node.
func (n *Node) PUnsubscribe(pattern string) { n.sub.want(topic{name: pattern, pattern: true}, false) }

// PSubscribed implements quorum.Node.
func (n *Node) PSubscribed(ctx context.Context, pattern string) error {
	return n.sub.subscribed(ctx, topic{name: pattern, pattern: true})
}
