package luashape

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	luaparse "github.com/yuin/gopher-lua/parse"
)

// token is one lexeme, as gopher-lua's scanner splits the source.
type token struct {
	typ      int    // gopher-lua's token type: luaparse.TIdent, luaparse.TString, '(', ...
	text     string // the token as the source spells it
	val      string // a string literal's value
	from, to int    // byte range in the source
	line     int
	// sameLine: a '(' right after a ')' on the same line. gopher-lua may
	// refuse a call whose '(' starts a line as ambiguous, so the feed keeps
	// it on the line of the ')'.
	sameLine bool
}

// tokens is a lexed script.
type tokens struct {
	list    []token
	eofLine int   // the line the source ends on
	nls     []int // offsets of the source's '\n'
	prevEnd int   // while scanning: where the last token ended
}

// lineAt is the line of a byte offset, counting '\n' as the messages
// always have.
func (ts *tokens) lineAt(off int) int { return 1 + sort.SearchInts(ts.nls, off) }

// lex splits src into tokens with gopher-lua's scanner, which drops
// whitespace and comments. String literals are decoded here, from the
// source, with the escapes Redis scripts have always been read with (see
// unquote); numbers are checked.
func lex(src string) (*tokens, error) {
	ts := &tokens{}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			ts.nls = append(ts.nls, i)
		}
	}
	ts.eofLine = 1 + len(ts.nls)
	// Lua skips \f and \v as whitespace; gopher-lua's scanner refuses
	// them. Blanking them keeps every offset.
	b := []byte(src)
	for i, c := range b {
		if c == '\f' || c == '\v' {
			b[i] = ' '
		}
	}
	// The scanner gives positions as line and column, its lines ending at
	// \n, \r, \r\n or \n\r: starts maps them back to offsets.
	starts := []int{0, 0}
	for i := 0; i < len(b); {
		c := b[i]
		i++
		if c == '\n' || c == '\r' {
			if i < len(b) && b[i] != c && (b[i] == '\n' || b[i] == '\r') {
				i++
			}
			starts = append(starts, i)
		}
	}
	offset := func(p ast.Position, first bool) int {
		if p.Line < 1 || p.Line >= len(starts) {
			return len(src)
		}
		o := starts[p.Line] + p.Column
		if first {
			o--
		}
		return min(max(o, 0), len(src))
	}
	for fixes := 0; ; fixes++ {
		err := ts.scan(src, b, offset)
		var pe *luaparse.Error
		switch {
		case err == nil:
			return ts, nil
		case !errors.As(err, &pe):
			return nil, err
		}
		// gopher-lua takes --[= not followed by a long bracket for an
		// unfinished long comment; Lua, for a line comment.
		_, at := skipComments(src, ts.prevEnd)
		if pe.Message != "invalid multiline comment" || at < 0 || fixes == 100 {
			return nil, ts.lexError(src, pe)
		}
		b[at] = ' '
	}
}

// scan splits b, the source as the scanner reads it, into ts.list; an
// error of the scanner is returned as it is.
func (ts *tokens) scan(src string, b []byte, offset func(ast.Position, bool) int) error {
	ts.list, ts.prevEnd = ts.list[:0], 0
	sc := luaparse.NewScanner(bytes.NewReader(b), "")
	lx := &luaparse.Lexer{}
	for {
		t, err := sc.Scan(lx)
		if err != nil {
			return err
		}
		if t.Type < 0 { // EOF
			return nil
		}
		from, to := offset(t.Pos, true), offset(sc.Pos, false)
		if to <= from {
			return fmt.Errorf("line %d: %s: token positions", ts.lineAt(from), internalError)
		}
		tk := token{typ: t.Type, text: src[from:to], from: from, to: to, line: ts.lineAt(from)}
		if t.Type != luaparse.TString && t.Type != luaparse.TNumber && t.Str != "" && t.Str != tk.text {
			return fmt.Errorf("line %d: %s: token %q read as %q", tk.line, internalError, t.Str, tk.text)
		}
		switch t.Type {
		case luaparse.TString:
			if tk.val, err = decodeString(tk.text); err != nil {
				return fmt.Errorf("line %d: %v", tk.line, err)
			}
		case luaparse.TNumber:
			// gopher-lua's scanner ends some numerals elsewhere than Lua.
			if end := numeral(src, from); end != to || !isNumber(tk.text) {
				return fmt.Errorf("line %d: malformed number near '%s'", tk.line, src[from:end])
			}
		case '(':
			tk.sameLine = lx.PrevTokenType == ')' && !lx.PNewLine
		}
		ts.list = append(ts.list, tk)
		lx.PrevTokenType = t.Type
		ts.prevEnd = to
	}
}

// lexError words an error of the scanner. The token it failed on (or the
// unfinished comment) starts after the previous token's end, past
// whitespace and complete comments.
func (ts *tokens) lexError(src string, pe *luaparse.Error) error {
	start, _ := skipComments(src, ts.prevEnd)
	line := ts.lineAt(start)
	switch pe.Message {
	case "unterminated string":
		// Lua reads escapes in order: a bad one before the line's end is
		// the error.
		if _, _, err := unquote(src[start:]); err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
		return fmt.Errorf("line %d: unfinished string", line)
	case "unterminated multiline string":
		return fmt.Errorf("line %d: unfinished long string", line)
	case "invalid multiline string": // [= not followed by [
		end := start + 1
		for end < len(src) && src[end] == '=' {
			end++
		}
		return fmt.Errorf("line %d: invalid long string delimiter near '%s'", line, src[start:end])
	case "invalid multiline comment":
		return fmt.Errorf("line %d: unfinished long comment", line)
	case "illegal hexadecimal number":
		return fmt.Errorf("line %d: malformed number near '%s'", line, src[start:numeral(src, start)])
	case "Invalid token", "Invalid '~' token":
		if pe.Token != "" {
			return fmt.Errorf("line %d: unexpected character %q", line, pe.Token[0])
		}
	}
	return fmt.Errorf("line %d: %s", line, pe.Message)
}

// skipComments skips the whitespace and complete comments at src[i:]: it
// returns where the next token, or an unfinished long comment, starts,
// and the offset of the '[' of the first comment that starts --[= without
// being a long comment (or -1).
func skipComments(src string, i int) (end, falseLong int) {
	falseLong = -1
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(src[i:], "--"):
			if lvl, ok := longOpen(src[i+2:]); ok {
				_, n, err := longBody(src[i+2:], lvl)
				if err != nil {
					return i, falseLong
				}
				i += 2 + n
				continue
			}
			if falseLong < 0 && strings.HasPrefix(src[i:], "--[=") {
				falseLong = i + 2
			}
			for i < len(src) && src[i] != '\n' && src[i] != '\r' {
				i++
			}
		default:
			return i, falseLong
		}
	}
	return i, falseLong
}

func isAlpha(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// numeral returns where the numeral at src[i:] ends as Lua 5.1 reads it:
// digits and dots, an exponent's sign, then any letters, digits and '_'.
func numeral(src string, i int) int {
	for i < len(src) && (isDigit(src[i]) || src[i] == '.') {
		i++
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
	}
	for i < len(src) && (isAlpha(src[i]) || isDigit(src[i])) {
		i++
	}
	return i
}

func isNumber(s string) bool {
	_, err := number(s)
	return err == nil
}

// number converts a numeric literal as Lua 5.1 reads it.
func number(s string) (float64, error) {
	if len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		return float64(v), err
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseFloat(s, 64)
}

// decodeString returns the value of a string literal, quoted or long.
func decodeString(raw string) (string, error) {
	if lvl, ok := longOpen(raw); ok {
		body, n, err := longBody(raw, lvl)
		if err != nil || n != len(raw) {
			return "", errors.New("unfinished long string")
		}
		return body, nil
	}
	s, n, err := unquote(raw)
	if err == nil && n != len(raw) {
		err = errors.New("unfinished string")
	}
	return s, err
}

// longOpen reports whether s starts a long bracket [[ or [==[, and its level.
func longOpen(s string) (int, bool) {
	if len(s) < 2 || s[0] != '[' {
		return 0, false
	}
	j := 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j - 1, true
	}
	return 0, false
}

// longBody returns the body of the long bracket at the start of s and the
// bytes it spans. A first newline right after the opening is dropped, as Lua does.
func longBody(s string, lvl int) (string, int, error) {
	open := lvl + 2
	closer := "]" + strings.Repeat("=", lvl) + "]"
	end := strings.Index(s[open:], closer)
	if end < 0 {
		return "", 0, fmt.Errorf("unfinished long bracket")
	}
	body := s[open : open+end]
	if strings.HasPrefix(body, "\r\n") {
		body = body[2:]
	} else if strings.HasPrefix(body, "\n") {
		body = body[1:]
	}
	return body, open + end + len(closer), nil
}

// unquote decodes the '...' or "..." string at the start of s. gopher-lua's
// scanner finds where the literal ends, but decodes \x, \z, unknown
// escapes and decimal escapes over 255 otherwise than the recogniser
// always has, so the value is decoded here.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	i := 1
	for {
		if i >= len(s) || s[i] == '\n' {
			return "", 0, fmt.Errorf("unfinished string")
		}
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		i++
		if i >= len(s) {
			return "", 0, fmt.Errorf("unfinished string")
		}
		e := s[i]
		i++
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '\\', '"', '\'', '\n':
			b.WriteByte(e)
		case 'x':
			if i+2 > len(s) {
				return "", 0, fmt.Errorf("invalid escape sequence")
			}
			v, err := strconv.ParseUint(s[i:i+2], 16, 8)
			if err != nil {
				return "", 0, fmt.Errorf("invalid escape sequence")
			}
			b.WriteByte(byte(v))
			i += 2
		case 'z':
			for i < len(s) && strings.IndexByte(" \t\r\n\f\v", s[i]) >= 0 {
				i++
			}
		default:
			if !isDigit(e) {
				return "", 0, fmt.Errorf("invalid escape sequence '\\%c'", e)
			}
			j := i - 1
			for i < len(s) && i-j < 3 && isDigit(s[i]) {
				i++
			}
			v, _ := strconv.Atoi(s[j:i])
			if v > 255 {
				return "", 0, fmt.Errorf("escape sequence too large")
			}
			b.WriteByte(byte(v))
		}
	}
}
