// Package scripts holds the Lua scripts the proxy runs on the masters, one
// file per operation, named <primitive>_<operation>.lua, and a typed
// descriptor for each: its name and its named KEYS and ARGV. quorum sends
// a script through its descriptor (Script.Check verifies the counts);
// quorum/redisnode loads every script and runs it with EVALSHA (EVAL on
// NOSCRIPT); the engine's unit tests run the same scripts on embedded
// masters, so the scripts themselves are what the tests exercise.
//
// Every script is atomic on its master, idempotent and token-checked: a
// resend can never report a false "taken" nor touch another owner's keys.
// A script may also have a plain form (Script.Plain, plain.go): the same
// operation as plain commands for the calls it covers, which redisnode
// sends instead of the script where it can (not to a cluster shard). A
// plain form is not atomic; each says why its answers keep the script's
// guarantees. lock_acquire of one resource has one.
//
// # Layout of a script
//
// A script file is its comment, then its header, then its body:
//
//   - The header binds every key and argument to a local of the
//     descriptor's name, in lines of the fixed form
//     "local a, b = KEYS[1], KEYS[2]" (ARGV likewise). A group of one key
//     per resource is bound to its offset ("local lock, fence = 0, n": the
//     body reads KEYS[lock + i], i = 1..n), after "local n = ..." that
//     computes the resources from #KEYS; a trailing group of any length to
//     its offset as well (the body reads ARGV[nonce + j] while it is not
//     nil).
//   - The body never reads KEYS or ARGV but through those names, and uses
//     every one of them.
//
// TestDescriptors runs each header on keys and arguments laid out from the
// descriptor and checks both, so that the descriptor, the header and what
// the body reads cannot disagree.
//
// # The prelude
//
// prelude.lua holds the functions several scripts share (the master's time,
// the lease high-water mark, the fence grant, the delete that folds a
// fence into the lagging bound, ...). A script is assembled as the prelude
// functions its body calls (and those they call), in the prelude's order,
// followed by the script file: a script pays for nothing it does not use.
// The SHA1 that EVALSHA uses is that of the assembled source.
package scripts

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Field is one named key or argument of a script.
type Field struct {
	// Name is the Lua local the script's header binds it to.
	Name string
	// Each: one per resource (the script's n, from its keys); else one.
	Each bool
	// Optional: may be left off. Only trailing fields are optional; an
	// optional Each field is all n or none.
	Optional bool
	// Rest: any number, none included; the last field only.
	Rest bool
}

// One is a single required field.
func One(name string) Field { return Field{Name: name} }

// Each is a field with one value per resource.
func Each(name string) Field { return Field{Name: name, Each: true} }

// Opt is a single field that may be left off.
func Opt(name string) Field { return Field{Name: name, Optional: true} }

// EachOpt is a per-resource field that may be left off as a whole.
func EachOpt(name string) Field { return Field{Name: name, Each: true, Optional: true} }

// Rest is a trailing field of any length.
func Rest(name string) Field { return Field{Name: name, Rest: true} }

// Script is one script's descriptor: the operation's name (the file name
// without ".lua"), its KEYS and its ARGV in order, and its assembled
// source.
type Script struct {
	Name string
	Keys []Field
	Args []Field
	// Merge says whether and how a call over resources in several hash
	// slots runs on a Redis Cluster (see Split); NoSplit for most.
	Merge Merge
	src   string
	// plain is the script's plain form, if it has one (see Plain).
	plain func(keys, args []string) *Step
}

// Source is the assembled script: the prelude functions it calls, then
// the file.
func (s *Script) Source() string { return s.src }

// String is the script's name.
func (s *Script) String() string { return s.Name }

// Check reports whether keys and args fit the descriptor: the keys give a
// number of resources n for which every field has its count. It checks
// counts, not values; a call that fails it would have the script read the
// wrong positions.
func (s *Script) Check(keys, args []string) error {
	n, ok := fit(s.Keys, len(keys), -1)
	if !ok {
		return fmt.Errorf("scripts: %s: %d keys do not fit %s", s.Name, len(keys), layout(s.Keys))
	}
	if _, ok := fit(s.Args, len(args), n); !ok {
		return fmt.Errorf("scripts: %s: %d arguments do not fit %s (n = %d)", s.Name, len(args), layout(s.Args), n)
	}
	return nil
}

// fit finds a number of resources n (the given one if n >= 0; 0 when no
// field is per resource) for which count values fit fields.
func fit(fields []Field, count, n int) (int, bool) {
	var one, each, opt, eachOpt int
	rest := false
	for _, f := range fields {
		switch {
		case f.Rest:
			rest = true
		case f.Each && f.Optional:
			eachOpt++
		case f.Each:
			each++
		case f.Optional:
			opt++
		default:
			one++
		}
	}
	lo, hi := n, n
	switch {
	case n >= 0:
	case each+eachOpt > 0:
		lo, hi = 1, count
	default:
		lo, hi = 0, 0
	}
	for m := lo; m <= hi; m++ {
		for k := 0; k <= opt; k++ {
			for j := 0; j <= eachOpt; j++ {
				c := one + each*m + k + j*m
				if c == count || rest && c <= count {
					return m, true
				}
			}
		}
	}
	return 0, false
}

// layout writes fields as "lock×n fence×n lag [channel×n] nonce...".
func layout(fields []Field) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		p := f.Name
		if f.Each {
			p += "×n"
		}
		if f.Rest {
			p += "..."
		}
		if f.Optional {
			p = "[" + p + "]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// define builds a descriptor and assembles its script; it panics if the
// file is missing (a programming error the package's tests catch).
func define(name string, keys, args []Field) *Script {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("scripts: %s: %v", name, err))
	}
	return &Script{Name: name, Keys: keys, Args: args, src: assemble(prelude, string(b))}
}

// prelude is prelude.lua's functions, split once: every define assembles
// from it. It is never written after package initialisation.
var prelude = preludeFuncs()

// preludeFunc is one function of prelude.lua: its name, its text (with
// the comment above it) and the functions its text calls.
type preludeFunc struct {
	name, text string
	calls      map[string]bool
}

// preludeFuncs splits prelude.lua into its functions. Each starts at a
// line "local function name(" (after its comment) and ends at the first
// line "end" at the margin.
func preludeFuncs() []preludeFunc {
	b, err := files.ReadFile("prelude.lua")
	if err != nil {
		panic(fmt.Sprintf("scripts: prelude: %v", err))
	}
	var out []preludeFunc
	var cur []string
	name := ""
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if name == "" {
			if n, ok := definedFunc(l); ok {
				name = n
			} else if !strings.HasPrefix(l, "--") {
				cur = cur[:0] // a blank line parts a comment from the next function
				continue
			}
		}
		cur = append(cur, l)
		if name != "" && strings.TrimRight(l, "\r\n") == "end" {
			text := strings.Join(cur, "")
			out = append(out, preludeFunc{name: name, text: text, calls: calledFuncs(text)})
			cur, name = nil, ""
		}
	}
	return out
}

// definedFunc reports the name a line "local function name(" defines.
func definedFunc(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "local function ")
	if !ok {
		return "", false
	}
	n := identLen(rest)
	if n == 0 || n >= len(rest) || rest[n] != '(' {
		return "", false
	}
	return rest[:n], true
}

// assemble puts before body the prelude functions it calls, and the ones
// those call, in the prelude's order.
func assemble(prelude []preludeFunc, body string) string {
	byName := make(map[string]*preludeFunc, len(prelude))
	for i := range prelude {
		byName[prelude[i].name] = &prelude[i]
	}
	need := map[string]bool{}
	todo := []map[string]bool{calledFuncs(body)}
	for len(todo) > 0 {
		called := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for name := range called {
			if f, ok := byName[name]; ok && !need[name] {
				need[name] = true
				todo = append(todo, f.calls)
			}
		}
	}
	var b strings.Builder
	for _, f := range prelude {
		if need[f.name] {
			b.WriteString(f.text)
		}
	}
	b.WriteString(body)
	return b.String()
}

// calledFuncs is the set of names text calls (outside comments): an
// identifier directly followed by "(", not after ".", ":" or another
// identifier character, and not the name a "local function" line
// defines.
func calledFuncs(text string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		t := strings.TrimSpace(l)
		if name, ok := definedFunc(t); ok {
			l = t[len("local function ")+len(name)+1:]
		}
		for i := 0; i < len(l); {
			n := identLen(l[i:])
			if n == 0 || l[i] >= '0' && l[i] <= '9' {
				i++
				continue
			}
			prev := byte(' ')
			if i > 0 {
				prev = l[i-1]
			}
			if i+n < len(l) && l[i+n] == '(' && prev != '.' && prev != ':' && !isIdent(prev) {
				out[l[i:i+n]] = true
			}
			i += n
		}
	}
	return out
}

// identLen is the length of the identifier s starts with (0 if none).
func identLen(s string) int {
	n := 0
	for n < len(s) && isIdent(s[n]) {
		n++
	}
	return n
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
