package luashape

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestFormatAsRedis: string.format, run by the interpreter on concrete
// arguments, answers what Redis's own Lua answers (or fails where it
// fails), directive by directive.
func TestFormatAsRedis(t *testing.T) {
	srv := redistest.Start(t)
	rc := dialRESP(t, srv.Addr)
	tests := []struct {
		call string
		argv []string
	}{
		{`string.format('{ "key": "%s", "value": "%s" }', KEYS[1], ARGV[1])`, []string{"0.123"}},
		{`string.format('%s:%s', ARGV[1], 12)`, []string{"tok"}},
		{`string.format('%s', 1.5)`, nil},
		{`string.format('%s', 1e15)`, nil},
		{`string.format('%d', ARGV[1])`, []string{"42"}},
		{`string.format('%d', 3.9)`, nil},
		{`string.format('%i|%5d|%-5d|%05d|%+d', 7, 8, 9, 10, 11)`, nil},
		{`string.format('%x %X %o %#x', 255, 255, 8, 255)`, nil},
		{`string.format('%c%c', 72, 105)`, nil},
		{`string.format('%f %.2f %e %g %g %g', 1.5, 2.345, 12345.678, 100000, 1234567, 0.1 + 0.2)`, nil},
		{`string.format('%10s|%-10s|%.2s', 'ab', 'cd', 'efgh')`, nil},
		{`string.format('100%%')`, nil},
		{`string.format('%s')`, nil},
		{`string.format('%s', nil)`, nil},
		{`string.format('%d', 'x')`, nil},
		{`string.format('%y', 1)`, nil},
		{`string.format(12)`, nil},
		{`string.format()`, nil},
		{`string.format('%d')`, nil},
		{`string.format('%-+ #0d', 5)`, nil},
		{`string.format('%-+ #00d', 5)`, nil},
		{`string.format('%99d|%.99f', 5, 1)`, nil},
		{`string.format('%100d', 5)`, nil},
		{`string.format('%5.100f', 5)`, nil},
		{`string.format('%+x|% o|%+u|%#x|%#o|%#X', 255, 8, 7, 0, 0, 255)`, nil},
		{`string.format('%x|%u|%o', -1, -2, -8)`, nil},
		{`string.format('%x', 2^63 + 4096)`, nil},
		{`string.format('[%5c][%-3c]', 65, 66)`, nil},
		{`string.format('[%c]', 0)`, nil},
		{`string.format('[%.2s][%5s][%05s][%-4s]', ARGV[1], 'ab', 'cd', 'e')`, []string{"h\xc3\xa9llo"}},
		{`string.format('[%s][%.3s]', ARGV[1], ARGV[1])`, []string{"ab\x00cd"}},
		{`string.format('[%s][%5s]', ARGV[1], ARGV[1])`, []string{strings.Repeat("x\x00", 60)}},
		{`string.format('%08.3d|%.0d|%5.3d', 7, 0, -4)`, nil},
		{`string.format('%f|%5f|%-6f|%+f|% f|%E|%G', 1/0, 1/0, -1/0, 1/0, 1/0, 1/0, -1/0)`, nil},
		{`string.format('%.3e|%10.2f|%-10.1g|%#g|%G', 123456.789, -3.14159, 0.0001234, 2, 1e-10)`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.call, func(t *testing.T) {
			src := "return " + tc.call
			args := append([]string{"EVAL", src, "1", "lk"}, tc.argv...)
			want := rc.do(t, args...)
			c, err := parse(src)
			if err != nil {
				t.Fatal(err)
			}
			var argv []value
			for _, a := range tc.argv {
				argv = append(argv, a)
			}
			in := &interp{c: c, m: &model{}, globals: newGlobals([]value{"lk"}, argv)}
			v, err := in.run()
			var got any = v
			if err != nil {
				got = scriptErr(err)
			}
			if fmtReply(got) != fmtReply(want) {
				t.Errorf("interpreter: %s, Redis: %s", fmtReply(got), fmtReply(want))
			}
		})
	}
}
