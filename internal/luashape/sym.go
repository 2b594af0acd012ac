package luashape

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// sx is a symbolic expression: what the recogniser knows about a value that
// depends on the client's arguments or on the state of Redis. Each sx is
// immutable and carries a canonical text, so that two expressions that
// compute the same thing the same way compare equal whatever the script's
// spelling (local names, operand order, tonumber/tostring wrappers).
type sx struct {
	op   string // atom: ARGV KEYS OTHER PTTL TTL ZCARD NOW SCORE; compound: lin concat prefix opaque
	i    int    // atom index (1-based)
	kids []*sx
	coef []float64 // lin: coefficient of each kid
	c    float64   // lin: constant term
	s    string    // str constant inside concat
	key  string    // canonical text
}

// sym is a symbolic Lua value: an expression and its Lua type.
type sym struct {
	e   *sx
	num bool // a Lua number (else a string)
}

// maxKey bounds a canonical text: a larger expression gets a text of its
// own, equal to no other (it is only compared, never decided, then).
const maxKey = 2048

func bounded(e *sx) *sx {
	if len(e.key) > maxKey {
		e.key = fmt.Sprintf("big@%p", e)
	}
	return e
}

func atom(op string, i int) *sx {
	return &sx{op: op, i: i, key: op + "[" + strconv.Itoa(i) + "]"}
}

func strPart(s string) *sx { return &sx{op: "str", s: s, key: strconv.Quote(s)} }

func numConst(c float64) *sx { return &sx{op: "num", c: c, key: "#" + fmtNum(c)} }

// atoms lists the atoms an expression is built from.
func (e *sx) atoms(out map[string]*sx) {
	switch e.op {
	case "lin", "concat", "prefix", "opaque":
		for _, k := range e.kids {
			k.atoms(out)
		}
	case "str", "num":
	default:
		out[e.key] = e
	}
}

// has reports whether e involves an atom of kind op.
func (e *sx) has(op string) bool {
	if e.op == op {
		return true
	}
	for _, k := range e.kids {
		if k.has(op) {
			return true
		}
	}
	return false
}

// linTerms returns e as sum(coef*term) + c.
func linTerms(e *sx) (map[string]*sx, map[string]float64, float64) {
	terms, coef := map[string]*sx{}, map[string]float64{}
	if e.op == "num" {
		return terms, coef, e.c
	}
	if e.op == "lin" {
		for j, k := range e.kids {
			terms[k.key] = k
			coef[k.key] += e.coef[j]
		}
		return terms, coef, e.c
	}
	terms[e.key] = e
	coef[e.key] = 1
	return terms, coef, 0
}

// mkLin builds the canonical linear form; it returns (nil, c) when no
// symbolic term remains.
func mkLin(terms map[string]*sx, coef map[string]float64, c float64) (*sx, float64) {
	var ks []string
	for k, v := range coef {
		if v != 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, c
	}
	sort.Strings(ks)
	if len(ks) == 1 && coef[ks[0]] == 1 && c == 0 {
		return terms[ks[0]], 0
	}
	e := &sx{op: "lin", c: c}
	var b strings.Builder
	b.WriteString("lin(")
	for _, k := range ks {
		e.kids = append(e.kids, terms[k])
		e.coef = append(e.coef, coef[k])
		b.WriteString(fmtNum(coef[k]) + "*" + k + "+")
	}
	b.WriteString(fmtNum(c) + ")")
	e.key = b.String()
	return bounded(e), 0
}

// linAdd returns a*ka + b*kb, either operand may be nil (zero).
func linAdd(a *sx, ka float64, b *sx, kb float64, c float64) (*sx, float64) {
	terms, coef := map[string]*sx{}, map[string]float64{}
	for _, x := range []struct {
		e *sx
		k float64
	}{{a, ka}, {b, kb}} {
		if x.e == nil {
			continue
		}
		t, cf, cc := linTerms(x.e)
		for key, v := range cf {
			terms[key] = t[key]
			coef[key] += v * x.k
		}
		c += cc * x.k
	}
	return mkLin(terms, coef, c)
}

func opaque(name string, kids ...*sx) *sx {
	e := &sx{op: "opaque", s: name, kids: kids}
	var b strings.Builder
	b.WriteString(name + "(")
	for _, k := range kids {
		b.WriteString(k.key + ",")
	}
	b.WriteString(")")
	e.key = b.String()
	return bounded(e)
}

// mkConcat joins parts (sx or constant strings), merging constants.
func mkConcat(parts []*sx) *sx {
	var flat []*sx
	for _, p := range parts {
		if p.op == "concat" {
			flat = append(flat, p.kids...)
		} else {
			flat = append(flat, p)
		}
	}
	if len(flat) > 256 { // keep growth linear: stop flattening
		return opaque("cat", parts...)
	}
	var out []*sx
	for _, p := range flat {
		if p.op == "str" && len(out) > 0 && out[len(out)-1].op == "str" {
			out[len(out)-1] = strPart(out[len(out)-1].s + p.s)
			continue
		}
		if p.op == "str" && p.s == "" {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 1 {
		return out[0]
	}
	e := &sx{op: "concat", kids: out}
	var b strings.Builder
	b.WriteString("cat(")
	for _, k := range out {
		b.WriteString(k.key + ",")
	}
	b.WriteString(")")
	e.key = b.String()
	return bounded(e)
}

// rng is an atom's known range of numeric values.
func rng(e *sx) (lo, hi float64) {
	switch e.op {
	case "PTTL", "TTL": // a held lock key always has an expiry left
		return 1, math.Inf(1)
	case "ZCARD":
		return 0, math.Inf(1)
	case "NOW":
		return 1, math.Inf(1)
	}
	return math.Inf(-1), math.Inf(1)
}

// linRange bounds e's value from its atoms' ranges.
func linRange(e *sx) (lo, hi float64) {
	t, cf, c := linTerms(e)
	lo, hi = c, c
	for k, v := range cf {
		alo, ahi := rng(t[k])
		if t[k].op == "lin" || t[k].op == "opaque" || t[k].op == "concat" || t[k].op == "prefix" {
			alo, ahi = math.Inf(-1), math.Inf(1)
		}
		if v > 0 {
			lo, hi = lo+v*alo, hi+v*ahi
		} else {
			lo, hi = lo+v*ahi, hi+v*alo
		}
	}
	if math.IsNaN(lo) {
		lo = math.Inf(-1)
	}
	if math.IsNaN(hi) {
		hi = math.Inf(1)
	}
	return lo, hi
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	if math.IsInf(v, 1) {
		return "inf"
	}
	if math.IsInf(v, -1) {
		return "-inf"
	}
	if math.IsNaN(v) {
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', 14, 64)
}
