package redisnode

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// Error is an error reply from the master (a script error, NOSCRIPT,
// WRONGTYPE...): the master answered, and the connection is fine.
type Error string

func (e Error) Error() string { return string(e) }

// errClosed is returned for requests still waiting when the connection
// closes without a more precise cause.
var errClosed = errors.New("redisnode: connection closed")

// request is one command waiting for its reply, in the order sent.
type request struct {
	// script is the script run (nil for a plain command): on NOSCRIPT the
	// request is sent again with EVAL.
	script     *script
	keys, args []string
	done       func(v any, err error)
	// slot is the hash slot of the keys on a cluster's shard (-1
	// elsewhere): only requests of one slot share a batch.
	slot int
	// members, when set, are the requests a batch carries (script is then
	// their script, run by its batch wrapper; keys, args and done unset).
	members []request
}

// pipe is one pipelined connection to a master. Callers append their encoded
// command to the pending output and their completion to the queue, under one
// lock, so that the order of the queue is the order on the wire. At most one
// write is outstanding: from when it is written until the master answered
// every command in it. Whoever finds none outstanding and no write in
// progress writes everything pending in one system call; others only append,
// and the reader writes what gathered once the last answer of the
// outstanding write is in (after handing the answers over, so that the
// follow-ups they cause join that write). So commands issued while a write
// is out go together in the next one, whatever their scripts, with no timer
// and no goroutine hand-off; a lone caller writes at once; and the master
// reads and answers them as one batch, which costs it less per command than
// one at a time. A write that would block (a master that stops reading) is
// handed to a goroutine of the pipe's after callerWrite, so that no caller
// waits on one master (see flushLocked). One reader goroutine reads the
// replies (readRaw: its own read calls, one per reply while the pipe is
// idle), parses them and completes the queue in order, on its own goroutine
// (completions must not block).
type pipe struct {
	nc net.Conn

	mu      sync.Mutex
	out     []byte // encoded commands not yet written
	spare   []byte // the buffer of the previous write, for reuse
	writing bool   // a caller, or writeBehind, is writing
	// tls is set when nc is a TLS connection, whose writes cannot be
	// resumed after a deadline: they are all made by writeBehind.
	tls bool
	// deadline is the write deadline last set on nc; only the writer
	// uses it.
	deadline time.Time
	queue    []request
	head     int // queue[head:] wait for replies
	// sent is how many of queue[head:] were written: the outstanding
	// write's commands not answered yet (0: none outstanding).
	sent int
	// open gathers consecutive requests for one script while a write is
	// in progress; it is encoded (as one batch if it holds several) when
	// the next write takes the pending output, or when a request for
	// another script arrives.
	open   []request
	loaded map[string]bool // SHA1s of the scripts sent with EVAL on this connection
	err    error           // set once the connection failed

	// replies counts replies read, for the stall watchdog.
	replies atomic.Uint64
	// flushDelay, if > 0, makes a writer that sees other requests in
	// flight wait this long before writing, so that more join the write.
	flushDelay time.Duration
	// onFail is called once, when the connection fails.
	onFail func(p *pipe, err error)
	// readerDone closes when the reader goroutine returned.
	readerDone chan struct{}
}

func newPipe(nc net.Conn, flushDelay time.Duration, onFail func(*pipe, error)) *pipe {
	p := &pipe{
		nc:         nc,
		loaded:     map[string]bool{},
		flushDelay: flushDelay,
		onFail:     onFail,
		readerDone: make(chan struct{}),
	}
	_, p.tls = nc.(*tls.Conn)
	go p.readLoop()
	return p
}

// batchYields is how many times a writer that sees more than
// batchInFlight requests in flight (its own counts) yields the processor
// before it writes, so that callers already running can append theirs to
// the same write: under load a write then carries several commands for the
// price of one system call on each side, and a lone caller never waits.
// Measured against (4, 2) at 16 and 64 clients: +8% cycles/s and 26% fewer
// script calls at 16, the same at 64.
const (
	batchInFlight = 1
	batchYields   = 3
)

// maxBatch bounds the requests one batch carries.
const maxBatch = 32

// evalScript sends script s with keys and args. done is called once with
// the reply, on the reader's goroutine (or at once, on the caller's, if
// the connection failed).
//
// While a write is in progress, consecutive requests for one script are
// gathered and sent as one call of the script's batch wrapper (see
// batchSource), which runs each of them in turn, in one script on the
// master: one command to parse, dispatch and answer instead of several.
// Each request's result is the one it would have had alone (the requests
// run in the same order, nothing runs between them); the batch is one
// entry of the queue, at the place of its requests.
func (p *pipe) evalScript(s *script, keys, args []string, done func(any, error), slot int) {
	r := request{script: s, keys: keys, args: args, done: done, slot: slot}
	if !p.lockOpen(done) {
		return
	}
	if (p.writing || p.sent > 0) && s.batch != nil {
		if len(p.open) > 0 && (p.open[0].script != s || p.open[0].slot != slot || len(p.open) >= maxBatch) {
			p.closeOpen()
		}
		p.open = append(p.open, r)
		p.mu.Unlock()
		return
	}
	p.closeOpen()
	p.encodeOne(r)
	p.flushLocked()
}

// closeOpen encodes the open requests: one alone as itself, several as
// one batch. p.mu is held.
func (p *pipe) closeOpen() {
	switch len(p.open) {
	case 0:
		return
	case 1:
		p.encodeOne(p.open[0])
	default:
		members := slices.Clone(p.open)
		p.encodeBatch(request{script: members[0].script, members: members})
	}
	clear(p.open)
	p.open = p.open[:0]
}

// encodeOne encodes a single request: EVALSHA once its script was sent on
// this connection, EVAL (which also loads it) the first time, so that the
// first use needs no round trip and no NOSCRIPT. p.mu is held.
func (p *pipe) encodeOne(r request) {
	s := r.script
	if p.loaded[s.sha] {
		p.out = appendEval(p.out, "EVALSHA", s.sha, r.keys, r.args)
	} else {
		p.loaded[s.sha] = true
		p.out = appendEval(p.out, "EVAL", s.src, r.keys, r.args)
	}
	p.queue = append(p.queue, r)
}

// encodeBatch encodes a batch: its wrapper's keys are the members' keys in
// order, its arguments the member count, each member's key and argument
// counts, then the members' arguments in order. p.mu is held.
func (p *pipe) encodeBatch(r request) {
	b := r.script.batch
	nk, na := 0, 1+2*len(r.members)
	for _, m := range r.members {
		nk += len(m.keys)
		na += len(m.args)
	}
	keys := make([]string, 0, nk)
	args := make([]string, 0, na)
	args = append(args, strconv.Itoa(len(r.members)))
	for _, m := range r.members {
		keys = append(keys, m.keys...)
		args = append(args, strconv.Itoa(len(m.keys)), strconv.Itoa(len(m.args)))
	}
	for _, m := range r.members {
		args = append(args, m.args...)
	}
	if p.loaded[b.sha] {
		p.out = appendEval(p.out, "EVALSHA", b.sha, keys, args)
	} else {
		p.loaded[b.sha] = true
		p.out = appendEval(p.out, "EVAL", b.src, keys, args)
	}
	p.queue = append(p.queue, r)
}

// lockOpen takes p.mu and reports true while the connection has not
// failed and the master reads what is written to it; otherwise it
// releases the lock, answers done with the failure (or errNotReading)
// and reports false.
func (p *pipe) lockOpen(done func(any, error)) bool {
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		done(nil, err)
		return false
	}
	if len(p.out) > maxPendingOut {
		p.mu.Unlock()
		done(nil, errNotReading)
		return false
	}
	return true
}

// asking sends ASKING then script s, adjacent on the wire; done gets the
// script's reply (ASKING's OK is dropped).
func (p *pipe) asking(s *script, keys, args []string, done func(any, error)) {
	if !p.lockOpen(done) {
		return
	}
	p.closeOpen()
	p.out = appendCommand(p.out, "ASKING")
	p.queue = append(p.queue, request{done: func(any, error) {}})
	p.encodeOne(request{script: s, keys: keys, args: args, done: done, slot: -1})
	p.flushLocked()
}

// plain sends a script's plain form (scripts.Step): the step's commands,
// adjacent on the wire, then, on this connection, what their replies lead
// to: another step, or the script s itself with keys and args. done gets
// the script's reply once. A step's commands join the current write like
// any request; a follow-up is sent from the reader, once the step's last
// reply is in, and joins the next write.
func (p *pipe) plain(st *scripts.Step, s *script, keys, args []string, done func(any, error)) {
	if !p.lockOpen(done) {
		return
	}
	p.closeOpen()
	g := &gather{replies: make([]any, len(st.Commands))}
	for i, cmd := range st.Commands {
		p.out = appendCommand(p.out, cmd...)
		p.queue = append(p.queue, request{done: func(v any, err error) {
			if !g.add(i, v, err) {
				return
			}
			if g.err != nil {
				done(nil, g.err)
				return
			}
			switch o := st.Then(g.replies); {
			case o.Next != nil:
				p.plain(o.Next, s, keys, args, done)
			case o.Lua:
				p.evalScript(s, keys, args, done, -1)
			case o.Err != nil:
				done(nil, o.Err)
			default:
				done(o.Reply, nil)
			}
		}})
	}
	p.flushLocked()
}

// gather collects the replies of one plain step. A reply may come from
// the reader while the connection's failure completes the step's later
// commands on another goroutine, hence the lock.
type gather struct {
	mu      sync.Mutex
	replies []any
	got     int
	err     error // the connection's failure, if it failed first
	settled bool
}

// add records reply i (a Redis error reply is the reply; any other error
// is the connection's failure) and reports whether the step is now
// settled: every reply in, or the connection failed. It reports true
// once.
func (g *gather) add(i int, v any, err error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.settled {
		return false
	}
	var e Error
	switch {
	case err == nil:
		g.replies[i] = v
	case errors.As(err, &e):
		g.replies[i] = e
	default:
		g.err = err
		g.settled = true
		return true
	}
	g.got++
	g.settled = g.got == len(g.replies)
	return g.settled
}

// command sends a plain command (PING, SCRIPT...).
func (p *pipe) command(args []string, done func(any, error)) {
	if !p.lockOpen(done) {
		return
	}
	p.closeOpen()
	p.out = appendCommand(p.out, args...)
	p.queue = append(p.queue, request{done: done})
	p.flushLocked()
}

// callerWrite bounds how long a caller may spend in a write before the
// rest of it is handed to a goroutine of the pipe's own. A master that
// stops reading (paused, or too slow) fills the socket's buffers and
// then blocks every write to it: a caller blocked there would hold up the
// request it is sending for every other master too (the engine sends a
// request to the masters one after another), and so the whole quorum
// decision, for as long as the stall lasts (up to StallTimeout). Writes
// to a master that reads go through at once, and pay nothing but a clock
// read.
const callerWrite = 2 * time.Millisecond

// maxPendingOut bounds the encoded commands that may wait for a master
// that does not read: past it a request fails at once (errNotReading)
// rather than the proxy's memory growing with the stall.
const maxPendingOut = 16 << 20

// errNotReading fails a request while maxPendingOut bytes already wait.
var errNotReading = errors.New("redisnode: master is not reading (16 MiB of commands wait to be written)")

// flushLocked writes the pending output unless a write is in progress;
// p.mu is held and is released. The caller writes itself (no goroutine
// hand-off for a lone request), for at most callerWrite; a write that
// would block longer is finished by a goroutine of the pipe's, which also
// writes whatever arrives meanwhile, so that callers only append until
// the master reads again or the connection is closed. Over TLS a write
// that times out cannot be resumed (crypto/tls), so every write there is
// made on that goroutine.
func (p *pipe) flushLocked() {
	if p.writing || p.sent > 0 {
		p.mu.Unlock()
		return
	}
	p.writing = true
	if p.tls {
		p.mu.Unlock()
		go p.writeBehind(nil)
		return
	}
	p.flushLoop(true)
}

// writeBehind finishes rest (what a caller's bounded write left) and then
// writes as flushLoop does, without a deadline; p.writing is set.
func (p *pipe) writeBehind(rest []byte) {
	if !p.tls {
		p.nc.SetWriteDeadline(time.Time{})
		p.deadline = time.Time{}
	}
	if len(rest) > 0 {
		if _, err := p.nc.Write(rest); err != nil {
			p.mu.Lock()
			p.writing = false
			p.mu.Unlock()
			p.fail(fmt.Errorf("write: %w", err))
			return
		}
	}
	p.mu.Lock()
	if (len(p.out) == 0 && len(p.open) == 0) || p.err != nil || p.sent > 0 {
		p.writing = false
		p.mu.Unlock()
		return
	}
	p.flushLoop(false)
}

// flushLoop writes the pending output until none is left; p.mu is held
// and p.writing set; it releases both. bounded is set on a caller's
// goroutine: a write then blocks for at most callerWrite before
// writeBehind takes over.
func (p *pipe) flushLoop(bounded bool) {
	for {
		if inFlight := len(p.queue) - p.head + len(p.open); inFlight > batchInFlight {
			for range batchYields {
				p.mu.Unlock()
				runtime.Gosched()
				p.mu.Lock()
			}
		} else if p.flushDelay > 0 && inFlight > 1 {
			p.mu.Unlock()
			time.Sleep(p.flushDelay)
			p.mu.Lock()
		}
		p.closeOpen()
		// buf is written outside the lock while callers append to the
		// other buffer: the two must never share an array, so spare is
		// taken here and given back only once the write is over.
		buf := p.out
		p.out, p.spare = p.spare[:0], nil
		p.sent = len(p.queue) - p.head
		p.mu.Unlock()
		var n int
		var err error
		if bounded {
			// The deadline is moved only when less than half of
			// callerWrite is left, not at every write.
			if now := time.Now(); p.deadline.Sub(now) < callerWrite/2 {
				p.deadline = now.Add(callerWrite)
				p.nc.SetWriteDeadline(p.deadline)
			}
			n, err = p.nc.Write(buf)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// buf is not given back for reuse: writeBehind
				// still writes from it.
				go p.writeBehind(buf[n:])
				return
			}
		} else {
			_, err = p.nc.Write(buf)
		}
		p.mu.Lock()
		if cap(buf) <= 64<<10 {
			p.spare = buf[:0]
		}
		if err != nil {
			p.writing = false
			p.mu.Unlock()
			p.fail(fmt.Errorf("write: %w", err))
			return
		}
		if (len(p.out) == 0 && len(p.open) == 0) || p.err != nil || p.sent > 0 {
			// Nothing more, or the write just made is outstanding: the
			// reader writes what gathers once it is answered.
			p.writing = false
			p.mu.Unlock()
			return
		}
	}
}

// inFlight is how many requests wait for their reply.
func (p *pipe) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue) - p.head + len(p.open)
}

// readLoop reads the replies until the connection fails, and fails it.
func (p *pipe) readLoop() {
	defer close(p.readerDone)
	ok, err := p.readDirect()
	if !ok {
		err = p.readBuffered()
	}
	p.fail(err)
}

// readBuffered reads the replies through the pipe's buffered reader: for
// connections without a file descriptor of their own (TLS, in-memory).
func (p *pipe) readBuffered() error {
	br := bufio.NewReaderSize(p.nc, maxLine)
	for {
		v, err := readReply(br, 0)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if err := p.deliver(v); err != nil {
			return err
		}
	}
}

// deliver hands one reply to the request at the head of the queue and,
// once the outstanding write is answered, writes what gathered meanwhile.
func (p *pipe) deliver(v any) error {
	p.replies.Add(1)
	p.mu.Lock()
	if p.head == len(p.queue) {
		p.mu.Unlock()
		return fmt.Errorf("unexpected reply %v", v)
	}
	r := p.queue[p.head]
	p.queue[p.head] = request{}
	p.head++
	if p.sent > 0 {
		p.sent--
	}
	answered := p.sent == 0
	switch {
	case p.head == len(p.queue):
		p.queue, p.head = p.queue[:0], 0
	case p.head >= 1024 && p.head*2 >= len(p.queue):
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	var noscript bool
	if e, ok := v.(Error); ok && r.script != nil && len(e) >= 8 && e[:8] == "NOSCRIPT" {
		// The script cache was flushed (SCRIPT FLUSH): send it again
		// in full, and every script in full once more.
		clear(p.loaded)
		noscript = true
	}
	p.mu.Unlock()
	if noscript {
		// Not on this goroutine: a send may wait for its write.
		go p.resend(r)
	} else {
		complete(r, v)
	}
	if !answered {
		return nil
	}
	// The outstanding write is answered: write what gathered
	// meanwhile (a completion above may have written already).
	p.mu.Lock()
	if p.sent == 0 && !p.writing && p.err == nil && (len(p.out) > 0 || len(p.open) > 0) {
		p.flushLocked()
	} else {
		p.mu.Unlock()
	}
	return nil
}

// complete hands a reply to its request, or a batch's replies to its
// members.
func complete(r request, v any) {
	if r.members == nil {
		if e, ok := v.(Error); ok {
			r.done(nil, e)
		} else {
			r.done(v, nil)
		}
		return
	}
	vs, ok := v.([]any)
	if !ok || len(vs) != len(r.members) {
		err, isErr := v.(Error)
		if !isErr {
			err = Error(fmt.Sprintf("redisnode: batch of %d got %v", len(r.members), v))
		}
		for _, m := range r.members {
			m.done(nil, err)
		}
		return
	}
	for i, m := range r.members {
		complete(m, vs[i])
	}
}

// resend sends a request again after NOSCRIPT, in full.
func (p *pipe) resend(r request) {
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		complete(r, Error(err.Error()))
		return
	}
	p.closeOpen()
	if r.members != nil {
		p.encodeBatch(r)
	} else {
		p.encodeOne(r)
	}
	p.flushLocked()
}

// fail closes the connection once and fails every request still waiting
// with err.
func (p *pipe) fail(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	waiting := append(p.queue[p.head:], p.open...)
	p.queue, p.head, p.open, p.sent = nil, 0, nil, 0
	p.mu.Unlock()
	p.nc.Close()
	for _, r := range waiting {
		if r.members != nil {
			for _, m := range r.members {
				m.done(nil, err)
			}
		} else {
			r.done(nil, err)
		}
	}
	if p.onFail != nil {
		p.onFail(p, err)
	}
}

// close closes the connection (requests waiting fail with errClosed) and
// waits for the reader to return.
func (p *pipe) close() {
	p.fail(errClosed)
	<-p.readerDone
}

// appendEval encodes EVAL or EVALSHA with the script's source or sha.
func appendEval(b []byte, cmd, script string, keys, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(3+len(keys)+len(args)), 10)
	b = append(b, '\r', '\n')
	b = appendBulk(b, cmd)
	b = appendBulk(b, script)
	b = append(b, '$')
	nk := strconv.Itoa(len(keys))
	b = strconv.AppendInt(b, int64(len(nk)), 10)
	b = append(b, '\r', '\n')
	b = append(b, nk...)
	b = append(b, '\r', '\n')
	for _, k := range keys {
		b = appendBulk(b, k)
	}
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = appendBulk(b, a)
	}
	return b
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// maxReplyDepth and maxBulk bound what a reply may hold: the scripts'
// replies are small and shallow; anything else is a broken connection.
const (
	maxReplyDepth = 8
	maxBulk       = 64 << 20
	maxArray      = 1 << 20
	// maxLine is the longest reply line, as the buffered reader's size
	// bounds it.
	maxLine = 16 << 10
)

// readReply reads one RESP2 reply: int64, string, nil, []any, or Error
// for an error reply. A non-nil error means the connection is unusable.
func readReply(br *bufio.Reader, depth int) (any, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return string(body), nil
	case '-':
		return Error(body), nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed integer %q", body)
		}
		return n, nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxArray || depth >= maxReplyDepth {
			return nil, fmt.Errorf("malformed array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(br, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply type %q", kind)
}

// batchSource wraps a script's source into its batch wrapper: the script
// becomes a function of its own KEYS and ARGV, called once per member with
// the member's keys and arguments (ARGV[1] the member count, then each
// member's key and argument counts, then the arguments, as encodeBatch
// lays them out), each in a pcall so that one member's error is its own
// reply and the others still run. A nil result becomes false (nil in the
// reply array). It returns one reply per member.
func batchSource(src string) string {
	return "local function one(KEYS, ARGV)\n" + src + "\nend\n" + `local m = tonumber(ARGV[1])
local out = {}
local ki, ai = 1, 2 + 2 * m
for j = 1, m do
  local nk, na = tonumber(ARGV[2 * j]), tonumber(ARGV[2 * j + 1])
  local keys, argv = {}, {}
  for x = 1, nk do keys[x] = KEYS[ki]; ki = ki + 1 end
  for x = 1, na do argv[x] = ARGV[ai]; ai = ai + 1 end
  local ok, res = pcall(one, keys, argv)
  if not ok then
    if type(res) == 'table' then out[j] = res else out[j] = redis.error_reply(tostring(res)) end
  elseif res == nil then
    out[j] = false
  else
    out[j] = res
  end
end
return out
`
}

// errIncomplete is parseReply's answer when b ends before the reply does.
var errIncomplete = errors.New("redisnode: incomplete reply")

// parseReply parses one RESP2 reply at the start of b, as readReply reads
// one, and returns it with the number of bytes it took. It returns
// errIncomplete when b holds only the start of a reply; any other error
// means the connection is unusable. What it returns does not refer to b.
func parseReply(b []byte, depth int) (any, int, error) {
	i := bytes.IndexByte(b[:min(len(b), maxLine)], '\n')
	if i < 0 {
		if len(b) >= maxLine {
			return nil, 0, fmt.Errorf("reply line longer than %d bytes", maxLine)
		}
		return nil, 0, errIncomplete
	}
	line := b[:i+1]
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, 0, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	n0 := len(line)
	switch kind {
	case '+':
		return string(body), n0, nil
	case '-':
		return Error(body), n0, nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("malformed integer %q", body)
		}
		return n, n0, nil
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxBulk {
			return nil, 0, fmt.Errorf("malformed bulk length %q", body)
		}
		if n < 0 {
			return nil, n0, nil
		}
		if len(b) < n0+n+2 {
			return nil, 0, errIncomplete
		}
		return string(b[n0 : n0+n]), n0 + n + 2, nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil || n > maxArray || depth >= maxReplyDepth {
			return nil, 0, fmt.Errorf("malformed array length %q", body)
		}
		if n < 0 {
			return nil, n0, nil
		}
		out := make([]any, n)
		at := n0
		for i := range out {
			v, m, err := parseReply(b[at:], depth+1)
			if err != nil {
				return nil, 0, err
			}
			out[i] = v
			at += m
		}
		return out, at, nil
	}
	return nil, 0, fmt.Errorf("unexpected reply type %q", kind)
}
