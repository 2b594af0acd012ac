package luashape

import (
	"fmt"
	"strings"
)

// Limits that keep parsing and evaluation bounded on any input.
const (
	maxSource = 64 << 10 // bytes of script
	maxDepth  = 100      // nesting of blocks and expressions
)

// expr is a Lua expression.
type expr interface{ exprNode() }

type (
	nilExpr   struct{}
	boolExpr  struct{ v bool }
	numExpr   struct{ v float64 }
	strExpr   struct{ v string }
	varargExp struct{}
	nameExpr  struct{ name string }
	indexExpr struct{ obj, key expr }
	callExpr  struct {
		fn     expr
		method string // obj:method(args) when set
		args   []expr
		line   int
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	unExpr struct {
		op   string
		x    expr
		line int
	}
	tableExpr struct {
		items []tableItem
	}
	parenExpr struct{ x expr } // truncates to one value
	funcExpr  struct{}         // a function literal: parsed, never run
)

type tableItem struct {
	key expr // nil: positional
	val expr
}

func (nilExpr) exprNode()   {}
func (boolExpr) exprNode()  {}
func (numExpr) exprNode()   {}
func (strExpr) exprNode()   {}
func (varargExp) exprNode() {}
func (nameExpr) exprNode()  {}
func (indexExpr) exprNode() {}
func (callExpr) exprNode()  {}
func (binExpr) exprNode()   {}
func (unExpr) exprNode()    {}
func (tableExpr) exprNode() {}
func (parenExpr) exprNode() {}
func (funcExpr) exprNode()  {}

// stmt is a Lua statement; each records where it is for error messages.
type stmt interface{ at() *where }

type where struct {
	line     int
	from, to int // byte range in the source
}

func (w *where) at() *where { return w }

type (
	localStmt struct {
		where
		names []string
		exprs []expr
	}
	assignStmt struct {
		where
		targets []expr
		exprs   []expr
	}
	callStmt struct {
		where
		call *callExpr
	}
	ifStmt struct {
		where
		conds  []expr
		blocks [][]stmt
		els    []stmt // nil when absent
	}
	whileStmt struct {
		where
		cond expr
		body []stmt
	}
	repeatStmt struct {
		where
		body []stmt
		cond expr
	}
	numForStmt struct {
		where
		name             string
		start, end, step expr
		body             []stmt
	}
	genForStmt struct {
		where
		names []string
		exprs []expr
		body  []stmt
	}
	doStmt struct {
		where
		body []stmt
	}
	returnStmt struct {
		where
		exprs []expr
	}
	breakStmt struct{ where }
	funcStmt  struct{ where } // function definitions: refused when run
)

// chunk is a parsed script.
type chunk struct {
	src  string
	body []stmt
	keys int  // highest constant KEYS index used
	argv int  // highest constant ARGV index used
	dynK bool // KEYS used other than KEYS[constant]
	dynA bool // ARGV used other than ARGV[constant]
}

// describe returns the statement's source text, shortened, for messages.
func (c *chunk) describe(s stmt) string {
	w := s.at()
	t := strings.Join(strings.Fields(c.src[w.from:w.to]), " ")
	if len(t) > 80 {
		t = t[:77] + "..."
	}
	return fmt.Sprintf("line %d: %s", w.line, t)
}

type parser struct {
	toks  []token
	p     int
	depth int
	c     *chunk
}

// parse parses a Lua chunk.
func parse(src string) (*chunk, error) {
	if len(src) > maxSource {
		return nil, fmt.Errorf("script longer than %d bytes", maxSource)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	c := &chunk{src: src}
	p := &parser{toks: toks, c: c}
	body, err := p.block()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errf("'%s' unexpected", t.text)
	}
	c.body = body
	return c, nil
}

func (p *parser) peek() token { return p.toks[p.p] }
func (p *parser) next() token {
	t := p.toks[p.p]
	if t.kind != tEOF {
		p.p++
	}
	return t
}
func (p *parser) is(kind tokKind, text string) bool {
	t := p.peek()
	return t.kind == kind && t.text == text
}
func (p *parser) accept(kind tokKind, text string) bool {
	if p.is(kind, text) {
		p.next()
		return true
	}
	return false
}
func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", p.peek().line, fmt.Sprintf(format, a...))
}
func (p *parser) expect(kind tokKind, text string) error {
	if !p.accept(kind, text) {
		t := p.peek()
		if t.kind == tEOF {
			return p.errf("'%s' expected near <eof>", text)
		}
		return p.errf("'%s' expected near '%s'", text, t.text)
	}
	return nil
}
func (p *parser) name() (string, error) {
	t := p.peek()
	if t.kind != tName {
		return "", p.errf("<name> expected near '%s'", t.text)
	}
	p.next()
	return t.text, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errf("nesting deeper than %d", maxDepth)
	}
	return nil
}
func (p *parser) leave() { p.depth-- }

func blockEnd(t token) bool {
	if t.kind == tEOF {
		return true
	}
	if t.kind != tKeyword {
		return false
	}
	switch t.text {
	case "end", "else", "elseif", "until":
		return true
	}
	return false
}

func (p *parser) block() ([]stmt, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var out []stmt
	for !blockEnd(p.peek()) {
		if p.accept(tOp, ";") {
			continue
		}
		start := p.peek()
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		w := s.at()
		w.line, w.from = start.line, start.pos
		w.to = p.toks[max(p.p-1, 0)].end
		if w.to < w.from {
			w.to = w.from
		}
		out = append(out, s)
		if _, ok := s.(*returnStmt); ok {
			p.accept(tOp, ";")
			if !blockEnd(p.peek()) {
				return nil, p.errf("'end' expected near '%s'", p.peek().text)
			}
			break
		}
	}
	return out, nil
}

func (p *parser) statement() (stmt, error) {
	t := p.peek()
	if t.kind == tKeyword {
		switch t.text {
		case "local":
			p.next()
			if p.accept(tKeyword, "function") {
				return p.skipFunction()
			}
			s := &localStmt{}
			for {
				n, err := p.name()
				if err != nil {
					return nil, err
				}
				s.names = append(s.names, n)
				if p.is(tOp, "<") { // Lua 5.4 attributes: <const>, <close>
					p.next()
					if _, err := p.name(); err != nil {
						return nil, err
					}
					if err := p.expect(tOp, ">"); err != nil {
						return nil, err
					}
				}
				if !p.accept(tOp, ",") {
					break
				}
			}
			if p.accept(tOp, "=") {
				es, err := p.exprList()
				if err != nil {
					return nil, err
				}
				s.exprs = es
			}
			return s, nil
		case "if":
			p.next()
			s := &ifStmt{}
			for {
				c, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expect(tKeyword, "then"); err != nil {
					return nil, err
				}
				b, err := p.block()
				if err != nil {
					return nil, err
				}
				s.conds, s.blocks = append(s.conds, c), append(s.blocks, b)
				if p.accept(tKeyword, "elseif") {
					continue
				}
				if p.accept(tKeyword, "else") {
					b, err := p.block()
					if err != nil {
						return nil, err
					}
					s.els = append([]stmt{}, b...)
					if s.els == nil {
						s.els = []stmt{}
					}
				}
				return s, p.expect(tKeyword, "end")
			}
		case "while":
			p.next()
			c, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tKeyword, "do"); err != nil {
				return nil, err
			}
			b, err := p.block()
			if err != nil {
				return nil, err
			}
			return &whileStmt{cond: c, body: b}, p.expect(tKeyword, "end")
		case "repeat":
			p.next()
			b, err := p.block()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tKeyword, "until"); err != nil {
				return nil, err
			}
			c, err := p.expr()
			if err != nil {
				return nil, err
			}
			return &repeatStmt{body: b, cond: c}, nil
		case "for":
			p.next()
			n1, err := p.name()
			if err != nil {
				return nil, err
			}
			if p.accept(tOp, "=") {
				s := &numForStmt{name: n1}
				if s.start, err = p.expr(); err != nil {
					return nil, err
				}
				if err := p.expect(tOp, ","); err != nil {
					return nil, err
				}
				if s.end, err = p.expr(); err != nil {
					return nil, err
				}
				if p.accept(tOp, ",") {
					if s.step, err = p.expr(); err != nil {
						return nil, err
					}
				}
				if err := p.expect(tKeyword, "do"); err != nil {
					return nil, err
				}
				if s.body, err = p.block(); err != nil {
					return nil, err
				}
				return s, p.expect(tKeyword, "end")
			}
			s := &genForStmt{names: []string{n1}}
			for p.accept(tOp, ",") {
				n, err := p.name()
				if err != nil {
					return nil, err
				}
				s.names = append(s.names, n)
			}
			if err := p.expect(tKeyword, "in"); err != nil {
				return nil, err
			}
			if s.exprs, err = p.exprList(); err != nil {
				return nil, err
			}
			if err := p.expect(tKeyword, "do"); err != nil {
				return nil, err
			}
			if s.body, err = p.block(); err != nil {
				return nil, err
			}
			return s, p.expect(tKeyword, "end")
		case "do":
			p.next()
			b, err := p.block()
			if err != nil {
				return nil, err
			}
			return &doStmt{body: b}, p.expect(tKeyword, "end")
		case "return":
			p.next()
			s := &returnStmt{}
			if blockEnd(p.peek()) || p.is(tOp, ";") {
				return s, nil
			}
			es, err := p.exprList()
			if err != nil {
				return nil, err
			}
			s.exprs = es
			return s, nil
		case "break":
			p.next()
			return &breakStmt{}, nil
		case "function":
			p.next()
			return p.skipFunction()
		case "goto":
			return nil, p.errf("goto is not supported")
		}
	}
	if p.accept(tOp, "::") {
		return nil, p.errf("labels are not supported")
	}
	// Assignment or call.
	e, err := p.suffixed()
	if err != nil {
		return nil, err
	}
	if c, ok := e.(*callExpr); ok && !p.is(tOp, "=") && !p.is(tOp, ",") {
		return &callStmt{call: c}, nil
	}
	s := &assignStmt{targets: []expr{e}}
	for p.accept(tOp, ",") {
		e, err := p.suffixed()
		if err != nil {
			return nil, err
		}
		s.targets = append(s.targets, e)
	}
	for _, t := range s.targets {
		switch t.(type) {
		case *nameExpr, *indexExpr:
		default:
			return nil, p.errf("syntax error near '%s'", p.peek().text)
		}
	}
	if err := p.expect(tOp, "="); err != nil {
		return nil, err
	}
	if s.exprs, err = p.exprList(); err != nil {
		return nil, err
	}
	return s, nil
}

// skipFunction parses past a function definition's body (name, params,
// block, end): lock scripts have none, so running one is refused.
func (p *parser) skipFunction() (stmt, error) {
	for !p.is(tOp, "(") {
		if p.peek().kind == tEOF {
			return nil, p.errf("'(' expected near <eof>")
		}
		p.next()
	}
	if err := p.funcBody(); err != nil {
		return nil, err
	}
	return &funcStmt{}, nil
}

func (p *parser) funcBody() error {
	if err := p.expect(tOp, "("); err != nil {
		return err
	}
	for !p.accept(tOp, ")") {
		if p.peek().kind == tEOF {
			return p.errf("')' expected near <eof>")
		}
		p.next()
	}
	if _, err := p.block(); err != nil {
		return err
	}
	return p.expect(tKeyword, "end")
}

func (p *parser) exprList() ([]expr, error) {
	var out []expr
	for {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if !p.accept(tOp, ",") {
			return out, nil
		}
	}
}

var binPrec = map[string][2]int{ // left, right priority (Lua 5.1)
	"or": {1, 1}, "and": {2, 2},
	"<": {3, 3}, ">": {3, 3}, "<=": {3, 3}, ">=": {3, 3}, "~=": {3, 3}, "==": {3, 3},
	"..": {5, 4}, "+": {6, 6}, "-": {6, 6},
	"*": {7, 7}, "/": {7, 7}, "%": {7, 7}, "^": {10, 9},
}

const unaryPrec = 8

func (p *parser) expr() (expr, error) { return p.subexpr(0) }

func (p *parser) subexpr(limit int) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var left expr
	t := p.peek()
	if (t.kind == tKeyword && t.text == "not") || (t.kind == tOp && (t.text == "-" || t.text == "#")) {
		p.next()
		x, err := p.subexpr(unaryPrec)
		if err != nil {
			return nil, err
		}
		left = &unExpr{op: t.text, x: x, line: t.line}
	} else {
		var err error
		if left, err = p.simple(); err != nil {
			return nil, err
		}
	}
	for {
		t := p.peek()
		if t.kind != tOp && t.kind != tKeyword {
			return left, nil
		}
		pr, ok := binPrec[t.text]
		if !ok || pr[0] <= limit {
			return left, nil
		}
		p.next()
		r, err := p.subexpr(pr[1])
		if err != nil {
			return nil, err
		}
		left = &binExpr{op: t.text, l: left, r: r, line: t.line}
	}
}

func (p *parser) simple() (expr, error) {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.next()
		return &numExpr{v: t.num}, nil
	case tString:
		p.next()
		return &strExpr{v: t.text}, nil
	case tKeyword:
		switch t.text {
		case "nil":
			p.next()
			return &nilExpr{}, nil
		case "true", "false":
			p.next()
			return &boolExpr{v: t.text == "true"}, nil
		case "function":
			p.next()
			if err := p.funcBody(); err != nil {
				return nil, err
			}
			return &funcExpr{}, nil
		}
	case tOp:
		switch t.text {
		case "...":
			p.next()
			return &varargExp{}, nil
		case "{":
			return p.table()
		}
	}
	return p.suffixed()
}

func (p *parser) primary() (expr, error) {
	t := p.peek()
	if t.kind == tName {
		p.next()
		return &nameExpr{name: t.text}, nil
	}
	if p.accept(tOp, "(") {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(tOp, ")"); err != nil {
			return nil, err
		}
		return &parenExpr{x: e}, nil
	}
	if t.kind == tEOF {
		return nil, p.errf("unexpected symbol near <eof>")
	}
	return nil, p.errf("unexpected symbol near '%s'", t.text)
}

func (p *parser) suffixed() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	if n, ok := e.(*nameExpr); ok && (n.name == "KEYS" || n.name == "ARGV") && !p.is(tOp, "[") {
		if n.name == "KEYS" {
			p.c.dynK = true
		} else {
			p.c.dynA = true
		}
	}
	for {
		t := p.peek()
		switch {
		case t.kind == tOp && t.text == ".":
			p.next()
			n, err := p.name()
			if err != nil {
				return nil, err
			}
			e = &indexExpr{obj: e, key: &strExpr{v: n}}
		case t.kind == tOp && t.text == "[":
			p.next()
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tOp, "]"); err != nil {
				return nil, err
			}
			e = &indexExpr{obj: e, key: k}
		case t.kind == tOp && t.text == ":":
			p.next()
			n, err := p.name()
			if err != nil {
				return nil, err
			}
			args, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			e = &callExpr{fn: e, method: n, args: args, line: t.line}
		case (t.kind == tOp && (t.text == "(" || t.text == "{")) || t.kind == tString:
			args, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			e = &callExpr{fn: e, args: args, line: t.line}
		default:
			p.noteGlobals(e)
			return e, nil
		}
		p.noteGlobals(e)
	}
}

// noteGlobals records how the script indexes KEYS and ARGV.
func (p *parser) noteGlobals(e expr) {
	ix, ok := e.(*indexExpr)
	if !ok {
		return
	}
	n, ok := ix.obj.(*nameExpr)
	if !ok || (n.name != "KEYS" && n.name != "ARGV") {
		return
	}
	hi := -1
	if k, ok := ix.key.(*numExpr); ok && k.v >= 1 && k.v <= 64 && k.v == float64(int(k.v)) {
		hi = int(k.v)
	}
	if n.name == "KEYS" {
		if hi < 0 {
			p.c.dynK = true
		} else {
			p.c.keys = max(p.c.keys, hi)
		}
	} else {
		if hi < 0 {
			p.c.dynA = true
		} else {
			p.c.argv = max(p.c.argv, hi)
		}
	}
}

func (p *parser) callArgs() ([]expr, error) {
	t := p.peek()
	if t.kind == tString {
		p.next()
		return []expr{&strExpr{v: t.text}}, nil
	}
	if t.kind == tOp && t.text == "{" {
		tb, err := p.table()
		if err != nil {
			return nil, err
		}
		return []expr{tb}, nil
	}
	if err := p.expect(tOp, "("); err != nil {
		return nil, err
	}
	if p.accept(tOp, ")") {
		return nil, nil
	}
	es, err := p.exprList()
	if err != nil {
		return nil, err
	}
	return es, p.expect(tOp, ")")
}

func (p *parser) table() (expr, error) {
	if err := p.expect(tOp, "{"); err != nil {
		return nil, err
	}
	tb := &tableExpr{}
	for !p.accept(tOp, "}") {
		var it tableItem
		switch {
		case p.is(tOp, "["):
			p.next()
			k, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tOp, "]"); err != nil {
				return nil, err
			}
			if err := p.expect(tOp, "="); err != nil {
				return nil, err
			}
			it.key = k
		case p.peek().kind == tName && p.toks[p.p+1].kind == tOp && p.toks[p.p+1].text == "=":
			it.key = &strExpr{v: p.next().text}
			p.next()
		}
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		it.val = v
		tb.items = append(tb.items, it)
		if !p.accept(tOp, ",") && !p.accept(tOp, ";") {
			if err := p.expect(tOp, "}"); err != nil {
				return nil, err
			}
			break
		}
	}
	return tb, nil
}
