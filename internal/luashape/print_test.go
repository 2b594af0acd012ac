package luashape

import (
	"fmt"
	"strconv"
	"strings"
)

// mutation says how printLua re-writes a parsed script: each option is a
// change that must not change what the script does.
type mutation struct {
	name     string
	oneLine  bool   // all on one line, single spaces
	indent   string // indentation unit (default two spaces)
	comments bool   // a line comment and a long comment around each statement
	rename   bool   // every local gets another name
	swapCall bool   // redis.call <-> redis.pcall
	flipCase bool   // command names change case
	swapCmp  bool   // a == b -> b == a, a < b -> b > a, ...
	wrapStr  bool   // ARGV[i] -> tostring(ARGV[i])
	wrapNum  []int  // ARGV[i] -> tonumber(ARGV[i]) for these (numeric) i
	quote    string // ' " or [[ for string literals
}

var mutations = []mutation{
	{name: "as written"},
	{name: "one line", oneLine: true},
	{name: "tabs and comments", indent: "\t", comments: true},
	{name: "renamed locals", rename: true},
	{name: "pcall for call", swapCall: true},
	{name: "command case", flipCase: true},
	{name: "swapped comparisons", swapCmp: true},
	{name: "tostring wrappers", wrapStr: true},
	{name: "tonumber wrappers"}, // wrapNum is filled from the case
	{name: "double quotes", quote: `"`},
	{name: "long brackets", quote: "[["},
	{name: "everything at once", oneLine: true, comments: true, rename: true, swapCall: true, flipCase: true, swapCmp: true, wrapStr: true, quote: "[["},
}

var globalNames = map[string]bool{"KEYS": true, "ARGV": true, "redis": true, "tonumber": true, "tostring": true,
	"string": true, "table": true, "math": true, "unpack": true, "ipairs": true, "pairs": true, "type": true, "error": true}

type printer struct {
	m     mutation
	b     strings.Builder
	depth int
	n     int
}

// printLua parses src and prints it back with the mutation applied.
func printLua(src string, m mutation) (string, error) {
	c, err := parse(src)
	if err != nil {
		return "", err
	}
	p := &printer{m: m}
	if p.m.indent == "" {
		p.m.indent = "  "
	}
	p.block(c.body)
	return p.b.String(), nil
}

func (p *printer) nl() {
	if p.m.oneLine {
		p.b.WriteString(" ")
		return
	}
	p.b.WriteString("\n" + strings.Repeat(p.m.indent, p.depth))
}

func (p *printer) name(n string) string {
	if p.m.rename && !globalNames[n] {
		return "zz_" + n + "_1"
	}
	return n
}

func (p *printer) block(body []stmt) {
	p.depth++
	for _, s := range body {
		p.nl()
		if p.m.comments {
			p.n++
			p.b.WriteString(fmt.Sprintf("--[==[ step %d\n ]] ]==]", p.n))
			p.stmt(s)
			p.b.WriteString(" -- done\n" + strings.Repeat(p.m.indent, p.depth))
			continue
		}
		p.stmt(s)
	}
	p.depth--
	p.nl()
}

func (p *printer) names(ns []string) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = p.name(n)
	}
	return strings.Join(out, ", ")
}

func (p *printer) stmt(s stmt) {
	switch s := s.(type) {
	case *localStmt:
		p.b.WriteString("local " + p.names(s.names))
		if len(s.exprs) > 0 {
			p.b.WriteString(" = " + p.exprs(s.exprs))
		}
	case *assignStmt:
		p.b.WriteString(p.exprs(s.targets) + " = " + p.exprs(s.exprs))
	case *callStmt:
		p.b.WriteString(p.expr(s.call))
	case *ifStmt:
		for i, c := range s.conds {
			if i == 0 {
				p.b.WriteString("if ")
			} else {
				p.b.WriteString("elseif ")
			}
			p.b.WriteString(p.expr(c) + " then")
			p.block(s.blocks[i])
		}
		if s.els != nil {
			p.b.WriteString("else")
			p.block(s.els)
		}
		p.b.WriteString("end")
	case *numForStmt:
		p.b.WriteString("for " + p.name(s.name) + " = " + p.expr(s.start) + ", " + p.expr(s.end))
		if s.step != nil {
			p.b.WriteString(", " + p.expr(s.step))
		}
		p.b.WriteString(" do")
		p.block(s.body)
		p.b.WriteString("end")
	case *genForStmt:
		p.b.WriteString("for " + p.names(s.names) + " in " + p.exprs(s.exprs) + " do")
		p.block(s.body)
		p.b.WriteString("end")
	case *whileStmt:
		p.b.WriteString("while " + p.expr(s.cond) + " do")
		p.block(s.body)
		p.b.WriteString("end")
	case *doStmt:
		p.b.WriteString("do")
		p.block(s.body)
		p.b.WriteString("end")
	case *returnStmt:
		p.b.WriteString("return " + p.exprs(s.exprs))
	case *breakStmt:
		p.b.WriteString("break")
	default:
		panic(fmt.Sprintf("printer: %T", s))
	}
}

func (p *printer) exprs(es []expr) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = p.expr(e)
	}
	return strings.Join(out, ", ")
}

func (p *printer) str(s string) string {
	switch p.m.quote {
	case "[[":
		if !strings.Contains(s, "]") && !strings.HasPrefix(s, "\n") && !strings.ContainsAny(s, "\r") {
			return "[[" + s + "]]"
		}
	case `"`:
		return strconv.Quote(s)
	}
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + strings.ReplaceAll(q, "'", `\'`) + "'"
}

var swapped = map[string]string{"==": "==", "~=": "~=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}

func (p *printer) expr(e expr) string {
	switch e := e.(type) {
	case *nilExpr:
		return "nil"
	case *boolExpr:
		return strconv.FormatBool(e.v)
	case *numExpr:
		return fmtNum(e.v)
	case *strExpr:
		return p.str(e.v)
	case *nameExpr:
		return p.name(e.name)
	case *parenExpr:
		return "(" + p.expr(e.x) + ")"
	case *indexExpr:
		if o, ok := e.obj.(*nameExpr); ok {
			if k, ok := e.key.(*strExpr); ok && globalNames[o.name] {
				return o.name + "." + k.v
			}
			if k, ok := e.key.(*numExpr); ok && o.name == "ARGV" {
				ref := fmt.Sprintf("ARGV[%d]", int(k.v))
				for _, i := range p.m.wrapNum {
					if i == int(k.v) {
						return "tonumber(" + ref + ")"
					}
				}
				if p.m.wrapStr {
					return "tostring(" + ref + ")"
				}
				return ref
			}
		}
		// Spaces keep a long-bracket key ("[ [[ok]] ]") from reading as
		// one.
		return p.expr(e.obj) + "[ " + p.expr(e.key) + " ]"
	case *callExpr:
		fn := p.expr(e.fn)
		args := append([]expr(nil), e.args...)
		if fn == "redis.call" || fn == "redis.pcall" {
			if p.m.swapCall {
				fn = map[string]string{"redis.call": "redis.pcall", "redis.pcall": "redis.call"}[fn]
			}
			if s, ok := args[0].(*strExpr); ok && p.m.flipCase {
				if strings.ToUpper(s.v) == s.v {
					args[0] = &strExpr{v: strings.ToLower(s.v)}
				} else {
					args[0] = &strExpr{v: strings.ToUpper(s.v)}
				}
			}
		}
		if e.method != "" {
			return fn + ":" + e.method + "(" + p.exprs(args) + ")"
		}
		return fn + "(" + p.exprs(args) + ")"
	case *binExpr:
		l, r, op := e.l, e.r, e.op
		if sw, ok := swapped[op]; ok && p.m.swapCmp {
			l, r, op = r, l, sw
		}
		return "(" + p.expr(l) + " " + op + " " + p.expr(r) + ")"
	case *unExpr:
		if e.op == "not" {
			return "(not " + p.expr(e.x) + ")"
		}
		return "(" + e.op + p.expr(e.x) + ")"
	case *tableExpr:
		var parts []string
		for _, it := range e.items {
			switch k := it.key.(type) {
			case nil:
				parts = append(parts, p.expr(it.val))
			case *strExpr:
				parts = append(parts, k.v+" = "+p.expr(it.val))
			default:
				parts = append(parts, "["+p.expr(k)+"] = "+p.expr(it.val))
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	panic(fmt.Sprintf("printer: %T", e))
}
