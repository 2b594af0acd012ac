package luashape

import (
	"strings"
	"testing"
)

// TestSyntaxErrors: gopher-lua's parser finds the error; parse words it as
// Lua does, with the line of the token it stopped at.
func TestSyntaxErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"if x then", "line 1: 'end' expected near <eof>"},
		{"if x then\n  y = 1\n\n", "line 4: 'end' expected near <eof>"},
		{"if x y", "line 1: 'then' expected near 'y'"},
		{"while x\ny()", "line 2: 'do' expected near 'y'"},
		{"f(a, b", "line 1: ')' expected near <eof>"},
		{"local t = {1, 2\nreturn t", "line 2: '}' expected near 'return'"},
		{"for i = 1 do end", "line 1: ',' expected near 'do'"},
		{"repeat x = 1", "line 1: 'until' expected near <eof>"},
		{"if x then y end", "line 1: '=' expected near 'end'"},
		{"x = = 1", "line 1: unexpected symbol near '='"},
		{"return {1, , 2}", "line 1: unexpected symbol near ','"},
		{"return {1,\n;}", "line 2: unexpected symbol near ';'"},
		{"f(x))", "line 1: unexpected symbol near ')'"},
		{"return 1\nx = 2", "line 2: 'end' expected near 'x'"},
		{"if a then return 1 x() end", "line 1: 'end' expected near 'x'"},
		{"while true do break x = 1 end", "line 1: 'end' expected near 'x'"},
		{"(f())", "line 1: syntax error near <eof>"},
		{"(f())\nx = 1", "line 2: syntax error near 'x'"},
		{"end", "line 1: 'end' unexpected"},
		{"return 1 end", "line 1: 'end' unexpected"},
		{"if x then return", "line 1: 'end' expected near <eof>"},
		{"return :x", "line 1: unexpected symbol near ':'"},
		{"repeat x() end", "line 1: 'until' expected near 'end'"},
		{"for i = 1, n", "line 1: 'do' expected near <eof>"},
		{"for i = s value", "line 1: ',' expected near 'value'"},
		{"for i", "line 1: '=' or 'in' expected near <eof>"},
		{"while i < n", "line 1: 'do' expected near <eof>"},
		{"return {0,", "line 1: unexpected symbol near <eof>"},
		{"return {KEYS", "line 1: '}' expected near <eof>"},
		{"lock, fence,", "line 1: unexpected symbol near <eof>"},
		{"local", "line 1: <name> expected near <eof>"},
		{"local x, , y", "line 1: <name> expected near ','"},
		{"redis.", "line 1: <name> expected near <eof>"},
		{"local function f(a,", "line 1: <name> expected near <eof>"},
		{"local function (a)", "line 1: <name> expected near '('"},
		{"function f return 1 end", "line 1: '(' expected near 'return'"},
		{"x = a:b c", "line 1: '(' expected near 'c'"},
		{"x, f() = 1", "line 1: syntax error near '='"},
		{"(x) = 1", "line 1: syntax error near '='"},
		{"f('a'), x = 1", "line 1: unexpected symbol near ','"},
		{"x;;", "line 1: '=' expected near ';'"},
		{"local x <const> = 1", "line 1: unexpected symbol near '<'"},
		{"goto done", "line 1: goto is not supported"},
		{"x = 1\n::done::", "line 2: labels are not supported"},
		{"return 'a\nb'", "line 1: unfinished string"},
		{"return [[a", "line 1: unfinished long string"},
		{"x = 1\n--[==[ a ]] b", "line 2: unfinished long comment"},
		{"return '\\q'", "line 1: invalid escape sequence '\\q'"},
		{"return '\\300'", "line 1: escape sequence too large"},
		{"x = 3y", "line 1: malformed number near '3y'"},
		{"x = 0x", "line 1: malformed number near '0x'"},
		{"x = 0xg1", "line 1: malformed number near '0xg1'"},
		{"x = 90ms", "line 1: malformed number near '90ms'"},
		{"x = 3..2", "line 1: malformed number near '3..2'"},
		{"x = 0x1if", "line 1: malformed number near '0x1if'"},
		{"x = 1e y", "line 1: malformed number near '1e'"},
		{"return 'a\\300\nb'", "line 1: escape sequence too large"},
		{"return [=x", "line 1: invalid long string delimiter near '[='"},
		{"x = 1 ~ 2", "line 1: unexpected character '~'"},
		{"x = 1 @", "line 1: unexpected character '@'"},
		{strings.Repeat(" ", maxSource+1), "script longer than 65536 bytes"},
	}
	for _, tt := range tests {
		_, err := parse(tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("parse(%.40q): %v, want %s", tt.src, err, tt.want)
		}
	}
}

// TestNesting: nesting of blocks and operands is bounded; chains written
// flat (a + b + c, a.b.c, f()()) are not nesting.
func TestNesting(t *testing.T) {
	deep := map[string]string{
		"blocks":   strings.Repeat("do ", 101) + strings.Repeat("end ", 101),
		"unary":    "return " + strings.Repeat("- ", 101) + "1",
		"tables":   "return " + strings.Repeat("{", 101) + strings.Repeat("}", 101),
		"calls":    "return " + strings.Repeat("f(", 101) + strings.Repeat(")", 101),
		"concat":   "return 'a'" + strings.Repeat(" .. 'a'", 101),
		"function": "local function f() " + strings.Repeat("do ", 100) + strings.Repeat("end ", 100) + " end",
	}
	for name, src := range deep {
		if _, err := parse(src); err == nil || !strings.Contains(err.Error(), "nesting deeper than 100") {
			t.Errorf("%s: %v", name, err)
		}
	}
	flat := map[string]string{
		"sum":     "return 1" + strings.Repeat(" + 1", 5000),
		"fields":  "return t" + strings.Repeat(".a", 5000),
		"calls":   "return f" + strings.Repeat("()", 5000),
		"elseifs": "if a then" + strings.Repeat(" elseif a then", 2000) + " end",
		"parens":  "return " + strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200),
	}
	for name, src := range flat {
		if _, err := parse(src); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPositions: statements are quoted from the source, and errors carry
// the line of the operator or call that raised them, wherever the parser
// put the node.
func TestPositions(t *testing.T) {
	src := "local a = 1; if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) ; redis.call('del', KEYS[1] .. ':fence') ; return 1 end return 0"
	_, err := Recognise([]byte(src))
	if want := "line 1: redis.call('del', KEYS[1] .. ':fence'): touches a key that is not one of KEYS"; err == nil || err.Error() != want {
		t.Errorf("Recognise: %v, want %s", err, want)
	}
	src = "local v = redis.call('get',\n  KEYS[1])\nif v == ARGV[1] then\n  redis.call('hset',\n    KEYS[1], 'x', 'y')\nend\nreturn 1"
	_, err = Recognise([]byte(src))
	if want := "line 4: redis.call('hset', KEYS[1], 'x', 'y'): calls HSET, which is not a lock operation"; err == nil || err.Error() != want {
		t.Errorf("Recognise: %v, want %s", err, want)
	}
	tests := []struct{ src, want string }{
		{"local x = 1 +\n\n  ARGV[3]\nreturn x", "ERR user_script:1: attempt to perform arithmetic on field '?' (a nil value)"},
		{"local x = 1\nlocal y = (x\n  ..\n  nil)\nreturn y", "ERR user_script:3: attempt to concatenate a nil value"},
		{"return -\n{}", "ERR user_script:1: attempt to perform arithmetic on a table value"},
		{"local t = {}\nreturn string.len\n(t)", "ERR user_script:3: bad argument #1 to 'len' (string expected, got table)"},
		{"local s = {}\nreturn s\n:upper(1)", "ERR user_script:3: attempt to call a nil value"},
		{"local x\nreturn (x) + 1", "ERR user_script:2: attempt to perform arithmetic on a nil value"},
		{"local x\nreturn x + 1", "ERR user_script:2: attempt to perform arithmetic on local 'x' (a nil value)"},
	}
	for _, tt := range tests {
		_, err := evalLua(t, tt.src)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: %v, want %s", tt.src, err, tt.want)
		}
	}
}

// TestParentheses: parentheses, which gopher-lua's tree drops, still cut
// a call's results to one.
func TestParentheses(t *testing.T) {
	tests := []struct {
		src  string
		want any
	}{
		{"return #{unpack({1, 2, 3})}", int64(3)},
		{"return #{(unpack({1, 2, 3}))}", int64(1)},
		{"return #{((unpack({1, 2, 3})))}", int64(1)},
		{"local a, b = (unpack({1, 2})) return b", nil},
		{"return ('a')", "a"},
		{"return (('a') .. 'b')", "ab"},
		{"return ((1 + 2) * 3)", int64(9)},
		{"return (-(2)) ^ 2", int64(4)},
		{"return #(ARGV)", int64(2)},
	}
	for _, tt := range tests {
		got, err := evalLua(t, tt.src, "x", "y")
		if err != nil || valueKeyAny(got) != valueKeyAny(tt.want) {
			t.Errorf("%q: %v %v, want %v", tt.src, got, err, tt.want)
		}
	}
}

// TestGlobalsUse: how the script indexes KEYS and ARGV.
func TestGlobalsUse(t *testing.T) {
	tests := []struct {
		src              string
		keys, argv       int
		dynKeys, dynArgv bool
	}{
		{"return KEYS[2] .. ARGV[3]", 2, 3, false, false},
		{"return KEYS[1], KEYS[i], ARGV[1.5], ARGV[65]", 1, 0, true, true},
		{"return #KEYS, ARGV['1']", 0, 0, true, true},
		{"return (KEYS)[1], ARGV[(2)]", 0, 0, true, true},
		{"for _, k in ipairs(KEYS) do end return KEYS:x()", 0, 0, true, false},
		{"local function f() return KEYS[3], ARGV end", 3, 0, false, true},
		{"local t = {KEYS = 1, x = ARGV[-1]} return t.KEYS", 0, 0, false, true},
	}
	for _, tt := range tests {
		c, err := parse(tt.src)
		if err != nil {
			t.Errorf("%q: %v", tt.src, err)
			continue
		}
		if c.keys != tt.keys || c.argv != tt.argv || c.dynK != tt.dynKeys || c.dynA != tt.dynArgv {
			t.Errorf("%q: keys %d argv %d whole %v %v, want %d %d %v %v", tt.src, c.keys, c.argv, c.dynK, c.dynA, tt.keys, tt.argv, tt.dynKeys, tt.dynArgv)
		}
	}
}

// TestWhitespace: what gopher-lua's scanner does not take for whitespace,
// and line ends of every kind.
func TestWhitespace(t *testing.T) {
	for _, src := range []string{"\freturn\v1", "return\r1", "return\r\n1", "--c\rreturn 1", "local x = 1\n\rreturn x"} {
		got, err := evalLua(t, src)
		if err != nil || got != int64(1) {
			t.Errorf("%q: %v %v", src, got, err)
		}
	}
	// A '(' on the line after a call is a call, as on the same line.
	for _, src := range []string{"return string.upper('b')('c')", "return string.upper('b')\n('c')"} {
		if _, err := evalLua(t, src); err == nil || !strings.Contains(err.Error(), "attempt to call a string value") {
			t.Errorf("%q: %v", src, err)
		}
	}
}
