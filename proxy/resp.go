package proxy

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// Reply values. A handler returns any of these, or a Go value that maps onto
// one: nil is the null reply, string and []byte are bulk strings, integers
// are integers, slices are arrays.

// SimpleString is a RESP simple string, such as +OK.
type SimpleString string

// Late is a reply computed when it is written rather than when its
// handler returns: a grant's validity counts down, and a pipelined
// command's reply may wait for the replies of the commands before it. It
// runs on the connection's goroutine; a handler returns it with a nil
// error.
type Late func() any

// value computes the reply; a panic becomes an internal error, as in a
// handler.
func (l Late) value(s *Server) (v any) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in a reply", "panic", r, "stack", string(debug.Stack()))
			v = Errorf("internal error")
		}
	}()
	return l()
}

// OK is the +OK reply.
const OK = SimpleString("OK")

// Map is an ordered map: a RESP3 map, or a flat array of key, value, ...
// in RESP2, as Redis does.
type Map []KV

// KV is one entry of a Map.
type KV struct {
	Key   string
	Value any
}

// Error is a RESP error reply: -CODE message. It is also a Go error, so a
// handler may return it as its error.
type Error struct {
	Code string
	Msg  string
}

// Error implements error.
func (e *Error) Error() string { return e.Code + " " + e.Msg }

// Errorf returns an *Error with code ERR.
func Errorf(format string, args ...any) *Error {
	return &Error{Code: "ERR", Msg: fmt.Sprintf(format, args...)}
}

// appendReply encodes v for a connection speaking protocol proto (2 or 3).
func appendReply(b []byte, v any, proto int) []byte {
	switch v := v.(type) {
	case noReply:
		return b
	case Expires:
		return appendReply(b, v.Value, proto)
	case Push:
		if proto == 3 {
			b = appendInt(b, '>', int64(len(v)))
		} else {
			b = appendInt(b, '*', int64(len(v)))
		}
		for _, e := range v {
			b = appendReply(b, e, proto)
		}
		return b
	case nil:
		if proto == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case SimpleString:
		return appendLine(append(b, '+'), string(v))
	case *Error:
		return appendLine(append(append(append(b, '-'), v.Code...), ' '), v.Msg)
	case string:
		return appendBulk(b, v)
	case []byte:
		return appendBulk(b, string(v))
	case int:
		return appendInt(b, ':', int64(v))
	case int64:
		return appendInt(b, ':', v)
	case uint64:
		b = append(b, ':')
		b = strconv.AppendUint(b, v, 10)
		return append(b, '\r', '\n')
	case bool:
		if proto == 3 {
			if v {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		if v {
			return append(b, ":1\r\n"...)
		}
		return append(b, ":0\r\n"...)
	case []any:
		b = appendInt(b, '*', int64(len(v)))
		for _, e := range v {
			b = appendReply(b, e, proto)
		}
		return b
	case []string:
		b = appendInt(b, '*', int64(len(v)))
		for _, e := range v {
			b = appendBulk(b, e)
		}
		return b
	case []int64:
		b = appendInt(b, '*', int64(len(v)))
		for _, e := range v {
			b = appendInt(b, ':', e)
		}
		return b
	case Map:
		if proto == 3 {
			b = appendInt(b, '%', int64(len(v)))
		} else {
			b = appendInt(b, '*', int64(2*len(v)))
		}
		for _, kv := range v {
			b = appendBulk(b, kv.Key)
			b = appendReply(b, kv.Value, proto)
		}
		return b
	default:
		return appendReply(b, Errorf("internal error: cannot encode %T", v), proto)
	}
}

func appendInt(b []byte, prefix byte, n int64) []byte {
	b = append(b, prefix)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = appendInt(b, '$', int64(len(s)))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendLine writes a simple-string or error line; CR and LF would break
// the framing, so they become spaces.
func appendLine(b []byte, s string) []byte {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	b = append(b, s...)
	return append(b, '\r', '\n')
}
