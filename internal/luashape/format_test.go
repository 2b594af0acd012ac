package luashape

import (
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
