package quorum

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/proto"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

var errDown = errors.New("fake: connection refused")

// errConnLost fails a request issued on a connection that a restart
// closed before the request reached the master.
var errConnLost = errors.New("fake: connection reset by a restart")

var debugFake = os.Getenv("DEBUG_FAKE") != ""

// luaScripts are the real scripts, run by every fake: the engine's unit
// tests exercise the Lua that production runs, not a Go copy of it.
var luaScripts = func() map[string]*scripts.Script {
	out := map[string]*scripts.Script{}
	for _, s := range scripts.All() {
		out[s.Name] = s
	}
	return out
}()

// fakeNode is a master for unit tests: an embedded miniredis (real Lua,
// real expiry on the wall clock) behind fault injection. Down makes every
// request fail at once. A positive delay makes requests land late, in FIFO
// order (like commands pipelined on one connection): the caller may time
// out, yet the request still takes effect afterwards.
type fakeNode struct {
	addr   string
	notify atomic.Pointer[func(string, string)]
	m      *miniredis.Miniredis
	sub    *miniredis.Subscriber

	mu        sync.Mutex
	peer      *server.Peer
	out       bytes.Buffer
	runID     string
	conn      uint64
	subs      map[string]bool
	psubs     map[string]bool
	down      bool
	delay     time.Duration
	sendDelay time.Duration // before a request is sent (see do)
	// holdNext holds the next Send of a script back this long before it
	// is sent, once (a busy client scheduler that holds one request back:
	// see Send).
	holdNext map[string]time.Duration
	inline   bool // Send runs a request that is not slowed at once (see Send)
	// oneSlot refuses, as a Redis Cluster does, a request whose keys
	// live in several hash slots.
	oneSlot bool
	queue   []lateOp
	working bool          // a worker applies the queue
	gate    chan struct{} // while open (not closed), late requests wait for it
	// strand: requests for strandScript wait for strandGate, out of order
	// with the others, each reported on strandArrived (see strand).
	strandScript  string
	strandGate    chan struct{}
	strandArrived chan struct{}
	queued        sync.WaitGroup
	// Send's requests take turns (sendSeq at Send, turn as each reaches
	// the master), so that they land in the order sent whatever the
	// scheduler does with the goroutines carrying them, as on one
	// connection. turnCond is on mu.
	sendSeq, turn uint64
	turnCond      *sync.Cond
	evals         map[string]int // script name -> calls that ran
	evalsBy       map[string]int // script name + " " + first argument -> calls
	refused       int            // script calls refused while down (not pings)
	pings         int            // health pings that reached the fake, answered or refused
	vm            *luaVM
}

// idleFakes keeps fakes for reuse: the exhaustive tests build thousands
// of clusters, and starting an embedded master (a listener, a command
// table) and a Lua state costs more than the test itself.
var idleFakes = make(chan *fakeNode, 1024)

// newFake returns a fake master for the test, from idleFakes if one is
// idle; it goes back there when the test ends.
func newFake(t testing.TB, addr string, notify func(string, string)) *fakeNode {
	t.Helper()
	f := getFake(t, addr, notify)
	t.Cleanup(f.recycle)
	return f
}

// getFake is newFake for a caller that recycles the fake itself.
func getFake(t testing.TB, addr string, notify func(string, string)) *fakeNode {
	t.Helper()
	var f *fakeNode
	select {
	case f = <-idleFakes:
	default:
		f = startFake(t)
	}
	f.mu.Lock()
	f.addr, f.runID, f.conn = addr, addr+"-run-1", 1
	if notify != nil {
		f.notify.Store(&notify)
	}
	f.mu.Unlock()
	return f
}

// warmFakes starts n idle fakes ahead of a test that builds many clusters
// at once, so that starting them does not starve the first rounds.
func warmFakes(t testing.TB, n int) {
	for range n - len(idleFakes) {
		f := startFake(t)
		// Run every script once: the first run of each costs more.
		// Each on an empty master: one script's keys read as another's
		// numbers (a lease mark read as a slot count) could make it loop
		// for hours.
		for name := range luaScripts {
			f.vm.run(name, []string{"k1", "k2", "k3", "k4"}, []string{"t", "1", "1", "1"})
			f.m.FlushAll()
		}
		idleFakes <- f
	}
}

// recycle resets the fake and makes it idle again (or closes it).
func (f *fakeNode) recycle() {
	f.unhold()
	f.drain()
	f.mu.Lock()
	f.oneSlot = false
	for ch := range f.subs {
		f.sub.Unsubscribe(ch)
	}
	for p := range f.psubs {
		f.sub.Punsubscribe(p)
	}
	f.subs = map[string]bool{}
	f.psubs = map[string]bool{}
	f.evals = map[string]int{}
	f.evalsBy = map[string]int{}
	f.refused = 0
	f.pings = 0
	f.down, f.delay, f.sendDelay, f.inline, f.holdNext = false, 0, 0, false, nil
	f.notify.Store(nil)
	f.m.FlushAll()
	f.mu.Unlock()
	select {
	case idleFakes <- f:
	default:
		f.close()
	}
}

func startFake(t testing.TB) *fakeNode {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	m.ClockTTL(true)
	f := &fakeNode{m: m, subs: map[string]bool{}, psubs: map[string]bool{}, evals: map[string]int{}, evalsBy: map[string]int{}}
	f.turnCond = sync.NewCond(&f.mu)
	f.peer = server.NewPeer(bufio.NewWriter(&f.out))
	f.vm = newLuaVM(f.run)
	f.sub = m.NewSubscriber()
	msgs, pmsgs := f.sub.Messages(), f.sub.Pmessages()
	// The messages go through an unbounded queue, so that the master never
	// waits for the router: a script publishes while mu is held, and a
	// waiter that subscribes takes mu while it holds the router's lock
	// (Wakeups.watch), so a publish that waited for the router could wait
	// forever.
	var (
		qmu    sync.Mutex
		queue  [][2]string
		signal = make(chan struct{}, 1)
	)
	push := func(ch, msg string) {
		qmu.Lock()
		queue = append(queue, [2]string{ch, msg})
		qmu.Unlock()
		select {
		case signal <- struct{}{}:
		default:
		}
	}
	go func() {
		for msg := range msgs {
			push(msg.Channel, msg.Message)
		}
		close(signal)
	}()
	go func() {
		for msg := range pmsgs {
			push(msg.Channel, msg.Message)
		}
	}()
	go func() {
		for range signal {
			for {
				qmu.Lock()
				if len(queue) == 0 {
					qmu.Unlock()
					break
				}
				m := queue[0]
				queue = queue[1:]
				qmu.Unlock()
				// Not under mu: a script publishes while mu is held.
				if notify := f.notify.Load(); notify != nil {
					(*notify)(m[0], m[1])
				}
			}
		}
	}()
	return f
}

func (f *fakeNode) close() {
	f.sub.Close()
	f.m.Close()
}

// restart loses every key and comes back with a new run_id, as a master
// without persistence does; the proxy meets it on a new connection.
func (f *fakeNode) restart() {
	restartTogether(f)
}

// restartTogether restarts the fakes fs as one event: none of them is seen
// restarted (its identity or its data) before all are, as when masters
// restart while the proxy looks elsewhere.
func restartTogether(fs ...*fakeNode) {
	for _, f := range fs {
		f.mu.Lock()
	}
	for _, f := range fs {
		f.m.FlushAll()
		f.conn++
		f.runID = f.addr + "-run-" + strconv.FormatUint(f.conn, 10)
	}
	for _, f := range fs {
		f.mu.Unlock()
	}
}

func (f *fakeNode) Identity() Identity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Identity{RunID: f.runID, Conn: f.conn}
}

func (f *fakeNode) setDown(b bool) { f.mu.Lock(); f.down = b; f.mu.Unlock() }

func (f *fakeNode) setSendDelay(d time.Duration) {
	f.mu.Lock()
	f.sendDelay = d
	f.mu.Unlock()
}

func (f *fakeNode) setDelay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// hold makes every request late until unhold, whatever the time: a master
// that is slow beyond any round, however slow the test machine is.
func (f *fakeNode) hold() {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.delay = time.Nanosecond
	f.mu.Unlock()
}

// unhold lets held requests land, in the order they were sent, then the
// stranded ones (see strand).
func (f *fakeNode) unhold() {
	f.mu.Lock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
		f.delay = 0
	}
	if f.strandGate != nil {
		close(f.strandGate)
		f.strandGate, f.strandScript = nil, ""
	}
	f.mu.Unlock()
}

// strand makes every request for script wait until unhold, out of order
// with this master's other requests, which land at once: a request left
// on a connection that was replaced while later ones go out on the new
// one. Its caller sees no answer: Send's completion waits for unhold, and
// the engine's round timer answers for it (a stranded Eval ignores its
// context, down and delay). Each stranded request is reported on the
// returned channel when it arrives.
func (f *fakeNode) strand(script string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.strandScript, f.strandGate = script, make(chan struct{})
	f.strandArrived = make(chan struct{}, 64)
	return f.strandArrived
}

// drain waits until every late request has landed.
func (f *fakeNode) drain() { f.queued.Wait() }

// value reads a live key from outside (tests).
func (f *fakeNode) value(k string) (string, bool) {
	v, err := f.m.Get(k)
	return v, err == nil
}

// set writes a key from outside (tests); ttl 0 means no expiry.
func (f *fakeNode) set(k, v string, ttl time.Duration) {
	f.m.Set(k, v)
	if ttl > 0 {
		f.m.SetTTL(k, ttl)
	}
}

// del deletes a key from outside (tests), as its expiry would.
func (f *fakeNode) del(k string) { f.m.Del(k) }

// keys lists every live key but the master's intact mark, which every
// engine sets when it first meets the masters (Engine.checkIntact).
func (f *fakeNode) keys() []string {
	return slices.DeleteFunc(f.m.Keys(), func(k string) bool { return k == "redlock-proxy:intact" })
}

// calls is how many times script ran on this master.
func (f *fakeNode) calls(script string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evals[script]
}

// refusedCalls is how many script calls (health pings aside) the fake
// refused while down.
func (f *fakeNode) refusedCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

// pingCount is how many health pings reached the fake since it was made
// (or recycled), whether it answered them or was down.
func (f *fakeNode) pingCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pings
}

// callsWith is how many times script ran with arg as its first argument
// (a token, for most scripts).
func (f *fakeNode) callsWith(script, arg string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evalsBy[script+" "+arg]
}

// do runs op atomically, now or late. Late requests are applied by one
// worker per node, in the order they were sent.
//
// Like rueidis, a request whose context ended before it could be sent is
// not sent; sendDelay models the client-side wait before sending (a busy
// scheduler, a full pipeline).
func do[T any](ctx context.Context, f *fakeNode, op func() (T, error)) (T, error) {
	f.mu.Lock()
	wait := f.sendDelay
	f.mu.Unlock()
	return doSent(ctx, f, op, wait, noTurn)
}

// noTurn is the turn of a request that does not take one (not sent
// through Send).
const noTurn = ^uint64(0)

// awaitTurn waits, with mu held, until the request of turn seq (from
// Send) is the next to reach the master; noTurn returns at once.
func (f *fakeNode) awaitTurn(seq uint64) {
	if seq == noTurn {
		return
	}
	for f.turn != seq {
		f.turnCond.Wait()
	}
}

// passTurn lets the next Send's request reach the master; mu is held.
func (f *fakeNode) passTurn(seq uint64) {
	if seq == noTurn {
		return
	}
	f.turn++
	f.turnCond.Broadcast()
	f.queued.Done() // Send counted it until it reached the master
}

// doSent is do for a request that waits wait before it is sent, and
// then, with a turn (seq), reaches the master only after every request
// sent before it through Send did.
func doSent[T any](ctx context.Context, f *fakeNode, op func() (T, error), wait time.Duration, seq uint64) (T, error) {
	var zero T
	if wait > 0 {
		time.Sleep(wait)
	}
	f.mu.Lock()
	f.awaitTurn(seq)
	if err := ctx.Err(); err != nil {
		f.passTurn(seq)
		f.mu.Unlock()
		return zero, err
	}
	if f.down {
		f.passTurn(seq)
		f.mu.Unlock()
		return zero, errDown
	}
	if f.delay == 0 && len(f.queue) == 0 {
		v, err := op()
		f.passTurn(seq)
		f.mu.Unlock()
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	out := make(chan result, 1)
	f.queued.Add(1)
	f.queue = append(f.queue, lateOp{due: time.Now().Add(f.delay), run: func() {
		v, err := op()
		out <- result{v, err}
	}})
	if !f.working {
		f.working = true
		go f.work()
	}
	f.passTurn(seq)
	f.mu.Unlock()
	select {
	case r := <-out:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

type lateOp struct {
	due time.Time
	run func() // called with mu held
}

// work applies queued requests in order until the queue is empty. Only one
// worker runs per fake (working), even across a recycle.
func (f *fakeNode) work() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.working = false
			f.mu.Unlock()
			return
		}
		next := f.queue[0]
		gate := f.gate
		f.mu.Unlock()
		time.Sleep(time.Until(next.due))
		if gate != nil {
			<-gate
		}
		f.mu.Lock()
		next.run()
		f.queue = f.queue[1:]
		f.mu.Unlock()
		f.queued.Done()
	}
}

func (f *fakeNode) Addr() string { return f.addr }

// Eval runs the real script on the embedded master.
func (f *fakeNode) Eval(ctx context.Context, name string, keys, args []string) (any, error) {
	f.mu.Lock()
	wait, conn := f.sendDelay, f.conn
	f.mu.Unlock()
	return f.eval(ctx, name, keys, args, wait, noTurn, conn)
}

// eval is Eval for a request that waits wait before it is sent and, with
// a turn (seq, from Send), reaches the master in its turn. conn is the
// connection it was issued on: a request that reaches the master after a
// restart (a new connection) is lost with the old one, as over TCP.
func (f *fakeNode) eval(ctx context.Context, name string, keys, args []string, wait time.Duration, seq, conn uint64) (any, error) {
	s, ok := luaScripts[name]
	err := error(nil)
	if !ok {
		err = fmt.Errorf("fake: no script %q", name)
	} else {
		// Every request the engine makes is checked against the
		// script's descriptor (the engine checks too; a test that
		// calls the fake directly is held to the same layout).
		err = s.Check(keys, args)
	}
	if err != nil {
		f.mu.Lock()
		f.awaitTurn(seq)
		f.passTurn(seq)
		f.mu.Unlock()
		return nil, err
	}
	op := func() (any, error) {
		if f.conn != conn {
			return nil, errConnLost
		}
		f.evals[name]++
		if len(args) > 0 {
			f.evalsBy[name+" "+args[0]]++
		}
		v, err := f.vm.run(name, keys, args)
		if debugFake {
			fmt.Printf("%s %s %v %v -> %v %v\n", f.addr, name, keys, args, v, err)
		}
		return v, err
	}
	f.mu.Lock()
	if f.oneSlot && !oneSlot(keys) {
		f.awaitTurn(seq)
		f.passTurn(seq)
		f.mu.Unlock()
		return nil, fmt.Errorf("CROSSSLOT Keys in request don't hash to the same slot: %s %q", name, keys)
	}
	gate, arrived := f.strandGate, f.strandArrived
	stranded := gate != nil && f.strandScript == name
	if stranded {
		// Stranded requests wait out of order: their turn passes now.
		f.queued.Add(1)
		f.awaitTurn(seq)
		f.passTurn(seq)
	}
	f.mu.Unlock()
	if !stranded {
		v, err := doSent(ctx, f, op, wait, seq)
		if errors.Is(err, errDown) {
			f.mu.Lock()
			f.refused++
			f.mu.Unlock()
		}
		return v, err
	}
	defer f.queued.Done()
	select {
	case arrived <- struct{}{}:
	default:
	}
	<-gate
	f.mu.Lock()
	defer f.mu.Unlock()
	return op()
}

// Send runs Eval on a goroutine of its own; the fake's delays and pauses
// apply as to Eval, with no deadline (the engine bounds its wait).
//
// With inline set, a request to a fake that is not slowed in any way
// (no delay, hold, strand or send delay) runs on the caller's goroutine
// before Send returns, as an answer already waiting on the connection
// would: the exhaustive subset test's "ok" masters then answer within
// the round whatever the scheduler does on a busy machine.
//
// Requests reach the master in the order Send was called, as on one
// connection, whatever the goroutines carrying them do: each takes a turn
// here (and its send delay is read here, when it is issued), and until it
// reached the master it counts in queued, so drain waits for it.
func (f *fakeNode) Send(name string, keys, args []string, done func(v any, err error)) {
	f.mu.Lock()
	wait := max(f.sendDelay, f.holdNext[name])
	delete(f.holdNext, name)
	now := f.inline && f.delay == 0 && len(f.queue) == 0 && f.strandGate == nil && wait == 0 && f.turn == f.sendSeq
	seq, conn := f.sendSeq, f.conn
	if !now {
		f.sendSeq++
		f.queued.Add(1)
	}
	f.mu.Unlock()
	if now {
		done(f.Eval(context.Background(), name, keys, args))
		return
	}
	go func() { done(f.eval(context.Background(), name, keys, args, wait, seq, conn)) }()
}

// run dispatches one command to the embedded master and returns its raw
// reply and the reply parsed; callers hold mu.
func (f *fakeNode) run(cmd []string) (string, any, error) {
	return dispatch(f.m, f.peer, &f.out, cmd)
}

// dispatch runs cmd on the embedded master m through peer, which writes
// to out, and returns the raw reply and the reply parsed (a script sees
// nil for a nil, and a Redis error as an error).
func dispatch(m *miniredis.Miniredis, peer *server.Peer, out *bytes.Buffer, cmd []string) (string, any, error) {
	out.Reset()
	m.Server().Dispatch(peer, cmd)
	peer.Flush()
	raw := out.String()
	if raw == "$-1\r\n" || raw == "*-1\r\n" || raw == "_\r\n" {
		return raw, nil, nil // proto.Parse reads a nil as ""
	}
	v, err := proto.Parse(raw)
	if err != nil {
		return raw, nil, err
	}
	if e, ok := v.(error); ok {
		return raw, nil, e
	}
	return raw, nilElements(v), nil
}

// nilElements turns the nil elements of an array reply, which proto.Parse
// leaves as their raw encoding, into nil (false in Lua, as Redis gives
// MGET's missing keys to a script).
func nilElements(v any) any {
	a, ok := v.([]any)
	if !ok {
		return v
	}
	for i, e := range a {
		if s, isString := e.(string); isString && (s == "$-1\r\n" || s == "*-1\r\n" || s == "_\r\n") {
			a[i] = nil
			continue
		}
		a[i] = nilElements(e)
	}
	return a
}

func (f *fakeNode) Ping(ctx context.Context) error {
	f.mu.Lock()
	f.pings++
	f.mu.Unlock()
	_, err := do(ctx, f, func() (struct{}, error) { return struct{}{}, nil })
	return err
}

func (f *fakeNode) Exists(ctx context.Context, keys ...string) (int64, error) {
	return do(ctx, f, func() (int64, error) {
		n := int64(0)
		for _, k := range keys {
			if f.m.Exists(k) {
				n++
			}
		}
		return n, nil
	})
}

func (f *fakeNode) Subscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = true
	f.sub.Subscribe(ch)
}

func (f *fakeNode) Unsubscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
	f.sub.Unsubscribe(ch)
}

func (f *fakeNode) PSubscribe(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.psubs[p] = true
	f.sub.Psubscribe(p)
}

func (f *fakeNode) PUnsubscribe(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.psubs, p)
	f.sub.Punsubscribe(p)
}

func (f *fakeNode) PSubscribed(ctx context.Context, p string) error { return f.Subscribed(ctx, p) }

func (f *fakeNode) Subscribed(ctx context.Context, ch string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	return nil
}
