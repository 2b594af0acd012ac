package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

var testLimits = Limits{MaxArgs: 8, MaxArgBytes: 32, MaxCommandBytes: 200}

// chunkReader hands out its input at most n bytes per Read.
type chunkReader struct {
	b     []byte
	n     int
	reads int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := copy(p, c.b[:min(len(c.b), c.n, len(p))])
	c.b = c.b[n:]
	return n, nil
}

// readAll reads every command from in, fed n bytes per read, until an
// error; it returns the commands (copied) and the error.
func readAll(t *testing.T, in string, n int, lim *Limits) ([]string, error) {
	t.Helper()
	pool := &sync.Pool{New: func() any { b := make([]byte, pooledBufSize); return &b }}
	rd := newReader(&chunkReader{b: []byte(in), n: n}, pool)
	var got []string
	for {
		args, err := rd.next(lim)
		if err != nil {
			return got, err
		}
		var parts []string
		for _, a := range args {
			parts = append(parts, string(a))
		}
		got = append(got, strings.Join(parts, "|"))
	}
}

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 33)
	tests := []struct {
		name string
		in   string
		want []string
		err  string // "" means the input ends cleanly (io.EOF)
	}{
		{"one command", "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", []string{"PING|hi"}, ""},
		{"pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", []string{"PING", "ECHO|"}, ""},
		{"binary argument", "*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n", []string{"ECHO|a\r\nb"}, ""},
		{"empty multibulk skipped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", []string{"PING"}, ""},
		{"inline", "PING\r\nECHO  hello   world\n", []string{"PING", "ECHO|hello|world"}, ""},
		{"inline quotes", `SET "a b" 'c\'d' "\x41\n"` + "\r\n", []string{"SET|a b|c'd|A\n"}, ""},
		{"inline empty line skipped", "\r\n   \r\nPING\r\n", []string{"PING"}, ""},
		{"inline unbalanced", "ECHO \"abc\r\n", nil, "Protocol error: unbalanced quotes in request"},
		{"inline closing quote then text", "ECHO \"abc\"d\r\n", nil, "Protocol error: unbalanced quotes in request"},
		{"inline too many words", "a b c d e f g h i\r\n", nil, "Protocol error: invalid multibulk length"},
		{"inline word too long", "ECHO " + long + "\r\n", nil, "Protocol error: invalid bulk length"},
		{"too many args", "*9\r\n", nil, "Protocol error: invalid multibulk length"},
		{"huge multibulk", "*1000000\r\n", nil, "Protocol error: invalid multibulk length"},
		{"bulk too long", "*2\r\n$4\r\nECHO\r\n$33\r\n", nil, "Protocol error: invalid bulk length"},
		{"bulk claiming 1 GB", "*2\r\n$4\r\nECHO\r\n$1073741824\r\n", nil, "Protocol error: invalid bulk length"},
		{"command too big", "*8\r\n" + strings.Repeat("$30\r\n"+strings.Repeat("y", 30)+"\r\n", 8), nil, "Protocol error: too big request"},
		{"negative bulk", "*1\r\n$-1\r\n", nil, "Protocol error: invalid bulk length"},
		{"not a number", "*x\r\n", nil, "Protocol error: invalid multibulk length"},
		{"leading zero", "*01\r\n", nil, "Protocol error: invalid multibulk length"},
		{"plus sign", "*+1\r\n", nil, "Protocol error: invalid multibulk length"},
		{"bare newline in header", "*1\n", nil, "Protocol error: invalid multibulk length"},
		{"expected dollar", "*1\r\n:1\r\n", nil, "Protocol error: expected '$', got ':'"},
		{"header too long", "*1\r\n$" + strings.Repeat("1", 70000), nil, "Protocol error: too big bulk count string"},
		{"inline too long", strings.Repeat("a", 70000), nil, "Protocol error: too big inline request"},
		{"truncated", "*2\r\n$4\r\nECHO\r\n$5\r\nab", nil, ""},
	}
	for _, tt := range tests {
		// Every command must read the same whole or one byte at a time.
		for _, n := range []int{1 << 20, 7, 1} {
			got, err := readAll(t, tt.in, n, &testLimits)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("%s (%d-byte reads): got %q, want %q", tt.name, n, got, tt.want)
			}
			switch {
			case tt.err == "" && !errors.Is(err, io.EOF):
				t.Errorf("%s (%d-byte reads): err %v, want EOF", tt.name, n, err)
			case tt.err != "" && (err == nil || err.Error() != tt.err || !isProtocolError(err)):
				t.Errorf("%s (%d-byte reads): err %v, want %q", tt.name, n, err, tt.err)
			}
		}
	}
}

// TestReaderPreAuthLimits: before authentication, Redis's tighter limits
// apply, with its wording.
func TestReaderPreAuthLimits(t *testing.T) {
	lim := Limits{MaxArgs: preAuthMaxArgs, MaxArgBytes: preAuthMaxArgBytes, MaxCommandBytes: 1 << 20, preAuth: true}
	for in, want := range map[string]string{
		"*11\r\n":                        "Protocol error: unauthenticated multibulk length",
		"*2\r\n$4\r\nAUTH\r\n$16385\r\n": "Protocol error: unauthenticated bulk length",
	} {
		_, err := readAll(t, in, 1<<20, &lim)
		if err == nil || err.Error() != want {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

// TestReaderRefusesBeforeBuffering: a bulk over the limit is refused on
// its header, without reading the bytes it announces.
func TestReaderRefusesBeforeBuffering(t *testing.T) {
	in := "*2\r\n$4\r\nECHO\r\n$33\r\n" + strings.Repeat("z", 1<<20)
	src := &chunkReader{b: []byte(in), n: 64}
	rd := newReader(src, nil)
	_, err := rd.next(&testLimits)
	if !isProtocolError(err) {
		t.Fatalf("err %v, want a protocol error", err)
	}
	if src.reads != 1 || len(rd.buf) != smallBufSize {
		t.Fatalf("read %d times into a %d-byte buffer; want refusal on the first read, in the small buffer", src.reads, len(rd.buf))
	}
}

// TestReaderLetsGoOfBuffers: a command larger than the small array borrows
// a buffer, and the connection goes back to the small array once nothing is
// buffered.
func TestReaderLetsGoOfBuffers(t *testing.T) {
	lim := Limits{MaxArgs: 16, MaxArgBytes: 1 << 20, MaxCommandBytes: 4 << 20}
	big := strings.Repeat("b", 100<<10)
	in := "*2\r\n$4\r\nECHO\r\n$" + "102400\r\n" + big + "\r\n*1\r\n$4\r\nPING\r\n"
	pool := &sync.Pool{New: func() any { b := make([]byte, pooledBufSize); return &b }}
	src := &chunkReader{b: []byte(in), n: 1 << 20}
	rd := newReader(src, pool)
	args, err := rd.next(&lim)
	if err != nil || !bytes.Equal(args[1], []byte(big)) {
		t.Fatalf("first command: %v", err)
	}
	if len(rd.buf) < len(big) {
		t.Fatalf("buffer %d bytes while holding a %d-byte argument", len(rd.buf), len(big))
	}
	args, err = rd.next(&lim)
	if err != nil || string(args[0]) != "PING" {
		t.Fatalf("second command: %q %v", args, err)
	}
	// Waiting for the next command (here: the end of the input) happens
	// with the small array only.
	if _, err := rd.next(&lim); !errors.Is(err, io.EOF) {
		t.Fatalf("third read: %v", err)
	}
	if len(rd.buf) != smallBufSize || rd.ptr != nil {
		t.Fatalf("still holding a %d-byte buffer after the large command", len(rd.buf))
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"billing:*", "billing:42", true},
		{"billing:*", "billing:", true},
		{"billing:*", "billing", false},
		{"billing:*", "orders:1", false},
		{"*", "", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a[bc]d", "acd", true},
		{"a[^bc]d", "acd", false},
		{"a[a-c]d", "abd", true},
		{"a\\*", "a*", true},
		{"a\\*", "ab", false},
		{"*:*:x", "a:b:c:x", true},
		{"*a*a*a*a*b", strings.Repeat("a", 200), false},
		{"orders/*", "orders/a/b", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.p, []byte(tt.s)); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.p, tt.s, got, tt.want)
		}
	}
}

// FuzzReader: whatever arrives, in whatever pieces, the reader neither
// panics nor buffers past the limits, and reads the same commands whole or
// piecemeal.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", "PING\r\n", `ECHO "a\x41" 'b\'c'` + "\r\n",
		"*1\r\n$-1\r\n", "*3\r\n$5\r\nRLOCK\r\n$1\r\nr\r\n$4\r\n1000\r\n", "*0\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, n uint8) {
		whole, errWhole := readAll(t, string(in), 1<<20, &testLimits)
		parts, errParts := readAll(t, string(in), int(n%16)+1, &testLimits)
		if strings.Join(whole, ",") != strings.Join(parts, ",") {
			t.Fatalf("whole %q, in pieces %q", whole, parts)
		}
		if isProtocolError(errWhole) != isProtocolError(errParts) {
			t.Fatalf("whole: %v, in pieces: %v", errWhole, errParts)
		}
		for _, c := range whole {
			if len(c) > testLimits.MaxCommandBytes {
				t.Fatalf("command of %d bytes passed a %d limit", len(c), testLimits.MaxCommandBytes)
			}
		}
	})
}

// loopReader serves the same bytes forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

// BenchmarkReader: reading typical lock commands, 16 pipelined per read
// and one per read; it should not allocate per command.
func BenchmarkReader(b *testing.B) {
	cmd := "*5\r\n$5\r\nRLOCK\r\n$12\r\norders:12345\r\n$5\r\n30000\r\n$5\r\nTOKEN\r\n$22\r\nAbCdEfGhIjKlMnOpQrStUv\r\n"
	lim := Limits{MaxArgs: 1024, MaxArgBytes: 64 << 10, MaxCommandBytes: 1 << 20}
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("pipelined=%d", n), func(b *testing.B) {
			src := &loopReader{b: []byte(strings.Repeat(cmd, n))}
			pool := &sync.Pool{New: func() any { b := make([]byte, pooledBufSize); return &b }}
			rd := newReader(src, pool)
			b.SetBytes(int64(len(cmd)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rd.next(&lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
