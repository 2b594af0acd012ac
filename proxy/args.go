package proxy

import (
	"strings"
)

// The argument errors every command shares, in Redis's wording.
var (
	ErrSyntax     = &Error{Code: "ERR", Msg: "syntax error"}
	ErrNotInteger = &Error{Code: "ERR", Msg: "value is not an integer or out of range"}
)

// Args is a cursor over a command's arguments: positional arguments first,
// then options, read in order and never by raw index.
type Args struct {
	a []([]byte)
	i int
}

// NewArgs returns a cursor over args (the arguments after the name).
func NewArgs(args [][]byte) *Args { return &Args{a: args} }

// More reports whether arguments are left.
func (a *Args) More() bool { return a.i < len(a.a) }

// Left is how many arguments are left.
func (a *Args) Left() int { return len(a.a) - a.i }

// Next returns the next argument, or ErrSyntax if there is none.
func (a *Args) Next() ([]byte, error) {
	if a.i >= len(a.a) {
		return nil, ErrSyntax
	}
	v := a.a[a.i]
	a.i++
	return v, nil
}

// String returns the next argument as a string.
func (a *Args) String() (string, error) {
	v, err := a.Next()
	return string(v), err
}

// Int returns the next argument as a 64-bit integer, strictly as Redis
// parses integers (no sign '+', no spaces, no leading zeros), or
// ErrNotInteger.
func (a *Args) Int() (int64, error) {
	v, err := a.Next()
	if err != nil {
		return 0, err
	}
	n, ok := ParseInt(v)
	if !ok {
		return 0, ErrNotInteger
	}
	return n, nil
}

// Option reads the next argument as an option name: it returns it in upper
// case, or "" when no arguments are left.
func (a *Args) Option() string {
	if a.i >= len(a.a) {
		return ""
	}
	v := a.a[a.i]
	a.i++
	return strings.ToUpper(string(v))
}

// Rest returns every argument left and consumes them.
func (a *Args) Rest() [][]byte {
	v := a.a[a.i:]
	a.i = len(a.a)
	return v
}

// Done returns ErrSyntax if arguments are left over.
func (a *Args) Done() error {
	if a.i < len(a.a) {
		return ErrSyntax
	}
	return nil
}

// ParseInt parses a decimal int64 the way Redis's string2ll does.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := false
	p := b
	if p[0] == '-' {
		neg = true
		p = p[1:]
		if len(p) == 0 {
			return 0, false
		}
	}
	if p[0] < '1' || p[0] > '9' || len(p) > 19 {
		return 0, false
	}
	var v uint64 // 19 digits cannot overflow a uint64
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
