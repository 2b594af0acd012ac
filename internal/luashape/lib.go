package luashape

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

func bi(name string, fn func(in *interp, args []value) ([]value, error)) *builtin {
	return &builtin{name: name, fn: fn}
}

func arg(args []value, i int) value {
	if i < len(args) {
		return args[i]
	}
	return nil
}

func one(v value) []value { return []value{v} }

// newGlobals builds the environment a script sees: KEYS, ARGV and the
// parts of Redis's Lua library that lock scripts use.
func newGlobals(keys, argv []value) map[string]value {
	kt, at := &table{}, &table{}
	kt.arr = append(kt.arr, keys...)
	at.arr = append(at.arr, argv...)
	call := func(protected bool) func(in *interp, args []value) ([]value, error) {
		return func(in *interp, args []value) ([]value, error) {
			v, err := in.redisCall(append([]value(nil), args...))
			var re *redisError
			if protected && errors.As(err, &re) {
				return one(errTable(re.msg)), nil
			}
			return one(v), err
		}
	}
	redis := &table{hash: map[any]value{
		"call":  bi("call", call(false)),
		"pcall": bi("pcall", call(true)),
		"status_reply": bi("status_reply", func(in *interp, args []value) ([]value, error) {
			return one(okStatus(luaString(arg(args, 0)))), nil
		}),
		"error_reply": bi("error_reply", func(in *interp, args []value) ([]value, error) {
			return one(errTable(luaString(arg(args, 0)))), nil
		}),
		"log":                bi("log", func(*interp, []value) ([]value, error) { return nil, nil }),
		"replicate_commands": bi("replicate_commands", func(*interp, []value) ([]value, error) { return one(true), nil }),
		"set_repl":           bi("set_repl", func(*interp, []value) ([]value, error) { return nil, nil }),
		"LOG_DEBUG":          0.0, "LOG_VERBOSE": 1.0, "LOG_NOTICE": 2.0, "LOG_WARNING": 3.0,
		"REPL_ALL": 3.0, "REPL_AOF": 1.0, "REPL_SLAVE": 2.0, "REPL_REPLICA": 2.0, "REPL_NONE": 0.0,
	}}
	unpack := bi("unpack", func(in *interp, args []value) ([]value, error) {
		t, ok := arg(args, 0).(*table)
		if !ok {
			return nil, in.errf("bad argument #1 to 'unpack' (table expected, got %s)", typeName(arg(args, 0)))
		}
		return append([]value(nil), t.arr...), nil
	})
	str := &table{hash: map[any]value{
		"sub": bi("sub", func(in *interp, args []value) ([]value, error) {
			to := arg(args, 2)
			if to == nil {
				to = -1.0
			}
			v, err := in.substr(arg(args, 0), arg(args, 1), to, false)
			return one(v), err
		}),
		"len": bi("len", func(in *interp, args []value) ([]value, error) {
			switch s := in.resolve(arg(args, 0)).(type) {
			case string:
				return one(float64(len(s))), nil
			case float64:
				return one(float64(len(fmtNum(s)))), nil
			case *sym:
				return one(&sym{e: opaque("len", s.e), num: true}), nil
			}
			return nil, in.errf("bad argument #1 to 'len' (string expected, got %s)", typeName(arg(args, 0)))
		}),
		"upper":  bi("upper", caseFn(strings.ToUpper)),
		"lower":  bi("lower", caseFn(strings.ToLower)),
		"format": bi("format", format),
	}}
	tbl := &table{hash: map[any]value{
		"insert": bi("insert", func(in *interp, args []value) ([]value, error) {
			t, ok := arg(args, 0).(*table)
			if !ok {
				return nil, in.errf("bad argument #1 to 'insert' (table expected, got %s)", typeName(arg(args, 0)))
			}
			switch len(args) {
			case 2:
				t.arr = append(t.arr, args[1])
			case 3:
				p, ok := toNumber(in.resolve(args[1]))
				if !ok || p < 1 || p > float64(len(t.arr)+1) || p != math.Trunc(p) {
					return nil, in.errf("bad argument #2 to 'insert' (position out of bounds)")
				}
				i := int(p) - 1
				t.arr = append(t.arr, nil)
				copy(t.arr[i+1:], t.arr[i:])
				t.arr[i] = args[2]
			default:
				return nil, in.errf("wrong number of arguments to 'insert'")
			}
			return nil, nil
		}),
		"unpack": unpack,
		"getn": bi("getn", func(in *interp, args []value) ([]value, error) {
			t, ok := arg(args, 0).(*table)
			if !ok {
				return nil, in.errf("bad argument #1 to 'getn' (table expected, got %s)", typeName(arg(args, 0)))
			}
			return one(float64(len(t.arr))), nil
		}),
	}}
	mth := &table{hash: map[any]value{
		"floor": bi("floor", mathFn(math.Floor)),
		"ceil":  bi("ceil", mathFn(math.Ceil)),
		"abs":   bi("abs", mathFn(math.Abs)),
		"huge":  math.Inf(1),
	}}
	return map[string]value{
		"KEYS": kt, "ARGV": at, "redis": redis, "string": str, "table": tbl, "math": mth,
		"unpack": unpack,
		"tonumber": bi("tonumber", func(in *interp, args []value) ([]value, error) {
			if len(args) > 1 && args[1] != nil && args[1] != 10.0 {
				return nil, in.refuse("tonumber with a base")
			}
			switch v := in.resolve(arg(args, 0)).(type) {
			case float64:
				return one(v), nil
			case string:
				if f, ok := str2number(v); ok {
					return one(f), nil
				}
			case *sym:
				return one(&sym{e: v.e, num: true}), nil
			}
			return one(nil), nil
		}),
		"tostring": bi("tostring", func(in *interp, args []value) ([]value, error) {
			switch v := in.resolve(arg(args, 0)).(type) {
			case *sym:
				return one(&sym{e: v.e}), nil
			default:
				return one(luaString(v)), nil
			}
		}),
		"type": bi("type", func(in *interp, args []value) ([]value, error) {
			return one(typeName(arg(args, 0))), nil
		}),
		"ipairs": bi("ipairs", func(in *interp, args []value) ([]value, error) {
			t, ok := arg(args, 0).(*table)
			if !ok {
				return nil, in.errf("bad argument #1 to 'ipairs' (table expected, got %s)", typeName(arg(args, 0)))
			}
			return one(&iterator{t: t}), nil
		}),
		"pairs": bi("pairs", func(in *interp, args []value) ([]value, error) {
			t, ok := arg(args, 0).(*table)
			if !ok {
				return nil, in.errf("bad argument #1 to 'pairs' (table expected, got %s)", typeName(arg(args, 0)))
			}
			return one(&iterator{t: t, pairs: true}), nil
		}),
		"error": bi("error", func(in *interp, args []value) ([]value, error) {
			if t, ok := arg(args, 0).(*table); ok {
				if m, ok := t.get("err").(string); ok {
					return nil, &redisError{m}
				}
			}
			return nil, in.errf("%s", luaString(arg(args, 0)))
		}),
	}
}

func caseFn(f func(string) string) func(in *interp, args []value) ([]value, error) {
	return func(in *interp, args []value) ([]value, error) {
		switch s := in.resolve(arg(args, 0)).(type) {
		case string:
			return one(f(s)), nil
		case float64:
			return one(fmtNum(s)), nil
		case *sym:
			return one(&sym{e: opaque("case", s.e)}), nil
		}
		return nil, in.errf("bad argument #1 (string expected, got %s)", typeName(arg(args, 0)))
	}
}

func mathFn(f func(float64) float64) func(in *interp, args []value) ([]value, error) {
	return func(in *interp, args []value) ([]value, error) {
		v := in.resolve(arg(args, 0))
		if s, ok := v.(*sym); ok {
			return one(&sym{e: opaque("math", s.e), num: true}), nil
		}
		n, ok := toNumber(v)
		if !ok {
			return nil, in.errf("bad argument #1 (number expected, got %s)", typeName(v))
		}
		return one(f(n)), nil
	}
}

// luaString is tostring for concrete values.
func luaString(v value) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case bool:
		if v {
			return "true"
		}
		return "false"
	case float64:
		return fmtNum(v)
	case string:
		return v
	case *sym:
		return v.e.key
	}
	return typeName(v)
}

// format is Lua 5.1's string.format, as Redis runs it: %s, %d and %i,
// %c, %o, %u, %x and %X, %e, %E, %f, %g and %G with C's flags, width and
// precision (at most five flags and two digits each, as Lua checks), and
// %%, byte for byte as C's printf writes them. A symbolic argument makes
// a symbolic string: %s of one is the argument itself (what a release
// publishes is built so), any other directive an opaque function of it.
// %q and a NaN are refused (no lock script formats either); a bad
// directive or argument fails as in Lua.
func format(in *interp, args []value) ([]value, error) {
	if len(args) == 0 {
		return nil, in.errf("bad argument #1 to 'format' (string expected, got no value)")
	}
	var f string
	switch v := in.resolve(args[0]).(type) {
	case string:
		f = v
	case float64:
		f = fmtNum(v)
	case *sym:
		return nil, in.refuse("string.format with a format that is not a constant")
	default:
		return nil, in.errf("bad argument #1 to 'format' (string expected, got %s)", typeName(v))
	}
	var out value = ""
	var lit strings.Builder
	next := 1
	put := func(v value) error {
		if lit.Len() > 0 {
			o, err := in.concat(out, lit.String())
			if err != nil {
				return err
			}
			out = o
			lit.Reset()
		}
		if v == nil {
			return nil
		}
		o, err := in.concat(out, v)
		out = o
		return err
	}
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			lit.WriteByte(f[i])
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			lit.WriteByte('%')
			continue
		}
		d, n, err := scanFormat(in, f[i:])
		if err != nil {
			return nil, err
		}
		i += n
		if d.conv == 'q' {
			return nil, in.refuse("string.format's %%q")
		}
		if strings.IndexByte("sdicouxXeEfgG", d.conv) < 0 {
			return nil, in.errf("invalid option '%%%c' to 'format'", d.conv)
		}
		argn := next
		next++
		if argn >= len(args) {
			return nil, in.errf("bad argument #%d to 'format' (no value)", argn+1)
		}
		piece, err := d.format(in, in.resolve(args[argn]), argn+1)
		if err != nil {
			return nil, err
		}
		if err := put(piece); err != nil {
			return nil, err
		}
	}
	if err := put(nil); err != nil {
		return nil, err
	}
	return one(out), nil
}

// directive is one conversion of a format: its flags, width and
// precision (-1: none) and its conversion character.
type directive struct {
	flags       string
	width, prec int
	conv        byte
}

// scanFormat reads the directive at the start of f (after its '%') as
// Lua 5.1's scanformat does, and how many bytes it took less one.
func scanFormat(in *interp, f string) (directive, int, error) {
	d := directive{prec: -1}
	p := 0
	for p < len(f) && strings.IndexByte("-+ #0", f[p]) >= 0 {
		p++
	}
	if p >= 6 {
		return d, 0, in.errf("invalid format (repeated flags)")
	}
	d.flags = f[:p]
	digits := func() (int, bool) {
		n, k := 0, 0
		for p < len(f) && f[p] >= '0' && f[p] <= '9' && k < 2 {
			n = n*10 + int(f[p]-'0')
			p++
			k++
		}
		return n, k > 0
	}
	d.width, _ = digits()
	if p < len(f) && f[p] == '.' {
		p++
		d.prec, _ = digits()
	}
	if p < len(f) && f[p] >= '0' && f[p] <= '9' {
		return d, 0, in.errf("invalid format (width or precision too long)")
	}
	if p >= len(f) {
		return d, 0, in.errf("invalid option '%%' to 'format'")
	}
	d.conv = f[p]
	return d, p, nil
}

func (d directive) has(flag byte) bool { return strings.IndexByte(d.flags, flag) >= 0 }

// pad fills s to the directive's width with spaces, as C does for
// strings, characters, infinities.
func (d directive) pad(s string) string {
	if len(s) >= d.width {
		return s
	}
	if d.has('-') {
		return s + strings.Repeat(" ", d.width-len(s))
	}
	return strings.Repeat(" ", d.width-len(s)) + s
}

// spec is the directive for Go's fmt with flags kept.
func (d directive) spec(flags string, conv byte) string {
	var b strings.Builder
	b.WriteByte('%')
	b.WriteString(flags)
	if d.width > 0 {
		b.WriteString(strconv.Itoa(d.width))
	}
	if d.prec >= 0 {
		b.WriteByte('.')
		b.WriteString(strconv.Itoa(d.prec))
	}
	b.WriteByte(conv)
	return b.String()
}

// format formats one argument (the argn-th of string.format).
func (d directive) format(in *interp, v value, argn int) (value, error) {
	if s, ok := v.(*sym); ok {
		if d.conv == 's' && d.flags == "" && d.width == 0 && d.prec < 0 {
			return &sym{e: s.e}, nil
		}
		return &sym{e: opaque("format%"+d.flags+strconv.Itoa(d.width)+"."+strconv.Itoa(d.prec)+string(d.conv), s.e)}, nil
	}
	if d.conv == 's' {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case float64:
			s = fmtNum(x)
		default:
			return nil, in.errf("bad argument #%d to 'format' (string expected, got %s)", argn, typeName(v))
		}
		if d.prec < 0 && len(s) >= 100 {
			return s, nil // Lua keeps a long string whole
		}
		// C's sprintf: up to a NUL, precision and width in bytes.
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		if d.prec >= 0 && len(s) > d.prec {
			s = s[:d.prec]
		}
		return d.pad(s), nil
	}
	x, ok := toNumber(v)
	if !ok {
		return nil, in.errf("bad argument #%d to 'format' (number expected, got %s)", argn, typeName(v))
	}
	switch d.conv {
	case 'c':
		// Lua appends up to the first NUL of what sprintf wrote.
		s := d.pad(string([]byte{byte(int64(x))}))
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return s, nil
	case 'd', 'i':
		return fmt.Sprintf(d.spec(d.flags, 'd'), int64(x)), nil
	case 'o', 'u', 'x', 'X':
		u := uint64(int64(x))
		if x >= 1<<63 {
			u = uint64(x)
		}
		// C ignores the sign flags on unsigned conversions, and # on 0.
		flags := strings.Map(func(r rune) rune {
			if r == '+' || r == ' ' || r == '#' && u == 0 {
				return -1
			}
			return r
		}, d.flags)
		conv := d.conv
		if conv == 'u' {
			conv = 'd'
		}
		return fmt.Sprintf(d.spec(flags, conv), u), nil
	}
	if math.IsNaN(x) {
		return nil, in.refuse("string.format of a NaN")
	}
	if math.IsInf(x, 0) {
		s := "inf"
		if d.conv == 'E' || d.conv == 'G' {
			s = "INF"
		}
		switch {
		case x < 0:
			s = "-" + s
		case d.has('+'):
			s = "+" + s
		case d.has(' '):
			s = " " + s
		}
		return d.pad(s), nil
	}
	if d.prec < 0 {
		d.prec = 6 // C's default; Go's %g would use the shortest
	}
	return fmt.Sprintf(d.spec(d.flags, d.conv), x), nil
}
