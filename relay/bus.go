// Package relay carries pub/sub messages between the proxies that share
// the masters: a client's PUBLISH (and the PUBLISH that ends a drop-in lock
// script) through any proxy reaches the subscribers of every proxy, once
// each. The engine (package quorum) only hands the relay its masters
// (quorum.Options.Relay); the messages travel on the masters' own pub/sub,
// through the quorum.Node interface.
package relay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
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
//   - Order: messages from one publishing proxy on one channel are handed
//     on in the order published, whichever masters bring them, from the
//     first this proxy received of them (see "Order" below).
//   - At most maxSeen ids are remembered (the oldest are forgotten
//     first): past about maxSeen/busWindow publications a second, a copy
//     delayed by a stopped master could be handed on again.
//
// Order. Each master keeps the order of one publisher's messages (one
// connection), but the first copy of a message may come from a master
// that missed the one before it (its subscription was confirmed after
// it, or the publisher's connection to it failed), while the copies of
// the earlier one are still on their way from the others. So the
// publisher chains its messages: a message's id names the one the same
// proxy published before it on the same channel (id = base, sequence,
// and ".previous" when there is one). A receiving proxy keeps, per
// publisher and channel (a stream), the last sequence it handed on; a
// message whose previous one was not handed on yet is held until that
// one arrives, or for holdBack (twice the master timeout) at most, then
// handed on past the gap; a message older than one handed on already
// (it came after holdBack, or before the stream's first) is dropped, not
// handed on out of order. Streams are forgotten busWindow after their
// last message, as are the publisher's chain links, so both are bounded
// by the channels in use. Ids without the chain (an older proxy's) are
// handed on as they come.
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

	// links is, per channel, the sequence of this proxy's latest
	// publication there and when (under mu): the next one names it.
	links map[string]link
	// streams are the other proxies' messages per publisher and channel
	// (under mu); swept is when both maps were last swept of entries
	// idle for busWindow.
	streams map[streamKey]*stream
	swept   time.Time
	// dropped counts messages not handed on because a later one of their
	// stream was (Dropped).
	dropped atomic.Uint64
}

// link is a channel's latest publication of this proxy.
type link struct {
	seq uint64
	at  time.Time
}

// streamKey names one publisher's messages on one channel.
type streamKey struct{ base, channel string }

// stream is what a receiving proxy knows of one publisher's messages on
// one channel: the last sequence handed on, and the messages held until
// the one before them is.
type stream struct {
	done  uint64
	held  []chained // by sequence
	timer *time.Timer
	gen   uint64 // counts the timers, so that a stopped one that fired late does nothing
	used  time.Time
}

// chained is one message of a stream, with its place in the chain.
type chained struct {
	seq, prev uint64
	payload   string
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

// idBaseLen is the length of a proxy's id base (hex of 6 random bytes).
const idBaseLen = 12

// holdBack is how long a message waits for the one before it in its
// stream: twice the master timeout (the publisher's own bound for a
// master to take a message), at least 20 ms.
func (b *Bus) holdBack() time.Duration { return max(2*b.timeout, 20*time.Millisecond) }

// ErrBusDetached is returned by Publish on a Bus no engine attached.
var ErrBusDetached = errors.New("relay: pub/sub bus has no masters")

// NewBus returns a Bus with no masters yet.
func NewBus() *Bus {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	bus := &Bus{refs: map[busTopic]int{}, seen: map[string]time.Time{}, now: time.Now, idBase: hex.EncodeToString(b[:]),
		links: map[string]link{}, streams: map[streamKey]*stream{}}
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
	seq := b.seq.Add(1)
	id := b.idBase + strconv.FormatUint(seq, 36)
	now := b.now()
	b.sweep(now)
	if l, ok := b.links[channel]; ok && now.Sub(l.at) < busWindow {
		id += "." + strconv.FormatUint(l.seq, 36)
	}
	b.links[channel] = link{seq, now}
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
// than busWindow or malformed; a message whose previous one in its stream
// was not handed on yet is held (see Bus, "Order"). It never blocks for
// long.
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
	b.sweep(now)
	name := channel[len(b.prefix):]
	out := []string{payload}
	if base, seq, prev, ok := parseID(id); ok {
		out = b.chain(streamKey{base, name}, chained{seq, prev, payload}, now)
	}
	b.handOn(name, out) // unlocks b.mu
	return true
}

// chain places m in its stream and returns the payloads to hand on now,
// in order (none when m is held or dropped). Under b.mu.
func (b *Bus) chain(k streamKey, m chained, now time.Time) []string {
	st := b.streams[k]
	switch {
	case st == nil:
		// The stream's first message here: nothing before it to wait
		// for (its previous one, if any, came before this proxy
		// listened, or was forgotten).
		b.streams[k] = &stream{done: m.seq, used: now}
		return []string{m.payload}
	case m.seq <= st.done:
		b.dropped.Add(1) // a later one was handed on: too late
		return nil
	}
	st.used = now
	if m.prev > st.done {
		i, _ := slices.BinarySearchFunc(st.held, m.seq, func(h chained, seq uint64) int { return cmp.Compare(h.seq, seq) })
		st.held = slices.Insert(st.held, i, m)
		if st.timer == nil {
			st.gen++
			gen := st.gen
			st.timer = time.AfterFunc(b.holdBack(), func() { b.gap(k, gen) })
		}
		return nil
	}
	st.done = m.seq
	return append([]string{m.payload}, st.release(false)...)
}

// release takes the held messages that may go now out of the stream, in
// order: those whose previous one was handed on, or, with skip (holdBack
// ran out), every one. Under b.mu.
func (st *stream) release(skip bool) []string {
	var out []string
	for len(st.held) > 0 && (skip || st.held[0].prev <= st.done) {
		h := st.held[0]
		st.held = st.held[1:]
		if h.seq <= st.done {
			continue
		}
		st.done = h.seq
		out = append(out, h.payload)
	}
	if len(st.held) == 0 && st.timer != nil {
		st.timer.Stop()
		st.timer = nil
	}
	return out
}

// gap hands on a stream's held messages once holdBack ran out: the
// message before them is lost, or later than a message may be.
func (b *Bus) gap(k streamKey, gen uint64) {
	b.mu.Lock()
	st := b.streams[k]
	if st == nil || st.timer == nil || st.gen != gen {
		b.mu.Unlock()
		return // its messages went on meanwhile
	}
	st.timer = nil
	b.handOn(k.channel, st.release(true)) // unlocks b.mu
}

// handOn gives payloads of channel to the receiver, in order, after every
// hand-on decided before it. Called under b.mu, which it releases before
// it waits for its turn.
func (b *Bus) handOn(name string, payloads []string) {
	if len(payloads) == 0 {
		b.mu.Unlock()
		return
	}
	recv := b.recv
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
		for _, p := range payloads {
			recv(name, p)
		}
	}
}

// Dropped is how many messages were not handed on because a later one of
// the same publisher and channel had been (they came more than holdBack
// after it).
func (b *Bus) Dropped() uint64 { return b.dropped.Load() }

// sweep forgets the chain links and streams idle for busWindow, once per
// busWindow. Under b.mu.
func (b *Bus) sweep(now time.Time) {
	if now.Sub(b.swept) < busWindow {
		return
	}
	b.swept = now
	for ch, l := range b.links {
		if now.Sub(l.at) >= busWindow {
			delete(b.links, ch)
		}
	}
	for k, st := range b.streams {
		if now.Sub(st.used) >= busWindow && len(st.held) == 0 {
			delete(b.streams, k)
		}
	}
}

// parseID reads a chained id: the publisher's base, the message's
// sequence and the previous one's (0: none). ok is false for an id of
// another form, which is handed on as it comes.
func parseID(id string) (base string, seq, prev uint64, ok bool) {
	if len(id) <= idBaseLen {
		return "", 0, 0, false
	}
	if _, err := hex.DecodeString(id[:idBaseLen]); err != nil {
		return "", 0, 0, false
	}
	rest := id[idBaseLen:]
	s, p, chained := strings.Cut(rest, ".")
	seq, err := strconv.ParseUint(s, 36, 64)
	if err != nil || seq == 0 {
		return "", 0, 0, false
	}
	if chained {
		if prev, err = strconv.ParseUint(p, 36, 64); err != nil || prev >= seq {
			return "", 0, 0, false
		}
	}
	return id[:idBaseLen], seq, prev, true
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
