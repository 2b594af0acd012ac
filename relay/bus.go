// Package relay carries pub/sub messages between the proxies that share
// the masters: a client's PUBLISH (and the PUBLISH that ends a drop-in lock
// script) through any proxy reaches the subscribers of every proxy, once
// each. The engine (package quorum) only hands the relay its masters
// (quorum.Options.Relay); the messages travel on the masters' own pub/sub,
// through the quorum.Node interface.
package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// Bus carries pub/sub messages (SUBSCRIBE / PUBLISH of clients, and the
// PUBLISH that ends a drop-in lock script) between the proxies that share
// the masters, so that a message published through any proxy reaches each
// subscriber of every proxy once.
//
// The publishing proxy sends the message to every master on a reserved
// channel, <meta_prefix>pub:<channel>, tagged with an id unique to that
// publication and the time it was published; a proxy with local
// subscribers of a channel (or a pattern) subscribes to the reserved
// channel (or pattern) on every master, and hands each message on the
// first time its id arrives: every master that took it announces it.
//
// What it guarantees, and what not:
//   - A publication that a quorum of masters took reaches every proxy
//     subscribed on a quorum of masters (two quorums share a master), so
//     a minority of masters down or stopped loses nothing. Publish says
//     when fewer than a quorum took it.
//   - Once per subscriber: ids are remembered for busWindow past the
//     later of their arrival and their publication time, and a message
//     older than busWindow (a master stopped for longer, then resumed,
//     delivers its backlog) is dropped, so a late copy is never handed
//     on twice, whatever the proxies' clocks say. A proxy whose clock is
//     more than busWindow ahead of the publisher's drops its messages.
//   - Order: messages from one publishing proxy on one channel arrive in
//     the order published, unless a master's connection failed between
//     them (each master keeps the order; the first copy wins, and copies
//     are handed on one at a time, in the order their ids were first
//     seen). A master that missed an earlier message (its subscription
//     confirmed after it, or its connection failed) can still bring a
//     later one first.
//   - At most maxSeen ids are remembered (the oldest are forgotten
//     first): past about maxSeen/busWindow publications a second, a copy
//     delayed by a stopped master could be handed on again.
//
// A Bus is built empty (NewBus), given to the engine
// (quorum.Options.Relay), which attaches the masters (Attach), and given a
// receiver (Receive) by whoever delivers messages to local subscribers.
// The nodes' notifier must pass every message to Notify first.
type Bus struct {
	// Notify hands messages on in the order their ids were first seen:
	// each takes a ticket under mu (tickets) and, once mu is released,
	// waits for its turn (serving, under turnMu) to call the receiver.
	// Two masters' readers that each decide under mu would otherwise race
	// to the receiver, and a later message could overtake an earlier one.
	// Nothing waits while holding mu: the receiver takes the proxy's
	// pub/sub lock, under which tracking calls into the bus.
	turnMu  sync.Mutex
	turn    *sync.Cond
	serving uint64 // the ticket whose turn it is (under turnMu)
	tickets uint64 // the next ticket (under mu)

	mu      sync.Mutex
	nodes   []quorum.Node
	quorum  int
	prefix  string // <meta_prefix>pub:
	escaped string // prefix with glob characters escaped
	timeout time.Duration
	recv    func(channel, message string) int
	changed func(key string) // told of releases while watching
	watch   bool             // subscribed to every release notification
	watchOK bool             // and a quorum of masters confirmed it
	release string           // <meta_prefix>released:
	refs    map[busTopic]int
	seen    map[string]time.Time // id -> forget after
	order   []seenID             // ids in arrival order, for pruning, from head
	head    int
	now     func() time.Time

	idBase string // random, per process
	seq    atomic.Uint64
}

type busTopic struct {
	name    string
	pattern bool
}

type seenID struct {
	id    string
	until time.Time
}

// busWindow is how long a message may take to arrive (older ones are
// dropped) and how long its id is remembered after that.
const busWindow = 30 * time.Second

// maxSeen bounds the ids remembered.
const maxSeen = 1 << 17

// ErrBusDetached is returned by Publish on a Bus no engine attached.
var ErrBusDetached = errors.New("relay: pub/sub bus has no masters")

// NewBus returns a Bus with no masters yet.
func NewBus() *Bus {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	bus := &Bus{refs: map[busTopic]int{}, seen: map[string]time.Time{}, now: time.Now, idBase: hex.EncodeToString(b[:])}
	bus.turn = sync.NewCond(&bus.turnMu)
	return bus
}

// Attach gives the bus its masters, the quorum, the meta prefix and the
// master timeout (quorum.Attacher): quorum.New calls it for
// Options.Relay.
func (b *Bus) Attach(nodes []quorum.Node, need int, metaPrefix string, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nodes, b.quorum, b.timeout = nodes, need, timeout
	b.prefix = metaPrefix + "pub:"
	b.escaped = globEscape(b.prefix)
	b.release = metaPrefix + "released:"
}

// WatchKeys, while on, has the masters send this proxy every release
// notification (one pattern, <meta_prefix>released:*), each reported to
// the OnKeyChange function by resource: CLIENT TRACKING invalidates the
// lock keys that other proxies release or delete.
func (b *Bus) WatchKeys(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.watch == on || b.release == "" {
		return
	}
	b.watch, b.watchOK = on, false
	p := globEscape(b.release) + "*"
	for _, nd := range b.nodes {
		if on {
			nd.PSubscribe(p)
		} else {
			nd.PUnsubscribe(p)
		}
	}
}

// KeysWatched waits until a quorum of masters confirmed WatchKeys(true),
// or ctx ends; at once if that was confirmed already, or WatchKeys is off.
func (b *Bus) KeysWatched(ctx context.Context) {
	b.mu.Lock()
	if !b.watch || b.watchOK {
		b.mu.Unlock()
		return
	}
	nodes, need, p := b.nodes, b.quorum, globEscape(b.release)+"*"
	b.mu.Unlock()
	if confirmed(ctx, nodes, need, p, true) {
		b.mu.Lock()
		b.watchOK = b.watch
		b.mu.Unlock()
	}
}

// OnKeyChange sets the function told of releases while WatchKeys is on.
// It must not block.
func (b *Bus) OnKeyChange(f func(key string)) {
	b.mu.Lock()
	b.changed = f
	b.mu.Unlock()
}

// NotifyPattern takes one message a master sent for a pattern
// subscription: a release notification while WatchKeys is on, or a
// pub/sub message (as Notify). It reports whether the message was the
// bus's; release notifications matched by a pattern never go to the
// waiters (they have their own subscriptions).
func (b *Bus) NotifyPattern(pattern, channel, message string) bool {
	b.mu.Lock()
	release, changed := b.release, b.changed
	b.mu.Unlock()
	if release != "" && pattern == globEscape(release)+"*" {
		if key, ok := strings.CutPrefix(channel, release); ok && changed != nil {
			changed(key)
		}
		return true
	}
	return b.Notify(channel, message)
}

// Receive sets the function that hands a message to this process's
// subscribers and returns how many received it. It is called for the
// messages of other proxies (from Notify) and for this proxy's own (from
// Publish), never twice for one publication, and must not block.
func (b *Bus) Receive(f func(channel, message string) int) {
	b.mu.Lock()
	b.recv = f
	b.mu.Unlock()
}

// Publish hands message to this proxy's subscribers of channel and sends
// it to every master for the other proxies'. It returns how many local
// subscribers received it (Redis would count every subscriber: the
// other proxies' are not known here), and a *quorum.QuorumError if fewer
// than a quorum of masters took it within the master timeout (the local
// subscribers have it; some other proxies' may not).
func (b *Bus) Publish(ctx context.Context, channel, message string) (int, error) {
	b.mu.Lock()
	nodes, need, timeout, prefix, recv := b.nodes, b.quorum, b.timeout, b.prefix, b.recv
	id := b.idBase + strconv.FormatUint(b.seq.Add(1), 36)
	now := b.now()
	b.remember(id, now, now)
	b.mu.Unlock()
	local := 0
	if recv != nil {
		local = recv(channel, message)
	}
	if len(nodes) == 0 {
		return local, ErrBusDetached
	}
	payload := id + " " + strconv.FormatInt(now.UnixMilli(), 10) + " " + message
	type answer struct{ err error }
	answers := make(chan answer, len(nodes))
	for _, nd := range nodes {
		nd.Send(scripts.BusPublish.Name, nil, []string{prefix + channel, payload}, func(_ any, err error) {
			answers <- answer{err}
		})
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got := 0
	var errs []error
	for range nodes {
		select {
		case a := <-answers:
			if a.err != nil {
				errs = append(errs, a.err)
				continue
			}
			got++
			if got >= need {
				return local, nil
			}
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			return local, &quorum.QuorumError{Op: "publish", Got: got, Need: need, Total: len(nodes), Errs: errs}
		}
	}
	return local, &quorum.QuorumError{Op: "publish", Got: got, Need: need, Total: len(nodes), Errs: errs}
}

// Listen makes the masters send this proxy the messages of channel (or,
// if pattern, of the channels matching the Redis glob pattern), counting
// listeners: the masters are asked once, and told to stop at the last
// Unlisten. It waits until a quorum of masters confirmed, or ctx ends
// (the masters that have not confirmed keep being asked in the
// background).
func (b *Bus) Listen(ctx context.Context, name string, pattern bool) {
	t := busTopic{name, pattern}
	b.mu.Lock()
	nodes, need := b.nodes, b.quorum
	full := b.wire(t)
	b.refs[t]++
	if b.refs[t] == 1 {
		for _, nd := range nodes {
			if pattern {
				nd.PSubscribe(full)
			} else {
				nd.Subscribe(full)
			}
		}
	}
	b.mu.Unlock()
	confirmed(ctx, nodes, need, full, pattern)
}

// confirmed waits until need of nodes confirmed the subscription to name
// (a pattern if pattern), and reports whether they did before ctx ended.
func confirmed(ctx context.Context, nodes []quorum.Node, need int, name string, pattern bool) bool {
	if len(nodes) == 0 {
		return false
	}
	ok := make(chan bool, len(nodes))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, nd := range nodes {
		go func() {
			if pattern {
				ok <- nd.PSubscribed(cctx, name) == nil
			} else {
				ok <- nd.Subscribed(cctx, name) == nil
			}
		}()
	}
	got := 0
	for range nodes {
		if <-ok {
			got++
		}
		if got >= need {
			return true
		}
	}
	return false
}

// Unlisten withdraws one Listen.
func (b *Bus) Unlisten(name string, pattern bool) {
	t := busTopic{name, pattern}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs[t] == 0 {
		return
	}
	b.refs[t]--
	if b.refs[t] > 0 {
		return
	}
	delete(b.refs, t)
	full := b.wire(t)
	for _, nd := range b.nodes {
		if pattern {
			nd.PUnsubscribe(full)
		} else {
			nd.Unsubscribe(full)
		}
	}
}

// wire is the name a topic has on the masters. Under b.mu.
func (b *Bus) wire(t busTopic) string {
	if t.pattern {
		return b.escaped + t.name
	}
	return b.prefix + t.name
}

// Notify takes one message from a master. It reports false if channel is
// not the bus's (a release notification: the caller routes it), and
// otherwise hands the message on unless its id was seen, or it is older
// than busWindow or malformed. It never blocks for long.
func (b *Bus) Notify(channel, message string) bool {
	b.mu.Lock()
	if b.prefix == "" || !strings.HasPrefix(channel, b.prefix) {
		b.mu.Unlock()
		return false
	}
	id, rest, ok1 := strings.Cut(message, " ")
	ts, payload, ok2 := strings.Cut(rest, " ")
	ms, err := strconv.ParseInt(ts, 10, 64)
	now := b.now()
	sent := time.UnixMilli(ms)
	if !ok1 || !ok2 || err != nil || now.Sub(sent) >= busWindow {
		b.mu.Unlock()
		return true
	}
	if _, dup := b.seen[id]; dup {
		b.mu.Unlock()
		return true
	}
	b.remember(id, now, sent)
	recv, name := b.recv, channel[len(b.prefix):]
	ticket := b.tickets
	b.tickets++
	b.mu.Unlock()
	b.turnMu.Lock()
	for b.serving != ticket {
		b.turn.Wait()
	}
	b.turnMu.Unlock()
	// The turn passes on whatever recv does, so that one receiver's
	// failure cannot stop every later message of every master.
	defer func() {
		b.turnMu.Lock()
		b.serving++
		b.turn.Broadcast()
		b.turnMu.Unlock()
	}()
	if recv != nil {
		recv(name, payload)
	}
	return true
}

// remember records id until busWindow past the later of now and sent,
// forgetting expired ids (and the oldest, beyond maxSeen). Under b.mu.
func (b *Bus) remember(id string, now, sent time.Time) {
	until := now
	if sent.After(until) {
		until = sent
	}
	until = until.Add(busWindow)
	b.seen[id] = until
	b.order = append(b.order, seenID{id, until})
	for b.head < len(b.order) && (len(b.order)-b.head > maxSeen || !now.Before(b.order[b.head].until)) {
		delete(b.seen, b.order[b.head].id)
		b.order[b.head] = seenID{}
		b.head++
	}
	if b.head > len(b.order)/2 {
		// Amortised: each entry moves at most once per halving.
		b.order = append(b.order[:0], b.order[b.head:]...)
		b.head = 0
	}
}

// globEscape escapes the characters a Redis glob pattern gives a meaning.
func globEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}
