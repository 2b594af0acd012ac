package luashape

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// value is a Lua value: nil, bool, float64, string, *table, *builtin, or
// *sym (a value the recogniser knows only symbolically).
type value = any

type table struct {
	arr  []value
	hash map[any]value
}

type builtin struct {
	name string
	fn   func(in *interp, args []value) ([]value, error)
}

// iterator is what ipairs and pairs return; the generic for runs it.
type iterator struct {
	t     *table
	pairs bool
}

func (t *table) hkey(k value) any {
	if s, ok := k.(*sym); ok {
		return "\x00sym:" + s.e.key
	}
	return k
}

func (t *table) get(k value) value {
	if f, ok := k.(float64); ok && f == math.Trunc(f) && f >= 1 && f <= float64(len(t.arr)) {
		return t.arr[int(f)-1]
	}
	if t.hash == nil {
		return nil
	}
	return t.hash[t.hkey(k)]
}

func (t *table) set(k, v value) error {
	switch kk := k.(type) {
	case nil:
		return errors.New("table index is nil")
	case float64:
		if math.IsNaN(kk) {
			return errors.New("table index is NaN")
		}
		if kk == math.Trunc(kk) && kk >= 1 && kk <= float64(len(t.arr)) {
			i := int(kk) - 1
			t.arr[i] = v
			if v == nil && i == len(t.arr)-1 {
				for len(t.arr) > 0 && t.arr[len(t.arr)-1] == nil {
					t.arr = t.arr[:len(t.arr)-1]
				}
			}
			return nil
		}
		if kk == float64(len(t.arr)+1) && v != nil {
			t.arr = append(t.arr, v)
			for t.hash != nil { // migrate following keys
				n := float64(len(t.arr) + 1)
				nv, ok := t.hash[n]
				if !ok {
					break
				}
				delete(t.hash, n)
				t.arr = append(t.arr, nv)
			}
			return nil
		}
	}
	if t.hash == nil {
		t.hash = map[any]value{}
	}
	if v == nil {
		delete(t.hash, t.hkey(k))
	} else {
		t.hash[t.hkey(k)] = v
	}
	return nil
}

// Errors a run can end with.
type (
	// luaError is a Lua runtime error (Redis replies it as a script error).
	luaError struct {
		line int
		msg  string
	}
	// redisError is an error reply of redis.call, raised to the script.
	redisError struct{ msg string }
	// refusal: the script does something no lock shape allows.
	refusal struct{ msg string }
	// errStep: the run went over its step budget.
	errSteps struct{}
)

func (e *luaError) Error() string   { return fmt.Sprintf("user_script:%d: %s", e.line, e.msg) }
func (e *redisError) Error() string { return e.msg }
func (e *refusal) Error() string    { return e.msg }
func (errSteps) Error() string      { return "the script runs too long" }

var errBreak = errors.New("break")

// Bounds on one run: statements and expressions evaluated, and the
// length of a string built by concatenation.
const (
	maxSteps  = 20000
	maxString = 1 << 20
)

// assumption is a branch the symbolic run took on something it could not
// decide: cond (a canonical comparison) was taken as holds.
type assumption struct {
	op    string // "==" (l == r) or "<=" (d <= 0)
	d     *sx
	l, r  *sx
	holds bool
}

// interp runs one path of a chunk, against a model of one Redis.
type interp struct {
	c        *chunk
	m        *model
	symbolic bool
	steps    int
	scopes   []map[string]value
	globals  map[string]value
	line     int
	cur      stmt

	// Choice points of a symbolic run: the decisions to replay, and the
	// number of options at each point met.
	choices  []int
	branches []int
	pos      int
	assume   []assumption
	bind     map[string]float64 // atoms concretised by a loop bound
}

// choose returns the option to take at a choice point with n options.
func (in *interp) choose(n int) int {
	if in.pos < len(in.choices) {
		c := in.choices[in.pos]
		in.branches = append(in.branches, n)
		in.pos++
		return c
	}
	in.choices = append(in.choices, 0)
	in.branches = append(in.branches, n)
	in.pos++
	return 0
}

func (in *interp) errf(format string, a ...any) error {
	return &luaError{line: in.line, msg: fmt.Sprintf(format, a...)}
}

func (in *interp) refuse(format string, a ...any) error {
	where := ""
	if in.cur != nil {
		where = in.c.describe(in.cur) + ": "
	}
	return &refusal{msg: where + fmt.Sprintf(format, a...)}
}

func (in *interp) step() error {
	in.steps++
	if in.steps > maxSteps {
		return errSteps{}
	}
	return nil
}

// run executes the chunk and returns the script's first return value.
func (in *interp) run() (value, error) {
	in.scopes = []map[string]value{{}}
	rets, _, err := in.block(in.c.body, true)
	if err == errBreak {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if len(rets) == 0 {
		return nil, nil
	}
	return rets[0], nil
}

func (in *interp) lookup(name string) (value, error) {
	for i := len(in.scopes) - 1; i >= 0; i-- {
		if v, ok := in.scopes[i][name]; ok {
			return v, nil
		}
	}
	if v, ok := in.globals[name]; ok {
		return v, nil
	}
	return nil, in.errf("Script attempted to access nonexistent global variable '%s'", name)
}

func (in *interp) assign(name string, v value) error {
	for i := len(in.scopes) - 1; i >= 0; i-- {
		if _, ok := in.scopes[i][name]; ok {
			in.scopes[i][name] = v
			return nil
		}
	}
	return in.errf("Attempt to modify a readonly table")
}

// block runs statements in a new scope. It returns the values of a
// return statement and whether one ran.
func (in *interp) block(body []stmt, newScope bool) ([]value, bool, error) {
	if newScope {
		in.scopes = append(in.scopes, map[string]value{})
		defer func() { in.scopes = in.scopes[:len(in.scopes)-1] }()
	}
	for _, s := range body {
		if err := in.step(); err != nil {
			return nil, false, err
		}
		outer := in.cur
		in.cur = s
		in.line = s.at().line
		rets, done, err := in.exec(s)
		in.cur = outer
		if err != nil || done {
			if err == nil && outer == nil {
				in.cur = s // remember where the script ended
			}
			return rets, done, err
		}
	}
	return nil, false, nil
}

func (in *interp) exec(s stmt) ([]value, bool, error) {
	switch s := s.(type) {
	case *localStmt:
		vals, err := in.evalList(s.exprs, len(s.names))
		if err != nil {
			return nil, false, err
		}
		top := in.scopes[len(in.scopes)-1]
		for i, n := range s.names {
			top[n] = vals[i]
		}
	case *assignStmt:
		vals, err := in.evalList(s.exprs, len(s.targets))
		if err != nil {
			return nil, false, err
		}
		for i, t := range s.targets {
			switch t := t.(type) {
			case *nameExpr:
				if err := in.assign(t.name, vals[i]); err != nil {
					return nil, false, err
				}
			case *indexExpr:
				obj, err := in.eval1(t.obj)
				if err != nil {
					return nil, false, err
				}
				k, err := in.eval1(t.key)
				if err != nil {
					return nil, false, err
				}
				tb, ok := obj.(*table)
				if !ok || tb == in.globals["KEYS"] || tb == in.globals["ARGV"] || in.isLib(tb) {
					if !ok {
						return nil, false, in.errf("attempt to index a %s value", typeName(obj))
					}
					return nil, false, in.errf("Attempt to modify a readonly table")
				}
				if err := tb.set(in.resolve(k), vals[i]); err != nil {
					return nil, false, in.errf("%v", err)
				}
			}
		}
	case *callStmt:
		_, err := in.call(s.call)
		return nil, false, err
	case *ifStmt:
		for i, c := range s.conds {
			v, err := in.eval1(c)
			if err != nil {
				return nil, false, err
			}
			if truthy(v) {
				return in.block(s.blocks[i], true)
			}
		}
		if s.els != nil {
			return in.block(s.els, true)
		}
	case *whileStmt:
		for {
			v, err := in.eval1(s.cond)
			if err != nil {
				return nil, false, err
			}
			if !truthy(v) {
				return nil, false, nil
			}
			rets, done, err := in.block(s.body, true)
			if err == errBreak {
				return nil, false, nil
			}
			if err != nil || done {
				return rets, done, err
			}
		}
	case *repeatStmt:
		for {
			in.scopes = append(in.scopes, map[string]value{})
			rets, done, err := in.block(s.body, false)
			if err == nil && !done {
				var v value
				v, err = in.eval1(s.cond)
				if err == nil && truthy(v) {
					in.scopes = in.scopes[:len(in.scopes)-1]
					return nil, false, nil
				}
			}
			in.scopes = in.scopes[:len(in.scopes)-1]
			if err == errBreak {
				return nil, false, nil
			}
			if err != nil || done {
				return rets, done, err
			}
		}
	case *numForStmt:
		return in.numFor(s)
	case *genForStmt:
		return in.genFor(s)
	case *doStmt:
		return in.block(s.body, true)
	case *returnStmt:
		vals, err := in.evalMulti(s.exprs)
		return vals, true, err
	case *breakStmt:
		return nil, false, errBreak
	case *funcStmt:
		return nil, false, in.refuse("function definitions are not supported")
	}
	return nil, false, nil
}

func (in *interp) isLib(t *table) bool {
	for _, n := range []string{"redis", "string", "table", "math"} {
		if in.globals[n] == t {
			return true
		}
	}
	return false
}

func (in *interp) numFor(s *numForStmt) ([]value, bool, error) {
	var nums [3]float64
	exprs := []expr{s.start, s.end, s.step}
	for i, e := range exprs {
		if e == nil {
			nums[i] = 1
			continue
		}
		v, err := in.eval1(e)
		if err != nil {
			return nil, false, err
		}
		v = in.resolve(v)
		if sv, ok := v.(*sym); ok && i == 1 && in.symbolic {
			// A bound that depends on the arguments: run the loop for a
			// few concrete counts, binding the argument accordingly.
			n := in.choose(3)
			val := nums[0] + float64(n)*nums[2]
			if err := in.bindTo(sv.e, val); err != nil {
				return nil, false, err
			}
			nums[i] = val
			continue
		}
		f, ok := toNumber(v)
		if !ok {
			return nil, false, in.errf("'for' %s must be a number", []string{"initial value", "limit", "step"}[i])
		}
		nums[i] = f
	}
	if nums[2] == 0 {
		return nil, false, in.errf("'for' step is zero")
	}
	for x := nums[0]; (nums[2] > 0 && x <= nums[1]) || (nums[2] < 0 && x >= nums[1]); x += nums[2] {
		if err := in.step(); err != nil {
			return nil, false, err
		}
		in.scopes = append(in.scopes, map[string]value{s.name: x})
		rets, done, err := in.block(s.body, false)
		in.scopes = in.scopes[:len(in.scopes)-1]
		if err == errBreak {
			break
		}
		if err != nil || done {
			return rets, done, err
		}
	}
	return nil, false, nil
}

// bindTo concretises the single atom of e so that e == val.
func (in *interp) bindTo(e *sx, val float64) error {
	t, cf, c := linTerms(e)
	if len(cf) != 1 {
		return in.refuse("a loop bound it cannot follow")
	}
	for k, v := range cf {
		if t[k].op != "ARGV" || v == 0 {
			return in.refuse("a loop bound it cannot follow")
		}
		if in.bind == nil {
			in.bind = map[string]float64{}
		}
		in.bind[k] = (val - c) / v
	}
	return nil
}

func (in *interp) genFor(s *genForStmt) ([]value, bool, error) {
	vals, err := in.evalList(s.exprs, 1)
	if err != nil {
		return nil, false, err
	}
	it, ok := vals[0].(*iterator)
	if !ok {
		return nil, false, in.refuse("a 'for ... in' loop over something other than ipairs/pairs")
	}
	var ks []value
	for i := range it.t.arr {
		ks = append(ks, float64(i+1))
	}
	if it.pairs {
		var hk []any
		for k := range it.t.hash {
			hk = append(hk, k)
		}
		sort.Slice(hk, func(a, b int) bool { return fmt.Sprint(hk[a]) < fmt.Sprint(hk[b]) })
		ks = append(ks, hk...)
	}
	for _, k := range ks {
		if err := in.step(); err != nil {
			return nil, false, err
		}
		v := it.t.get(k)
		if !it.pairs && v == nil {
			break
		}
		if it.pairs {
			if v == nil {
				v = it.t.hash[k]
			}
		}
		sc := map[string]value{}
		for i, n := range s.names {
			switch i {
			case 0:
				sc[n] = k
			case 1:
				sc[n] = v
			default:
				sc[n] = nil
			}
		}
		in.scopes = append(in.scopes, sc)
		rets, done, err := in.block(s.body, false)
		in.scopes = in.scopes[:len(in.scopes)-1]
		if err == errBreak {
			break
		}
		if err != nil || done {
			return rets, done, err
		}
	}
	return nil, false, nil
}

// evalList evaluates expressions to at least n values (Lua's adjustment:
// only the last expression may expand to several).
func (in *interp) evalList(es []expr, n int) ([]value, error) {
	vals, err := in.evalMulti(es)
	if err != nil {
		return nil, err
	}
	for len(vals) < n {
		vals = append(vals, nil)
	}
	return vals, nil
}

func (in *interp) evalMulti(es []expr) ([]value, error) {
	var out []value
	for i, e := range es {
		if i == len(es)-1 {
			if c, ok := e.(*callExpr); ok {
				vs, err := in.call(c)
				if err != nil {
					return nil, err
				}
				return append(out, vs...), nil
			}
			if _, ok := e.(*varargExp); ok {
				return out, nil
			}
		}
		v, err := in.eval1(e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (in *interp) eval1(e expr) (value, error) {
	if err := in.step(); err != nil {
		return nil, err
	}
	switch e := e.(type) {
	case *nilExpr:
		return nil, nil
	case *boolExpr:
		return e.v, nil
	case *numExpr:
		return e.v, nil
	case *strExpr:
		return e.v, nil
	case *varargExp:
		return nil, nil
	case *funcExpr:
		return nil, in.refuse("function definitions are not supported")
	case *nameExpr:
		return in.lookup(e.name)
	case *parenExpr:
		return in.eval1(e.x)
	case *indexExpr:
		obj, err := in.eval1(e.obj)
		if err != nil {
			return nil, err
		}
		k, err := in.eval1(e.key)
		if err != nil {
			return nil, err
		}
		return in.index(obj, k)
	case *callExpr:
		vs, err := in.call(e)
		if err != nil || len(vs) == 0 {
			return nil, err
		}
		return vs[0], nil
	case *tableExpr:
		t := &table{}
		pos := 1.0
		for i, it := range e.items {
			if it.key == nil {
				if i == len(e.items)-1 {
					if _, ok := it.val.(*callExpr); ok {
						vs, err := in.evalMulti([]expr{it.val})
						if err != nil {
							return nil, err
						}
						for _, v := range vs {
							t.set(pos, v)
							pos++
						}
						continue
					}
				}
				v, err := in.eval1(it.val)
				if err != nil {
					return nil, err
				}
				t.set(pos, v)
				pos++
				continue
			}
			k, err := in.eval1(it.key)
			if err != nil {
				return nil, err
			}
			v, err := in.eval1(it.val)
			if err != nil {
				return nil, err
			}
			if k == nil {
				return nil, in.errf("table index is nil")
			}
			t.set(in.resolve(k), v)
		}
		return t, nil
	case *unExpr:
		in.line = e.line
		x, err := in.eval1(e.x)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(x), nil
		case "-":
			return in.arith("-", 0.0, x)
		case "#":
			x = in.resolve(x)
			switch x := x.(type) {
			case string:
				return float64(len(x)), nil
			case *table:
				return float64(len(x.arr)), nil
			case *sym:
				if x.num {
					return nil, in.errf("attempt to get length of a number value")
				}
				return &sym{e: opaque("len", x.e), num: true}, nil
			}
			return nil, in.errf("attempt to get length of a %s value", typeName(x))
		}
	case *binExpr:
		in.line = e.line
		switch e.op {
		case "and", "or":
			l, err := in.eval1(e.l)
			if err != nil {
				return nil, err
			}
			if truthy(l) == (e.op == "or") {
				return l, nil
			}
			return in.eval1(e.r)
		}
		l, err := in.eval1(e.l)
		if err != nil {
			return nil, err
		}
		r, err := in.eval1(e.r)
		if err != nil {
			return nil, err
		}
		in.line = e.line
		switch e.op {
		case "==":
			return in.equal(l, r)
		case "~=":
			eq, err := in.equal(l, r)
			return !eq, err
		case "<":
			return in.less(l, r, false)
		case "<=":
			return in.less(l, r, true)
		case ">":
			return in.less(r, l, false)
		case ">=":
			return in.less(r, l, true)
		case "..":
			v, err := in.concat(l, r)
			return v, in.varInfo(err, "concatenate", e, l, r)
		default:
			v, err := in.arith(e.op, l, r)
			return v, in.varInfo(err, "perform arithmetic on", e, l, r)
		}
	}
	return nil, in.errf("unsupported expression")
}

func (in *interp) index(obj, k value) (value, error) {
	switch o := obj.(type) {
	case *table:
		return o.get(in.resolve(k)), nil
	case string, *sym:
		if ks, ok := k.(string); ok {
			return in.globals["string"].(*table).get(ks), nil
		}
	}
	return nil, in.errf("attempt to index a %s value", typeName(obj))
}

func (in *interp) call(c *callExpr) ([]value, error) {
	fn, err := in.eval1(c.fn)
	if err != nil {
		return nil, err
	}
	var args []value
	if c.method != "" {
		args = append(args, fn)
		if fn, err = in.index(fn, c.method); err != nil {
			return nil, err
		}
	}
	rest, err := in.evalMulti(c.args)
	if err != nil {
		return nil, err
	}
	args = append(args, rest...)
	in.line = c.line
	b, ok := fn.(*builtin)
	if !ok {
		return nil, in.errf("attempt to call a %s value", typeName(fn))
	}
	return b.fn(in, args)
}

func truthy(v value) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	}
	return true
}

func typeName(v value) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case *table:
		return "table"
	case *builtin, *iterator:
		return "function"
	case *sym:
		if v.num {
			return "number"
		}
		return "string"
	}
	return "userdata"
}

// resolve substitutes concretised atoms into a symbolic value.
func (in *interp) resolve(v value) value {
	s, ok := v.(*sym)
	if !ok || len(in.bind) == 0 {
		return v
	}
	e, c := in.subst(s.e)
	if e == nil {
		if s.num {
			return c
		}
		return fmtNum(c)
	}
	return &sym{e: e, num: s.num}
}

func (in *interp) subst(e *sx) (*sx, float64) {
	switch e.op {
	case "lin":
		var acc *sx
		c := e.c
		for j, k := range e.kids {
			ke, kc := in.subst(k)
			c += kc * e.coef[j]
			acc, c = linAdd(acc, 1, ke, e.coef[j], c)
		}
		return acc, c
	case "concat":
		parts := make([]*sx, len(e.kids))
		for j, k := range e.kids {
			ke, kc := in.subst(k)
			if ke == nil {
				ke = strPart(fmtNum(kc))
			}
			parts[j] = ke
		}
		r := mkConcat(parts)
		return r, 0
	case "num":
		return nil, e.c
	case "str", "opaque", "prefix":
		return e, 0
	}
	if v, ok := in.bind[e.key]; ok {
		return nil, v
	}
	return e, 0
}

// toNumber converts as Lua's arithmetic does (strings are coerced).
func toNumber(v value) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		return str2number(v)
	}
	return 0, false
}

func str2number(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, false
	}
	neg := false
	u := t
	if u[0] == '-' || u[0] == '+' {
		neg = u[0] == '-'
		u = u[1:]
	}
	if len(u) > 2 && u[0] == '0' && (u[1] == 'x' || u[1] == 'X') {
		n, err := strconv.ParseUint(u[2:], 16, 64)
		if err != nil {
			return 0, false
		}
		if neg {
			return -float64(n), true
		}
		return float64(n), true
	}
	for _, c := range u {
		if !(c >= '0' && c <= '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// symOf returns v as a symbolic expression if it is one, or a numeric
// constant; ok is false for values that are neither.
func symNum(v value) (*sx, float64, bool) {
	switch v := v.(type) {
	case *sym:
		return v.e, 0, true
	}
	f, ok := toNumber(v)
	return nil, f, ok
}

func (in *interp) arith(op string, l, r value) (value, error) {
	l, r = in.resolve(l), in.resolve(r)
	le, lc, lok := symNum(l)
	re, rc, rok := symNum(r)
	if !lok || !rok {
		bad := l
		if lok {
			bad = r
		}
		return nil, in.errf("attempt to perform arithmetic on a %s value", typeName(bad))
	}
	if le == nil && re == nil {
		switch op {
		case "+":
			return lc + rc, nil
		case "-":
			return lc - rc, nil
		case "*":
			return lc * rc, nil
		case "/":
			return lc / rc, nil
		case "%":
			return lc - math.Floor(lc/rc)*rc, nil
		case "^":
			return math.Pow(lc, rc), nil
		}
	}
	var e *sx
	var c float64
	switch {
	case op == "+":
		e, c = linAdd(le, 1, re, 1, lc+rc)
	case op == "-":
		e, c = linAdd(le, 1, re, -1, lc-rc)
	case op == "*" && le == nil:
		e, c = linAdd(re, lc, nil, 0, rc*lc)
	case op == "*" && re == nil:
		e, c = linAdd(le, rc, nil, 0, lc*rc)
	default:
		e = opaque(op, numSx(le, lc), numSx(re, rc))
	}
	if e == nil {
		return c, nil
	}
	return &sym{e: e, num: true}, nil
}

func numSx(e *sx, c float64) *sx {
	if e != nil {
		return e
	}
	return numConst(c)
}

// strSx returns v as a string expression for concatenation.
func (in *interp) strSx(v value) (*sx, bool) {
	switch v := v.(type) {
	case string:
		return strPart(v), true
	case float64:
		return strPart(fmtNum(v)), true
	case *sym:
		return v.e, true
	}
	return nil, false
}

func (in *interp) concat(l, r value) (value, error) {
	l, r = in.resolve(l), in.resolve(r)
	ls, lok := in.strSx(l)
	rs, rok := in.strSx(r)
	if !lok || !rok {
		bad := l
		if lok {
			bad = r
		}
		return nil, in.errf("attempt to concatenate a %s value", typeName(bad))
	}
	if ls.op == "str" && rs.op == "str" && len(ls.s)+len(rs.s) > maxString {
		return nil, in.errf("not enough memory")
	}
	e := mkConcat([]*sx{ls, rs})
	if e.op == "str" {
		return e.s, nil
	}
	return &sym{e: e}, nil
}

// equal is Lua's ==; on symbolic values it decides what it can and
// branches on the rest.
func (in *interp) equal(l, r value) (bool, error) {
	l, r = in.resolve(l), in.resolve(r)
	ls, lsym := l.(*sym)
	rs, rsym := r.(*sym)
	if !lsym && !rsym {
		switch a := l.(type) {
		case *table:
			b, ok := r.(*table)
			return ok && a == b, nil
		}
		return l == r, nil
	}
	if typeName(l) != typeName(r) {
		return false, nil
	}
	var a, b *sx
	if lsym {
		a = ls.e
	} else {
		a, _ = in.strSx(l)
	}
	if rsym {
		b = rs.e
	} else {
		b, _ = in.strSx(r)
	}
	if typeName(l) == "number" {
		ae, ac, _ := symNum(l)
		be, bc, _ := symNum(r)
		d, dc := linAdd(ae, 1, be, -1, ac-bc)
		if d == nil {
			return dc == 0, nil
		}
		if lo, hi := linRange(d); lo+dc > 0 || hi+dc < 0 {
			return false, nil
		}
	}
	if a.key == b.key {
		return true, nil
	}
	// Values built from different arguments, or from another holder's
	// value, differ (the recogniser assumes distinct arguments; Run
	// computes with the real ones); another holder's value may equal a
	// constant.
	if ba, bb := base(a), base(b); ba != nil && bb != nil && ba.key != bb.key {
		return false, nil
	}
	ao, bo := a.has("OTHER"), b.has("OTHER")
	if ao != bo && !(a.op == "str" || b.op == "str") {
		return false, nil
	}
	if !in.symbolic {
		return false, in.errf("cannot compare symbolic values")
	}
	holds := in.choose(2) == 0
	in.assume = append(in.assume, assumption{op: "==", l: a, r: b, holds: holds})
	return holds, nil
}

// less is Lua's < (or <= when orEq).
func (in *interp) less(l, r value, orEq bool) (bool, error) {
	l, r = in.resolve(l), in.resolve(r)
	tl, tr := typeName(l), typeName(r)
	if tl != tr || (tl != "number" && tl != "string") {
		return false, in.errf("attempt to compare %s with %s", tl, tr)
	}
	_, lsym := l.(*sym)
	_, rsym := r.(*sym)
	if !lsym && !rsym {
		if tl == "string" {
			if orEq {
				return l.(string) <= r.(string), nil
			}
			return l.(string) < r.(string), nil
		}
		if orEq {
			return l.(float64) <= r.(float64), nil
		}
		return l.(float64) < r.(float64), nil
	}
	if tl == "string" {
		return false, in.refuse("compares strings by order")
	}
	le, lc, _ := symNum(l)
	re, rc, _ := symNum(r)
	d, dc := linAdd(le, 1, re, -1, lc-rc)
	if d == nil {
		if orEq {
			return dc <= 0, nil
		}
		return dc < 0, nil
	}
	lo, hi := linRange(d)
	lo, hi = lo+dc, hi+dc
	switch {
	case hi < 0 || (orEq && hi <= 0):
		return true, nil
	case lo > 0 || (!orEq && lo >= 0):
		return false, nil
	}
	if !in.symbolic {
		return false, in.errf("cannot compare symbolic values")
	}
	// Integers: d < 0 is d + 1 <= 0.
	if !orEq {
		d, _ = linAdd(d, 1, nil, 0, 1)
	}
	holds := in.choose(2) == 0
	in.assume = append(in.assume, assumption{op: "<=", d: d, holds: holds})
	return holds, nil
}

// base is the argument or holder's value a string expression starts with.
func base(e *sx) *sx {
	switch e.op {
	case "ARGV", "OTHER", "KEYS":
		return e
	case "prefix":
		return base(e.kids[0])
	case "concat":
		return base(e.kids[0])
	}
	return nil
}

// varInfo words an operand error as Lua 5.1 does when it can name the
// operand: "attempt to perform arithmetic on local 'x' (a nil value)".
func (in *interp) varInfo(err error, what string, e *binExpr, l, r value) error {
	var le *luaError
	if err == nil || !errors.As(err, &le) || !strings.HasPrefix(le.msg, "attempt to "+what+" a ") {
		return err
	}
	x, v := e.r, r
	if _, _, ok := symNum(l); (what != "concatenate" && !ok) || (what == "concatenate" && !isStringy(l)) {
		x, v = e.l, l
	}
	name := ""
	switch x := x.(type) {
	case *nameExpr:
		name = "global '" + x.name + "'"
		for i := len(in.scopes) - 1; i >= 0; i-- {
			if _, ok := in.scopes[i][x.name]; ok {
				name = "local '" + x.name + "'"
				break
			}
		}
	case *indexExpr:
		name = "field '?'"
		if k, ok := x.key.(*strExpr); ok {
			name = "field '" + k.v + "'"
		}
	}
	if name == "" {
		return err
	}
	return &luaError{line: le.line, msg: fmt.Sprintf("attempt to %s %s (a %s value)", what, name, typeName(v))}
}

func isStringy(v value) bool {
	switch v.(type) {
	case string, float64, *sym:
		return true
	}
	return false
}
