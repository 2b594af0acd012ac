package quorum

import (
	"os"
	"strings"
	"testing"
)

// TestPrimitiveChecklist is the engine's part of "How to add a primitive"
// (doc.go): every registered primitive has its entry in the table, its
// scripts, the section of the package doc that argues its safety, and a
// row of TestEverySubset.
func TestPrimitiveChecklist(t *testing.T) {
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
		if pr.doc == "" || !strings.Contains(string(doc), "\n// # "+pr.doc+"\n") {
			t.Errorf("%s: no section %q in the package doc (its safety argument)", p, pr.doc)
		}
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
