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
	"regexp"
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
	src  string
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
	return &Script{Name: name, Keys: keys, Args: args, src: assemble(preludeFuncs(), string(b))}
}

// preludeFunc is one function of prelude.lua: its name and its text (with
// the comment above it).
type preludeFunc struct {
	name, text string
}

var funcStart = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)

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
			if m := funcStart.FindStringSubmatch(l); m != nil {
				name = m[1]
			} else if !strings.HasPrefix(l, "--") {
				cur = cur[:0] // a blank line parts a comment from the next function
				continue
			}
		}
		cur = append(cur, l)
		if name != "" && strings.TrimRight(l, "\r\n") == "end" {
			out = append(out, preludeFunc{name: name, text: strings.Join(cur, "")})
			cur, name = nil, ""
		}
	}
	return out
}

// assemble puts before body the prelude functions it calls, and the ones
// those call, in the prelude's order.
func assemble(prelude []preludeFunc, body string) string {
	need := map[string]bool{}
	texts := []string{body}
	for changed := true; changed; {
		changed = false
		for _, f := range prelude {
			if need[f.name] {
				continue
			}
			for _, t := range texts {
				if calls(t, f.name) {
					need[f.name], changed = true, true
					texts = append(texts, f.text)
					break
				}
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

// calls reports whether text calls the function name (outside comments).
func calls(text, name string) bool {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_.:])` + regexp.QuoteMeta(name) + `\(`)
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(l), "local function "+name+"(") {
			continue
		}
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
