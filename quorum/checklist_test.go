package quorum

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrimitiveChecklist is the engine's part of "How to add a primitive"
// (doc.go): every registered primitive has its entry in the table, its
// scripts, the design file that argues its safety (docs/design/<file>.md,
// with a top-level heading, listed in the package doc's index), and a row
// of TestEverySubset.
func TestPrimitiveChecklist(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[Primitive]bool{}
	for _, r := range subsetRows() {
		rows[r.primitive] = true
	}
	table := primitives()
	listed := map[Primitive]bool{}
	for _, p := range Primitives() {
		listed[p] = true
		pr, ok := table[p]
		if !ok {
			t.Errorf("%s: no entry in primitives (api.go)", p)
			continue
		}
		if pr.info == nil || pr.ops[3] == "" {
			t.Errorf("%s: no info verb and operation name", p)
		}
		if (pr.acquire != nil) != (pr.release != nil) || (pr.acquire != nil) != (pr.extend != nil) || (pr.acquire != nil) != (pr.abandon != nil) {
			t.Errorf("%s: acquire, release, extend and abandon go together", p)
		}
		if pr.acquire != nil && (pr.ops[0] == "" || pr.ops[1] == "" || pr.ops[2] == "") {
			t.Errorf("%s: a verb has no operation name (metrics)", p)
		}
		if len(pr.scripts) == 0 {
			t.Errorf("%s: no scripts", p)
		}
		for _, s := range pr.scripts {
			if _, ok := luaScripts[s.Name]; !ok {
				t.Errorf("%s: script %q is not in quorum/scripts", p, s)
			}
		}
		checkDesignFile(t, p, pr.doc, string(doc))
		if !rows[p] {
			t.Errorf("%s: no row in TestEverySubset (subsetRows)", p)
		}
	}
	for p := range table {
		if !listed[p] {
			t.Errorf("%s is in primitives but not in Primitives()", p)
		}
	}
}

// TestSharedTryKnowsNoFlavour: the one try every lock-like primitive goes
// through (attempt), and the acquire loop around it, name no primitive's
// own script or try: a primitive brings those in its flavour (shape), in
// its own file, so that adding one never edits the shared loop.
func TestSharedTryKnowsNoFlavour(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	shared := map[string]bool{"attempt": true, "acquireLoop": true, "retry": true}
	plain := map[string]bool{"LockAcquire": true, "LockRelease": true, "LockFence": true}
	flavours := map[string]string{} // type name -> file
	found := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "shape" {
				continue
			}
			var recv string
			switch x := fd.Recv.List[0].Type.(type) {
			case *ast.Ident:
				recv = x.Name
			case *ast.StarExpr:
				recv = x.X.(*ast.Ident).Name
			}
			flavours[recv] = fset.Position(fd.Pos()).Filename
		}
	}
	if len(flavours) < 5 {
		t.Fatalf("found %d flavours (%v): the test no longer sees them", len(flavours), flavours)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !shared[fd.Name.Name] {
				continue
			}
			found[fd.Name.Name] = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "scripts" && !plain[x.Sel.Name] {
						t.Errorf("%s names scripts.%s: a primitive's own script belongs in its flavour", fd.Name.Name, x.Sel.Name)
					}
				case *ast.Ident:
					if file, ok := flavours[x.Name]; ok {
						t.Errorf("%s names the flavour %s (%s): the shared try must not know it", fd.Name.Name, x.Name, file)
					}
				}
				return true
			})
		}
	}
	for name := range shared {
		if !found[name] {
			t.Errorf("no method %s: update the test", name)
		}
	}
}

// checkDesignFile checks that file, a primitive's doc in primitives, is a
// Markdown file under docs/design (a path from the repository's root)
// that exists, opens with a top-level heading that names something, and
// is listed in the package doc (doc, doc.go's text).
func checkDesignFile(t *testing.T, p Primitive, file, doc string) {
	t.Helper()
	if !strings.HasPrefix(file, "docs/design/") || !strings.HasSuffix(file, ".md") || strings.Contains(file, "..") {
		t.Errorf("%s: doc %q is not a docs/design/<file>.md path (its safety argument)", p, file)
		return
	}
	text, err := os.ReadFile("../" + file)
	if err != nil {
		t.Errorf("%s: no design file %s (its safety argument): %v", p, file, err)
		return
	}
	first, _, _ := strings.Cut(string(text), "\n")
	if heading, ok := strings.CutPrefix(first, "# "); !ok || strings.TrimSpace(heading) == "" {
		t.Errorf("%s: %s does not open with a top-level heading (\"# <Topic>\")", p, file)
	}
	if !strings.Contains(doc, "//   - "+file+":") {
		t.Errorf("%s: %s is not listed in the package doc's index (doc.go, \"Design documents\")", p, file)
	}
}

// TestValueOptions: a pointer to a primitive's options is taken as what
// it points to (the accessors read values), a nil one is a bad request.
func TestValueOptions(t *testing.T) {
	t.Parallel()
	var nilLock *LockOptions
	for _, tc := range []struct {
		in      PrimitiveOptions
		want    PrimitiveOptions
		wantErr bool
	}{
		{nil, nil, false},
		{LockOptions{Reentrant: true}, LockOptions{Reentrant: true}, false},
		{&LockOptions{Reentrant: true}, LockOptions{Reentrant: true}, false},
		{&SemaphoreOptions{Limit: 2, Count: 1}, SemaphoreOptions{Limit: 2, Count: 1}, false},
		{&ElectionOptions{Value: "v"}, ElectionOptions{Value: "v"}, false},
		{nilLock, nil, true},
	} {
		got, err := valueOptions(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("valueOptions(%#v) = %#v, %v; want %#v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
