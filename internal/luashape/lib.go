package luashape

import (
	"errors"
	"fmt"
	"math"
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
// precision, and %%. A symbolic argument makes a symbolic string: %s of
// one is the argument itself (what a release publishes is built so), any
// other directive an opaque function of it. %q is refused (no lock
// script needs it); a bad directive or argument fails as in Lua.
func format(in *interp, args []value) ([]value, error) {
	f, ok := in.resolve(arg(args, 0)).(string)
	if !ok {
		if _, isSym := in.resolve(arg(args, 0)).(*sym); isSym {
			return nil, in.refuse("string.format with a format that is not a constant")
		}
		if n, isNum := arg(args, 0).(float64); isNum {
			f = fmtNum(n)
		} else {
			return nil, in.errf("bad argument #1 to 'format' (string expected, got %s)", typeName(arg(args, 0)))
		}
	}
	var out value = ""
	var lit strings.Builder
	next := 1
	put := func(v value) error {
		if lit.Len() > 0 {
			s := lit.String()
			lit.Reset()
			o, err := in.concat(out, s)
			if err != nil {
				return err
			}
			out = o
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
		j := i
		for j < len(f) && strings.IndexByte("-+ #0", f[j]) >= 0 {
			j++
		}
		for j < len(f) && f[j] >= '0' && f[j] <= '9' {
			j++
		}
		if j < len(f) && f[j] == '.' {
			j++
			for j < len(f) && f[j] >= '0' && f[j] <= '9' {
				j++
			}
		}
		if j >= len(f) {
			return nil, in.errf("invalid option '%%' to 'format'")
		}
		spec, conv := f[i:j], f[j]
		i = j
		if conv == 'q' {
			return nil, in.refuse("string.format's %%q")
		}
		if strings.IndexByte("sdicouxXeEfgG", conv) < 0 {
			return nil, in.errf("invalid option '%%%c' to 'format'", conv)
		}
		n := next
		next++
		if n >= len(args) {
			return nil, in.errf("bad argument #%d to 'format' (no value)", n+1)
		}
		piece, err := formatOne(in, spec, conv, in.resolve(args[n]), n+1)
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

// formatOne formats one argument (the argn-th) of string.format by the
// directive %<spec><conv>.
func formatOne(in *interp, spec string, conv byte, v value, argn int) (value, error) {
	if s, ok := v.(*sym); ok {
		if conv == 's' && spec == "" {
			return &sym{e: s.e}, nil
		}
		return &sym{e: opaque("format%"+spec+string(conv), s.e)}, nil
	}
	if conv == 's' {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case float64:
			s = fmtNum(x)
		default:
			return nil, in.errf("bad argument #%d to 'format' (string expected, got %s)", argn, typeName(v))
		}
		return fmt.Sprintf("%"+spec+"s", s), nil
	}
	x, ok := toNumber(v)
	if !ok {
		return nil, in.errf("bad argument #%d to 'format' (number expected, got %s)", argn, typeName(v))
	}
	switch conv {
	case 'd', 'i':
		return fmt.Sprintf("%"+spec+"d", int64(x)), nil
	case 'u':
		return fmt.Sprintf("%"+spec+"d", uint64(int64(x))), nil
	case 'c':
		return string([]byte{byte(int64(x))}), nil
	case 'o', 'x', 'X':
		return fmt.Sprintf("%"+spec+string(conv), uint64(int64(x))), nil
	}
	if !strings.Contains(spec, ".") {
		spec += ".6" // C's default precision; Go's %g would use the shortest
	}
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return fmtNum(x), nil
	}
	return fmt.Sprintf("%"+spec+string(conv), x), nil
}
