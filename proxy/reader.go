package proxy

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Limits bound what one client may send in one command. They are checked
// on each header as soon as it arrives, before the bytes it announces are
// read, so no length a client claims is ever allocated: the memory a
// connection holds is bounded by these limits, whatever it sends.
type Limits struct {
	// MaxArgs is the most elements a command may have (the name counts).
	MaxArgs int
	// MaxArgBytes is the longest argument, in bytes.
	MaxArgBytes int
	// MaxCommandBytes is the most bytes one command may take on the wire;
	// 0 means MaxArgs * MaxArgBytes.
	MaxCommandBytes int

	preAuth bool // the tighter limits before authentication
}

// Limits before authentication (when authentication is required), as
// Redis's: at most 10 arguments of at most 16 KB each.
const (
	preAuthMaxArgs     = 10
	preAuthMaxArgBytes = 16 << 10
)

// maxInline caps an inline command line, and the length of a header line
// (*<n> or $<n>), as Redis's PROTO_INLINE_MAX_SIZE does.
const maxInline = 64 << 10

// Buffer sizes: every connection reads into a small array it owns; a
// command that does not fit moves to a pooled buffer that goes back to the
// pool once the connection has nothing buffered. An idle connection holds
// no more than its small array.
const (
	smallBufSize  = 512
	pooledBufSize = 16 << 10
)

// protocolError is a malformed or oversized request. The connection answers
// "-ERR Protocol error: <msg>" and is closed, as Redis does.
type protocolError struct{ msg string }

// Error implements error: "Protocol error: <msg>", as Redis words it.
func (e *protocolError) Error() string { return "Protocol error: " + e.msg }

func protoErr(format string, args ...any) error {
	return &protocolError{fmt.Sprintf(format, args...)}
}

// reader reads commands from a client, in RESP (multibulk) or inline form,
// enforcing limits. It is not safe for concurrent use. The arguments it
// returns alias its buffer and are valid until the next call to next.
type reader struct {
	src  io.Reader
	pool *sync.Pool // of *[]byte of pooledBufSize; shared by the server

	small [smallBufSize]byte
	buf   []byte  // small[:], a pooled buffer or a larger one
	ptr   *[]byte // the pooled buffer in use, to give back
	r, w  int     // unread bytes are buf[r:w]

	// Parse state of the command starting at buf[r], so that a command
	// arriving in pieces is not scanned again from its start.
	pos   int   // next byte to look at, relative to r
	scan  int   // how far the header line at pos was searched for '\n'
	nargs int   // -1: the multibulk count is not read yet
	marks []int // start, end of each argument read so far, relative to r
	args  [][]byte

	// before is called before a read that may block (to flush replies).
	before func() error
	// waiting is told true when a partial command is buffered and a read
	// is needed to complete it, false when nothing is buffered.
	waiting func(partial bool)
}

func newReader(src io.Reader, pool *sync.Pool) *reader {
	rd := &reader{src: src, pool: pool, nargs: -1}
	rd.buf = rd.small[:]
	return rd
}

// buffered reports how many unread bytes are buffered.
func (rd *reader) buffered() int { return rd.w - rd.r }

// next returns the next command's arguments (never empty), reading as
// needed. lim bounds it. Errors are *protocolError or the source's.
func (rd *reader) next(lim *Limits) ([][]byte, error) {
	for {
		args, need, err := rd.parse(lim)
		if err != nil || args != nil {
			return args, err
		}
		if err := rd.fill(need); err != nil {
			return nil, err
		}
	}
}

// fill reads at least one byte, making room for need bytes of the current
// command (counted from r) first.
func (rd *reader) fill(need int) error {
	if rd.r == rd.w {
		rd.reset()
	}
	if rd.w == len(rd.buf) || need > len(rd.buf)-rd.r {
		rd.makeRoom(need)
	}
	if rd.before != nil {
		if err := rd.before(); err != nil {
			return err
		}
	}
	if rd.waiting != nil {
		rd.waiting(rd.r < rd.w)
	}
	n, err := rd.src.Read(rd.buf[rd.w:])
	rd.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// makeRoom moves the partial command to the front of a buffer that can hold
// need bytes of it (at least one more than it has).
func (rd *reader) makeRoom(need int) {
	have := rd.w - rd.r
	need = max(need, have+1)
	size := len(rd.buf)
	if size < need {
		// At least double (amortised growth while a header line arrives),
		// or exactly what a checked argument needs when that is more.
		size = max(need, 2*size)
	}
	if size == len(rd.buf) {
		copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r, rd.w = 0, have
		return
	}
	var nb []byte
	var ptr *[]byte
	if size <= pooledBufSize && rd.pool != nil {
		ptr = rd.pool.Get().(*[]byte)
		nb = *ptr
	} else {
		// A command is never more than the limits allow, and buffers larger
		// than the pooled size are dropped once the connection is idle.
		nb = make([]byte, max(size, pooledBufSize))
	}
	copy(nb, rd.buf[rd.r:rd.w])
	rd.release()
	rd.buf, rd.ptr = nb, ptr
	rd.r, rd.w = 0, have
}

// reset returns to the small buffer once nothing is buffered, and lets go
// of what the last commands made it grow.
func (rd *reader) reset() {
	rd.release()
	clear(rd.args[:cap(rd.args)]) // they point into buffers being let go
	if cap(rd.args) > 16 {
		rd.args = nil
	}
	if cap(rd.marks) > 32 {
		rd.marks = nil
	}
	rd.buf = rd.small[:]
	rd.r, rd.w = 0, 0
}

func (rd *reader) release() {
	if rd.ptr != nil {
		rd.pool.Put(rd.ptr)
		rd.ptr = nil
	}
}

// close gives back any pooled buffer.
func (rd *reader) close() {
	rd.release()
	rd.buf, rd.r, rd.w = rd.small[:], 0, 0
}

// parse tries to take one complete command from the buffer. It returns the
// arguments, or nil and how many bytes (from r) the command needs at least.
func (rd *reader) parse(lim *Limits) (args [][]byte, need int, err error) {
	for {
		b := rd.buf[rd.r:rd.w]
		if len(b) == 0 {
			return nil, 1, nil
		}
		if b[0] != '*' {
			args, need, err = rd.parseInline(b, lim)
		} else {
			args, need, err = rd.parseMultibulk(b, lim)
		}
		if err != nil || need > 0 {
			return nil, need, err
		}
		if len(args) > 0 {
			return args, 0, nil
		}
		// An empty command (an empty line, *0): nothing to answer.
	}
}

// consume ends the current command at n bytes from r.
func (rd *reader) consume(n int) {
	rd.r += n
	rd.pos, rd.scan, rd.nargs, rd.marks = 0, 0, -1, rd.marks[:0]
}

func (rd *reader) parseMultibulk(b []byte, lim *Limits) ([][]byte, int, error) {
	authed := !lim.preAuth
	if rd.nargs < 0 {
		line, ok, err := rd.headerLine(b, "mbulk count")
		if !ok || err != nil {
			return nil, len(b) + 1, err
		}
		n, ok := parseLength(line[1:])
		switch {
		case !ok:
			return nil, 0, protoErr("invalid multibulk length")
		case n > lim.MaxArgs && !authed:
			return nil, 0, protoErr("unauthenticated multibulk length")
		case n > lim.MaxArgs:
			return nil, 0, protoErr("invalid multibulk length")
		}
		rd.pos += len(line) + 2
		if n <= 0 {
			rd.consume(rd.pos)
			return nil, 0, nil
		}
		rd.nargs = n
	}
	for len(rd.marks) < 2*rd.nargs {
		if rd.pos >= len(b) {
			return nil, rd.pos + 1, nil
		}
		if b[rd.pos] != '$' {
			return nil, 0, protoErr("expected '$', got '%c'", b[rd.pos])
		}
		line, ok, err := rd.headerLine(b, "bulk count")
		if !ok || err != nil {
			return nil, len(b) + 1, err
		}
		size, ok := parseLength(line[1:])
		switch {
		case !ok || size < 0:
			return nil, 0, protoErr("invalid bulk length")
		case size > lim.MaxArgBytes && !authed:
			return nil, 0, protoErr("unauthenticated bulk length")
		case size > lim.MaxArgBytes:
			return nil, 0, protoErr("invalid bulk length")
		}
		start := rd.pos + len(line) + 2
		end := start + size
		if end+2 > lim.MaxCommandBytes && lim.MaxCommandBytes > 0 {
			return nil, 0, protoErr("too big request")
		}
		if end+2 > len(b) {
			// Wait for the whole argument; the header is checked, so this
			// much may be allocated.
			return nil, end + 2, nil
		}
		rd.marks = append(rd.marks, start, end)
		rd.pos = end + 2 // the CRLF after a bulk is skipped, as Redis does
	}
	args := rd.args[:0]
	for i := 0; i < len(rd.marks); i += 2 {
		args = append(args, b[rd.marks[i]:rd.marks[i+1]:rd.marks[i+1]])
	}
	rd.args = args
	rd.consume(rd.pos)
	return args, 0, nil
}

// headerLine returns the line starting at pos (without CRLF), false if it
// is not complete yet, or an error if it is too long or not ended by CRLF.
// A line arriving in pieces is searched only once.
func (rd *reader) headerLine(b []byte, what string) ([]byte, bool, error) {
	from := rd.pos
	for i := max(from, rd.scan); i < len(b); i++ {
		if b[i] == '\n' {
			if i == from || b[i-1] != '\r' {
				return nil, false, protoErr("invalid %s", lengthWord(what))
			}
			rd.scan = 0
			return b[from : i-1], true, nil
		}
	}
	rd.scan = len(b)
	if len(b)-from > maxInline {
		return nil, false, protoErr("too big %s string", what)
	}
	return nil, false, nil
}

func lengthWord(what string) string {
	if what == "mbulk count" {
		return "multibulk length"
	}
	return "bulk length"
}

// parseLength reads a decimal length as Redis's string2ll does: an optional
// '-', no leading zeros, at most 18 digits.
func parseLength(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

var errUnbalancedQuotes = &protocolError{"unbalanced quotes in request"}

// parseInline reads a command written as a line of words (telnet,
// redis-cli --no-raw pipes), with Redis's quoting rules. The words are
// unquoted in place: they are never longer than the text they came from.
func (rd *reader) parseInline(b []byte, lim *Limits) ([][]byte, int, error) {
	i := rd.pos
	for ; i < len(b) && b[i] != '\n'; i++ {
	}
	if i == len(b) {
		if len(b) > maxInline {
			return nil, 0, protoErr("too big inline request")
		}
		rd.pos = len(b)
		return nil, len(b) + 1, nil
	}
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, err := splitArgs(line, rd.args[:0], lim)
	if err != nil {
		return nil, 0, err
	}
	rd.args = args
	rd.consume(i + 1)
	return args, 0, nil
}

// splitArgs splits an inline line into words in place, as Redis's
// sdssplitargs: spaces and tabs separate, "..." understands \n \r \t \b \a
// \\ \" and \xHH, '...' understands \'. A closing quote must be followed by
// a space or the end of the line.
func splitArgs(line []byte, out [][]byte, lim *Limits) ([][]byte, error) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return out, nil
		}
		if len(out) >= lim.MaxArgs {
			return nil, protoErr("invalid multibulk length")
		}
		w := i // words are written at w, read at i; w <= i always
		start := w
		var quote byte
		for done := false; !done; {
			if i == len(line) {
				if quote != 0 {
					return nil, errUnbalancedQuotes
				}
				break
			}
			c := line[i]
			switch {
			case quote == 0 && isSpace(c):
				done = true
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
				i++
			case quote != 0 && c == quote:
				i++
				if i < len(line) && !isSpace(line[i]) {
					return nil, errUnbalancedQuotes
				}
				done = true
			case quote == '"' && c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
				line[w] = unhex(line[i+2])<<4 | unhex(line[i+3])
				w, i = w+1, i+4
			case quote == '"' && c == '\\' && i+1 < len(line):
				line[w] = unescape(line[i+1])
				w, i = w+1, i+2
			case quote == '\'' && c == '\\' && i+1 < len(line) && line[i+1] == '\'':
				line[w] = '\''
				w, i = w+1, i+2
			default:
				line[w] = c
				w, i = w+1, i+1
			}
		}
		if w-start > lim.MaxArgBytes {
			return nil, protoErr("invalid bulk length")
		}
		out = append(out, line[start:w:w])
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// isProtocolError reports whether err is a malformed or oversized request.
func isProtocolError(err error) bool {
	var pe *protocolError
	return errors.As(err, &pe)
}
