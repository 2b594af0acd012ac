package luashape

import (
	"strings"
	"testing"
)

// runConcrete runs src concretely with no keys touched and returns its reply.
func evalLua(t *testing.T, src string, argv ...string) (any, error) {
	t.Helper()
	c, err := parse(src)
	if err != nil {
		return nil, err
	}
	r := &runner{s: &Shape{c: c, Kind: Check}, argv: argv}
	ret, _, err := r.replay(func(int) start { return start{} })
	if err != nil {
		return nil, scriptErr(err)
	}
	return convert(ret, true)
}

func TestLexParse(t *testing.T) {
	tests := []struct {
		name, src string
		argv      []string
		want      any
		err       string
	}{
		{"double quotes and escapes", `return "a\"b\\c\65\x41\n"`, nil, "a\"b\\cAA\n", ""},
		{"single quotes", `return 'it''s'`, nil, nil, "'end' expected"},
		{"long string drops first newline", "return [[\nab]]", nil, "ab", ""},
		{"long string with level", "return [==[a]]b]==]", nil, "a]]b", ""},
		{"line comment", "-- c\nreturn 1 -- c", nil, int64(1), ""},
		{"long comment", "--[[ a\nb ]] return --[==[ ]] ]==] 2", nil, int64(2), ""},
		{"precedence", "return 2 + 3 * 4 ^ 2 / 8 - -1", nil, int64(9), ""},
		{"concat right assoc and numbers", "return 1 .. 2 .. 'x'", nil, "12x", ""},
		{"comparison chain", "return 1 < 2 and 'y' or 'n'", nil, "y", ""},
		{"not binds tighter than ==", "return not nil == true", nil, int64(1), ""},
		{"hex and exponent", "return 0x10 + 1e2", nil, int64(116), ""},
		{"table constructor and #", "local t = {1, 2, [3] = 3, x = 4; 5} return #t", nil, int64(3), ""},
		{"table reply stops at nil", "return {1, 'a', nil, 3}", nil, []any{int64(1), "a"}, ""},
		{"status and error tables", "return {ok='FINE'}", nil, Status("FINE"), ""},
		{"error reply", "return redis.error_reply('BUSY x')", nil, nil, "BUSY x"},
		{"numeric for and string.sub", "local s = '' for i = 1, 3 do s = s .. string.sub('abc', i, i) end return s", nil, "abc", ""},
		{"method call", "local s = 'hello' return s:sub(2, 3)", nil, "el", ""},
		{"ipairs over ARGV", "local n = 0 for _, v in ipairs(ARGV) do n = n + tonumber(v) end return n", []string{"2", "5"}, int64(7), ""},
		{"float truncates", "return 3.9", nil, int64(3), ""},
		{"true is 1, false nil", "return {true, false}", nil, []any{int64(1), nil}, ""},
		{"arith on nil", "return ARGV[3] + 1", nil, nil, "ERR user_script:1: attempt to perform arithmetic on field '?' (a nil value)"},
		{"unknown global", "return foo", nil, nil, "nonexistent global variable 'foo'"},
		{"while and break", "local i = 0 while true do i = i + 1 if i == 5 then break end end return i", nil, int64(5), ""},
		{"repeat", "local i = 0 repeat i = i + 2 until i >= 6 return i", nil, int64(6), ""},
		{"unfinished string", "return 'abc", nil, nil, "unfinished string"},
		{"unfinished long comment", "--[[ abc", nil, nil, "unfinished long comment"},
		{"syntax error", "if x then", nil, nil, "'end' expected"},
		{"function refused", "local function f() end return 1", nil, nil, "function definitions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evalLua(t, tt.src, tt.argv...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if valueKeyAny(got) != valueKeyAny(tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func valueKeyAny(v any) string {
	switch v := v.(type) {
	case []any:
		s := "["
		for _, x := range v {
			s += valueKeyAny(x) + ","
		}
		return s + "]"
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", "\\n"), "\t", " "))
}

func fmtAny(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case int64:
		return "int:" + fmtNum(float64(v))
	case string:
		return "bulk:" + v
	case Status:
		return "status:" + string(v)
	case ScriptError:
		return "error:" + string(v)
	}
	return "?"
}
