package luashape

import (
	"fmt"
	"strconv"
	"strings"
)

// tokKind is a token's class.
type tokKind int

const (
	tEOF tokKind = iota
	tName
	tKeyword
	tNumber
	tString
	tOp
)

// token is one lexeme; pos is its byte offset in the source, line its line.
type token struct {
	kind tokKind
	text string  // name, keyword, operator, or the decoded string
	num  float64 // for tNumber
	pos  int     // byte offset of its start
	end  int     // byte offset just past it
	line int
}

var keywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true,
	"false": true, "for": true, "function": true, "goto": true, "if": true, "in": true,
	"local": true, "nil": true, "not": true, "or": true, "repeat": true, "return": true,
	"then": true, "true": true, "until": true, "while": true,
}

// lex splits src into tokens, dropping whitespace and comments.
func lex(src string) ([]token, error) {
	var toks []token
	line := 1
	i := 0
	for i < len(src) {
		if n := len(toks); n > 0 && toks[n-1].end == 0 {
			toks[n-1].end = i
		}
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			i += 2
			if lvl, ok := longOpen(src[i:]); ok {
				body, n, err := longBody(src[i:], lvl)
				if err != nil {
					return nil, fmt.Errorf("line %d: unfinished long comment", line)
				}
				_ = body
				line += strings.Count(src[i:i+n], "\n")
				i += n
				continue
			}
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		start := i
		switch {
		case isAlpha(c):
			for i < len(src) && (isAlpha(src[i]) || isDigit(src[i])) {
				i++
			}
			w := src[start:i]
			k := tName
			if keywords[w] {
				k = tKeyword
			}
			toks = append(toks, token{kind: k, text: w, pos: start, line: line})
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			n, l, err := lexNumber(src[i:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			i += l
			toks = append(toks, token{kind: tNumber, num: n, text: src[start:i], pos: start, line: line})
		case c == '"' || c == '\'':
			s, l, err := lexQuoted(src[i:])
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", line, err)
			}
			i += l
			toks = append(toks, token{kind: tString, text: s, pos: start, line: line})
		case c == '[':
			if lvl, ok := longOpen(src[i:]); ok {
				body, n, err := longBody(src[i:], lvl)
				if err != nil {
					return nil, fmt.Errorf("line %d: unfinished long string", line)
				}
				toks = append(toks, token{kind: tString, text: body, pos: start, line: line})
				line += strings.Count(src[i:i+n], "\n")
				i += n
				continue
			}
			i++
			toks = append(toks, token{kind: tOp, text: "[", pos: start, line: line})
		default:
			op := ""
			for _, o := range []string{"...", "..", "==", "~=", "<=", ">=", "::"} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("+-*/%^#<>=(){}];:,.", rune(c)) {
					return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
				}
				op = string(c)
			}
			i += len(op)
			toks = append(toks, token{kind: tOp, text: op, pos: start, line: line})
		}
	}
	if n := len(toks); n > 0 && toks[n-1].end == 0 {
		toks[n-1].end = i
	}
	toks = append(toks, token{kind: tEOF, pos: len(src), end: len(src), line: line})
	return toks, nil
}

func isAlpha(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

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

func lexNumber(s string) (float64, int, error) {
	i := 0
	if len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		i = 2
		for i < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i]) >= 0 {
			i++
		}
		v, err := strconv.ParseUint(s[2:i], 16, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed number near '%s'", s[:i])
		}
		return float64(v), i, nil
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && isAlpha(s[i]) {
		return 0, 0, fmt.Errorf("malformed number near '%s'", s[:i+1])
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed number near '%s'", s[:i])
	}
	return v, i, nil
}

// lexQuoted decodes the '...' or "..." string at the start of s.
func lexQuoted(s string) (string, int, error) {
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
