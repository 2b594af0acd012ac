package luashape

import (
	"errors"
	"fmt"
	"strings"

	"github.com/yuin/gopher-lua/ast"
	luaparse "github.com/yuin/gopher-lua/parse"
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
	// hashes: the script calls a hash command (HEXISTS, HINCRBY, ...):
	// a key it first reads or expires with a command of any type is a
	// hash (a lock kept in a hash, Redisson's layout).
	hashes bool
	// zsets: the script calls a sorted-set command (a semaphore, or a
	// read-write lock kept in a sorted set).
	zsets bool
}

// hashCommands are the hash commands the model knows.
var hashCommands = map[string]bool{"HEXISTS": true, "HINCRBY": true, "HGET": true}

// describe returns the statement's source text, shortened, for messages.
func (c *chunk) describe(s stmt) string {
	w := s.at()
	t := strings.Join(strings.Fields(c.src[w.from:w.to]), " ")
	if len(t) > 80 {
		t = t[:77] + "..."
	}
	return fmt.Sprintf("line %d: %s", w.line, t)
}

// parse parses a Lua chunk with gopher-lua: its scanner splits the source
// into tokens (lex), its parser builds the syntax tree (feed), and conv
// turns the tree into the nodes above, which the interpreter runs.
func parse(src string) (*chunk, error) {
	if len(src) > maxSource {
		return nil, fmt.Errorf("script longer than %d bytes", maxSource)
	}
	ts, err := lex(src)
	if err != nil {
		return nil, err
	}
	// gopher-lua takes an empty field, {1, , 2}, for none. Two separators
	// in a row are wrong anywhere but ;; between statements: the second
	// is an error unless the parser finds one before it.
	sep := func(t int) bool { return t == ',' || t == ';' }
	empty := len(ts.list)
	for i := 1; i < len(ts.list) && empty == len(ts.list); i++ {
		if a, b := ts.list[i-1].typ, ts.list[i].typ; sep(a) && sep(b) && (a == ',' || b == ',') {
			empty = i
		}
	}
	f := newFeed(ts.list, -1)
	stmts, at, err := f.parse()
	switch {
	case err != nil && at <= empty:
		return nil, ts.syntaxError(at, err)
	case empty < len(ts.list):
		return nil, fmt.Errorf("line %d: unexpected symbol near '%c'", ts.list[empty].line, ts.list[empty].typ)
	case err != nil:
		return nil, ts.syntaxError(at, err)
	}
	c := &chunk{src: src}
	cv := &conv{ts: ts, f: f, c: c}
	if c.body, _, err = cv.block(stmts, len(ts.list), 1); err != nil {
		return nil, err
	}
	return c, nil
}

// feed is the script as gopher-lua's parser is given it: one token a line.
// The parser gives a node the line of its first token only (an error, the
// line and column of its token), so, fed this way, it says which token
// each node starts at. String literals, decoded already, are fed as "".
// A '(' right after a ')' stays on its line (on a line of its own,
// gopher-lua could refuse the call as ambiguous).
type feed struct {
	src   string
	first []int // first[l]: the index of the first token on line l (from 1); then the count
}

// newFeed feeds list, with the tokens extra before list[ins] when ins >= 0.
func newFeed(list []token, ins int, extra ...string) *feed {
	var b strings.Builder
	f := &feed{first: []int{0}}
	n := 0
	add := func(text string, sameLine bool) {
		if sameLine && n > 0 {
			b.WriteByte(' ')
		} else {
			if n > 0 {
				b.WriteByte('\n')
			}
			f.first = append(f.first, n)
		}
		b.WriteString(text)
		n++
	}
	for i, t := range list {
		if i == ins {
			for _, x := range extra {
				add(x, false)
			}
		}
		text := t.text
		if t.typ == luaparse.TString {
			text = `""`
		}
		add(text, t.sameLine && i != ins)
	}
	if ins == len(list) {
		for _, x := range extra {
			add(x, false)
		}
	}
	f.first = append(f.first, n)
	f.src = b.String()
	return f
}

// count is the number of tokens fed: the index of the end of the source.
func (f *feed) count() int { return f.first[len(f.first)-1] }

// tok is the token a node the parser put on line starts at: the last on
// the line (only a call's '(' shares one, with the ')' before it).
func (f *feed) tok(line int) int {
	if line < 1 || line+1 >= len(f.first) {
		return f.count()
	}
	return f.first[line+1] - 1
}

// parse runs gopher-lua's parser. On a syntax error it returns the index of
// the token the parser stopped at.
func (f *feed) parse() ([]ast.Stmt, int, error) {
	stmts, err := luaparse.Parse(strings.NewReader(f.src), "")
	var pe *luaparse.Error
	switch {
	case err == nil && stmts == nil:
		return nil, f.count(), errors.New(internalError + ": gopher-lua returned no syntax tree")
	case err == nil:
		return stmts, -1, nil
	case !errors.As(err, &pe):
		return nil, f.count(), fmt.Errorf("%s: gopher-lua: %v", internalError, err)
	case pe.Pos.Line < 1 || pe.Pos.Line+1 >= len(f.first):
		return nil, f.count(), pe
	}
	i := f.first[pe.Pos.Line]
	if f.first[pe.Pos.Line+1]-i > 1 && pe.Pos.Column > 1 {
		i++ // the '(' after a ')'
	}
	return nil, i, pe
}

// near is the line of token i and how messages quote it.
func (ts *tokens) near(i int) (int, string) {
	if i < 0 || i >= len(ts.list) {
		return ts.eofLine, "<eof>"
	}
	t := ts.list[i]
	if len(t.text) > 40 {
		return t.line, "'" + t.text[:37] + "...'"
	}
	return t.line, "'" + t.text + "'"
}

// syntaxError words the parser's error at token at as Lua 5.1 does. The
// parser says only where it stopped; what it expected there is found by
// feeding a token before that one and seeing whether the parser takes it:
//   - after a return or a break, only the end of its block may come (a
//     return without values takes what follows for them);
//   - there, and where a statement may start, a block's closer (end,
//     else, elseif, until, the end of the source) means the block around
//     it wants its own, 'end' or 'until' (at the top, the closer is
//     unexpected); any other token is an unexpected symbol;
//   - where an expression (or the variable of an assignment) may start,
//     an unexpected symbol;
//   - after a parenthesised expression taken for a statement or for a
//     variable of an assignment, or after a call among those variables,
//     a syntax error;
//   - where only a name may come (after local, function, for, '.', ':'),
//     a name;
//   - else the first token of a list that the parser takes there; ','
//     (mostly optional) and '(' (wanted after a method's or a function
//     definition's name, taken after most others) come last.
func (ts *tokens) syntaxError(at int, err error) error {
	var pe *luaparse.Error
	if !errors.As(err, &pe) {
		return err
	}
	at = min(max(at, 0), len(ts.list))
	line, near := ts.near(at)
	closer := true // at a block's closer
	if at < len(ts.list) {
		switch ts.list[at].typ {
		case luaparse.TEnd, luaparse.TElse, luaparse.TElseIf, luaparse.TUntil:
		default:
			closer = false
		}
	}
	if strings.HasPrefix(pe.Message, "ambiguous syntax") {
		return fmt.Errorf("line %d: %s near %s", line, pe.Message, near)
	}
	expected := func(what string) error { return fmt.Errorf("line %d: %s expected near %s", line, what, near) }
	unexpected := fmt.Errorf("line %d: unexpected symbol near %s", line, near)
	// takes reports whether the parser takes toks fed before token at. It
	// stops at the first token it cannot take, so what follows is not fed.
	takes := func(toks ...string) bool {
		_, stop, err := newFeed(ts.list[:at], at, toks...).parse()
		return err == nil || stop >= at+len(toks)
	}
	last := false // after a return or a break
	if at > 0 && ts.list[at-1].typ == luaparse.TReturn {
		if !closer { // what is there is taken for its values
			return unexpected
		}
		last = true
	} else if stmts, _, err := newFeed(ts.list[:at], -1).parse(); err == nil && len(stmts) > 0 {
		switch s := stmts[len(stmts)-1].(type) {
		case *ast.ReturnStmt, *ast.BreakStmt:
			if !closer {
				return expected("'end'")
			}
			last = true
		case *ast.FuncCallStmt:
			if call, ok := s.Expr.(*ast.FuncCallExpr); ok && call.AdjustRet {
				return fmt.Errorf("line %d: syntax error near %s", line, near)
			}
		}
	}
	switch {
	case last, takes("break"): // a statement may start here
		if !closer {
			return unexpected
		}
		for _, want := range []string{"end", "until"} {
			if takes(want) {
				return expected("'" + want + "'")
			}
		}
		return fmt.Errorf("line %d: %s unexpected", line, near)
	case takes("nil"):
		return unexpected
	case !takes("=") && takes(".", "x", "="): // a call or (x) among the variables assigned
		return fmt.Errorf("line %d: syntax error near %s", line, near)
	case takes("x"):
		if takes("(") { // a variable: a name or a parenthesised prefix
			return unexpected
		}
		return expected("<name>")
	case takes("=") && takes("in"):
		return expected("'=' or 'in'")
	}
	for _, want := range []string{"then", "do", "end", ")", "]", "}", "=", "until", "in", ",", "("} {
		if takes(want) {
			return expected("'" + want + "'")
		}
	}
	return unexpected
}

// conv turns gopher-lua's syntax tree into the nodes the interpreter runs,
// and notes how the script indexes KEYS and ARGV. It finds each node's
// first token from the line the parser gave it (see feed), which places
// statements in the source for messages, gives operators and calls the
// line Lua reports their errors at, and tells where the parentheses the
// tree drops were: they still cut a call's results to one, and hide a
// name from the interpreter's messages.
type conv struct {
	ts    *tokens
	f     *feed
	c     *chunk
	depth int
}

func (cv *conv) tok(line int) int { return cv.f.tok(line) }

// is reports whether token i is of type typ.
func (cv *conv) is(i, typ int) bool { return i >= 0 && i < len(cv.ts.list) && cv.ts.list[i].typ == typ }

// line is token i's line.
func (cv *conv) line(i int) int {
	switch {
	case i < 0:
		return 1
	case i >= len(cv.ts.list):
		return cv.ts.eofLine
	}
	return cv.ts.list[i].line
}

// enter counts one level of nesting (a block, an operand), up to maxDepth.
func (cv *conv) enter(line int) error {
	cv.depth++
	if cv.depth > maxDepth {
		return fmt.Errorf("line %d: nesting deeper than %d", line, maxDepth)
	}
	return nil
}
func (cv *conv) leave() { cv.depth-- }

// block converts a block's statements; end is the index of the token that
// closes the block (end, else, elseif, until, or the end of the source).
// It returns where the block's first statement starts (end if none does).
func (cv *conv) block(ss []ast.Stmt, end, line int) ([]stmt, int, error) {
	if err := cv.enter(line); err != nil {
		return nil, 0, err
	}
	defer cv.leave()
	var out []stmt
	var starts []int
	for _, s := range ss {
		x, start, err := cv.stmt(s)
		if err != nil {
			return nil, 0, err
		}
		out, starts = append(out, x), append(starts, start)
	}
	// A statement ends where the next one (or the block's end) starts,
	// less the semicolons between.
	for i, x := range out {
		next := end
		if i+1 < len(out) {
			next = starts[i+1]
		}
		last := next - 1
		for last > starts[i] && cv.is(last, ';') {
			last--
		}
		last = max(last, starts[i])
		w := x.at()
		w.line, w.from, w.to = cv.line(starts[i]), cv.ts.list[starts[i]].from, cv.ts.list[last].to
	}
	if len(starts) > 0 {
		return out, starts[0], nil
	}
	return out, end, nil
}

// stmt converts a statement and returns the token it starts at.
func (cv *conv) stmt(s ast.Stmt) (stmt, int, error) {
	at := cv.tok(s.Line())
	line := cv.line(at)
	var err error
	switch s := s.(type) {
	case *ast.AssignStmt:
		x := &assignStmt{}
		start := at
		for i, l := range s.Lhs {
			e, st, err := cv.expr(l)
			if err != nil {
				return nil, 0, err
			}
			if i == 0 {
				start = st
			}
			x.targets = append(x.targets, e)
		}
		if x.exprs, err = cv.exprs(s.Rhs); err != nil {
			return nil, 0, err
		}
		return x, start, nil
	case *ast.LocalAssignStmt:
		if cv.is(at+1, luaparse.TFunction) { // local function f() ... end
			f, ok := s.Exprs[0].(*ast.FunctionExpr)
			if !ok {
				return nil, 0, fmt.Errorf("%s: local function %T", internalError, s.Exprs[0])
			}
			return &funcStmt{}, at, cv.funcBody(f, line)
		}
		x := &localStmt{names: s.Names}
		if x.exprs, err = cv.exprs(s.Exprs); err != nil {
			return nil, 0, err
		}
		return x, at, nil
	case *ast.FuncCallStmt:
		call, ok := s.Expr.(*ast.FuncCallExpr)
		if !ok {
			return nil, 0, fmt.Errorf("%s: call statement %T", internalError, s.Expr)
		}
		e, start, err := cv.expr(call)
		if err != nil {
			return nil, 0, err
		}
		if call.AdjustRet { // (f()): Lua takes no parenthesised call for a statement
			line, near := cv.ts.near(cv.after(start))
			return nil, 0, fmt.Errorf("line %d: syntax error near %s", line, near)
		}
		return &callStmt{call: e.(*callExpr)}, start, nil
	case *ast.DoBlockStmt:
		x := &doStmt{}
		x.body, _, err = cv.block(s.Stmts, cv.tok(s.LastLine()), line)
		return x, at, err
	case *ast.WhileStmt:
		x := &whileStmt{}
		if x.cond, _, err = cv.expr(s.Condition); err != nil {
			return nil, 0, err
		}
		x.body, _, err = cv.block(s.Stmts, cv.tok(s.LastLine()), line)
		return x, at, err
	case *ast.RepeatStmt:
		x := &repeatStmt{}
		var until int
		if x.cond, until, err = cv.expr(s.Condition); err != nil {
			return nil, 0, err
		}
		x.body, _, err = cv.block(s.Stmts, until-1, line)
		return x, at, err
	case *ast.IfStmt:
		x := &ifStmt{}
		return x, at, cv.ifClause(x, s, cv.tok(s.LastLine()), line)
	case *ast.NumberForStmt:
		x := &numForStmt{name: s.Name}
		if x.start, _, err = cv.expr(s.Init); err != nil {
			return nil, 0, err
		}
		if x.end, _, err = cv.expr(s.Limit); err != nil {
			return nil, 0, err
		}
		if s.Step != nil {
			if x.step, _, err = cv.expr(s.Step); err != nil {
				return nil, 0, err
			}
		}
		x.body, _, err = cv.block(s.Stmts, cv.tok(s.LastLine()), line)
		return x, at, err
	case *ast.GenericForStmt:
		x := &genForStmt{names: s.Names}
		if x.exprs, err = cv.exprs(s.Exprs); err != nil {
			return nil, 0, err
		}
		x.body, _, err = cv.block(s.Stmts, cv.tok(s.LastLine()), line)
		return x, at, err
	case *ast.FuncDefStmt:
		return &funcStmt{}, at, cv.funcBody(s.Func, line)
	case *ast.ReturnStmt:
		x := &returnStmt{}
		x.exprs, err = cv.exprs(s.Exprs)
		return x, at, err
	case *ast.BreakStmt:
		return &breakStmt{}, at, nil
	case *ast.GotoStmt:
		return nil, 0, fmt.Errorf("line %d: goto is not supported", line)
	case *ast.LabelStmt:
		return nil, 0, fmt.Errorf("line %d: labels are not supported", line)
	}
	return nil, 0, fmt.Errorf("%s: statement %T", internalError, s)
}

// after returns the index of the token after the brackets that open at
// token i.
func (cv *conv) after(i int) int {
	depth := 0
	for ; i < len(cv.ts.list); i++ {
		switch cv.ts.list[i].typ {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return i
}

// ifClause converts an if (or elseif) clause, and the clauses after it,
// into x; end is the index of the if statement's end.
func (cv *conv) ifClause(x *ifStmt, s *ast.IfStmt, end, line int) error {
	cond, _, err := cv.expr(s.Condition)
	if err != nil {
		return err
	}
	var next *ast.IfStmt // the elseif clause after this one
	if len(s.Else) == 1 {
		if n, ok := s.Else[0].(*ast.IfStmt); ok && cv.is(cv.tok(n.Line()), luaparse.TElseIf) {
			next = n
		}
	}
	then := end // what closes the then block: elseif, else or end
	var els []stmt
	switch {
	case next != nil:
		then = cv.tok(next.Line())
	case s.Else != nil:
		var first int
		if els, first, err = cv.block(s.Else, end, line); err != nil {
			return err
		}
		if els == nil {
			els = []stmt{}
		}
		then = first - 1 // else, or a ';' after it
		for cv.is(then, ';') {
			then--
		}
	}
	body, _, err := cv.block(s.Then, then, line)
	if err != nil {
		return err
	}
	x.conds, x.blocks = append(x.conds, cond), append(x.blocks, body)
	if next != nil {
		return cv.ifClause(x, next, end, cv.line(then))
	}
	x.els = els
	return nil
}

// funcBody goes through the body of a function, which never runs
// (function definitions are refused when run), for the limits, the
// statements refused, and the KEYS and ARGV it uses.
func (cv *conv) funcBody(f *ast.FunctionExpr, line int) error {
	_, _, err := cv.block(f.Stmts, cv.tok(f.LastLine()), line)
	return err
}

func (cv *conv) exprs(es []ast.Expr) ([]expr, error) {
	var out []expr
	for _, e := range es {
		x, _, err := cv.expr(e)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// expr converts an operand: one more level of nesting.
func (cv *conv) expr(e ast.Expr) (expr, int, error) {
	if err := cv.enter(cv.line(cv.tok(e.Line()))); err != nil {
		return nil, 0, err
	}
	defer cv.leave()
	return cv.sub(e)
}

// sub converts an expression and returns the token it starts at. The left
// operand of a binary operator, and what is indexed or called, are at the
// nesting of the expression (as a chain of them is written, flat).
func (cv *conv) sub(e ast.Expr) (expr, int, error) {
	at := cv.tok(e.Line()) // its first token, or that of parentheses around it
	switch e := e.(type) {
	case *ast.NilExpr:
		return cv.leaf(&nilExpr{}, at)
	case *ast.TrueExpr:
		return cv.leaf(&boolExpr{v: true}, at)
	case *ast.FalseExpr:
		return cv.leaf(&boolExpr{}, at)
	case *ast.NumberExpr:
		v, err := number(e.Value)
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: malformed number near '%s'", cv.line(at), e.Value)
		}
		return cv.leaf(&numExpr{v: v}, at)
	case *ast.StringExpr: // a literal, or the name in a.name or {name = ...}
		v := e.Value
		i := at
		for cv.is(i, '(') {
			i++
		}
		if cv.is(i, luaparse.TString) {
			v = cv.ts.list[i].val
		}
		return cv.leaf(&strExpr{v: v}, at)
	case *ast.Comma3Expr:
		return cv.leaf(&varargExp{}, at)
	case *ast.IdentExpr:
		return cv.name(e, false)
	case *ast.FunctionExpr:
		if err := cv.funcBody(e, cv.line(at)); err != nil {
			return nil, 0, err
		}
		return cv.leaf(&funcExpr{}, at)
	case *ast.TableExpr:
		t := &tableExpr{}
		for _, f := range e.Fields {
			var it tableItem
			var err error
			if f.Key != nil {
				if it.key, _, err = cv.expr(f.Key); err != nil {
					return nil, 0, err
				}
			}
			if it.val, _, err = cv.expr(f.Value); err != nil {
				return nil, 0, err
			}
			t.items = append(t.items, it)
		}
		return cv.leaf(t, at)
	case *ast.AttrGetExpr:
		var obj expr
		var start int
		var err error
		if n, ok := e.Object.(*ast.IdentExpr); ok {
			obj, start, err = cv.name(n, true)
		} else {
			obj, start, err = cv.sub(e.Object)
		}
		if err != nil {
			return nil, 0, err
		}
		key, _, err := cv.expr(e.Key)
		if err != nil {
			return nil, 0, err
		}
		x := &indexExpr{obj: obj, key: key}
		cv.noteGlobals(x)
		return wrap(x, at, start)
	case *ast.FuncCallExpr:
		return cv.call(e, at)
	case *ast.LogicalOpExpr:
		return cv.binary(e.Operator, e.Lhs, e.Rhs, at)
	case *ast.RelationalOpExpr:
		return cv.binary(e.Operator, e.Lhs, e.Rhs, at)
	case *ast.StringConcatOpExpr:
		return cv.binary("..", e.Lhs, e.Rhs, at)
	case *ast.ArithmeticOpExpr:
		return cv.binary(e.Operator, e.Lhs, e.Rhs, at)
	case *ast.UnaryMinusOpExpr:
		return cv.unary("-", e.Expr, at)
	case *ast.UnaryNotOpExpr:
		return cv.unary("not", e.Expr, at)
	case *ast.UnaryLenOpExpr:
		return cv.unary("#", e.Expr, at)
	}
	return nil, 0, fmt.Errorf("%s: expression %T", internalError, e)
}

// leaf returns a node without operands whose token (or the '(' of
// parentheses around it) is at.
func (cv *conv) leaf(x expr, at int) (expr, int, error) {
	if cv.is(at, '(') {
		return &parenExpr{x: x}, at, nil
	}
	return x, at, nil
}

// wrap returns a node whose first operand starts at start. The parser gave
// it the line of the '(' at, before that, when it is in parentheses.
func wrap(x expr, at, start int) (expr, int, error) {
	if at < start {
		return &parenExpr{x: x}, at, nil
	}
	return x, start, nil
}

// name converts a name. KEYS and ARGV used otherwise than indexed are
// noted as used whole.
func (cv *conv) name(n *ast.IdentExpr, indexed bool) (expr, int, error) {
	x, start, err := cv.leaf(&nameExpr{name: n.Value}, cv.tok(n.Line()))
	if _, paren := x.(*parenExpr); (n.Value == "KEYS" || n.Value == "ARGV") && (!indexed || paren) {
		cv.noteWhole(n.Value)
	}
	return x, start, err
}

func (cv *conv) noteWhole(name string) {
	if name == "KEYS" {
		cv.c.dynK = true
	} else {
		cv.c.dynA = true
	}
}

// noteGlobals records how the script indexes KEYS and ARGV.
func (cv *conv) noteGlobals(ix *indexExpr) {
	n, ok := ix.obj.(*nameExpr)
	if !ok || (n.name != "KEYS" && n.name != "ARGV") {
		return
	}
	hi := -1
	if k, ok := ix.key.(*numExpr); ok && k.v >= 1 && k.v <= 64 && k.v == float64(int(k.v)) {
		hi = int(k.v)
	}
	switch {
	case hi < 0:
		cv.noteWhole(n.name)
	case n.name == "KEYS":
		cv.c.keys = max(cv.c.keys, hi)
	default:
		cv.c.argv = max(cv.c.argv, hi)
	}
}

// call converts a function call. Its line is that of what opens its
// arguments ('(', a string, a table; ':' for a method), where the
// arguments show it.
func (cv *conv) call(e *ast.FuncCallExpr, at int) (expr, int, error) {
	fe := e.Func
	if e.Receiver != nil {
		fe = e.Receiver
	}
	fn, start, err := cv.sub(fe)
	if err != nil {
		return nil, 0, err
	}
	x := &callExpr{fn: fn, method: e.Method, line: cv.line(start)}
	for i, a := range e.Args {
		arg, as, err := cv.expr(a)
		if err != nil {
			return nil, 0, err
		}
		if i == 0 {
			if cv.is(as-1, '(') {
				as--
			}
			if e.Method != "" {
				as -= 2
			}
			x.line = cv.line(as)
		}
		x.args = append(x.args, arg)
	}
	if len(x.args) > 0 {
		if name, ok := x.args[0].(*strExpr); ok && hashCommands[strings.ToUpper(name.v)] {
			cv.c.hashes = true
		}
		if name, ok := x.args[0].(*strExpr); ok && strings.HasPrefix(strings.ToUpper(name.v), "Z") {
			cv.c.zsets = true
		}
	}
	if !e.AdjustRet {
		return x, start, nil
	}
	// (f()): one pair of parentheses leaves the call its line, more give
	// it theirs.
	if at < start {
		return &parenExpr{x: x}, at, nil
	}
	return &parenExpr{x: x}, start - 1, nil
}

func (cv *conv) binary(op string, l, r ast.Expr, at int) (expr, int, error) {
	lx, start, err := cv.sub(l)
	if err != nil {
		return nil, 0, err
	}
	rx, rs, err := cv.expr(r)
	if err != nil {
		return nil, 0, err
	}
	return wrap(&binExpr{op: op, l: lx, r: rx, line: cv.line(rs - 1)}, at, start)
}

// unary converts a unary operator, the token before its operand: the parser
// gives it its operand's line.
func (cv *conv) unary(op string, operand ast.Expr, at int) (expr, int, error) {
	x, xs, err := cv.expr(operand)
	if err != nil {
		return nil, 0, err
	}
	return wrap(&unExpr{op: op, x: x, line: cv.line(xs - 1)}, at, xs-1)
}
