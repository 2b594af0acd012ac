package scripts

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// TestDescriptors checks every descriptor against its script: the header
// binds exactly the descriptor's names, each to the position the
// descriptor gives it (run on keys and arguments laid out from the
// descriptor, for several resource counts, with and without the optional
// fields), and the body reads KEYS and ARGV only through those names and
// uses each of them.
func TestDescriptors(t *testing.T) {
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			for _, err := range checkScript(s, fileText(t, s.Name)) {
				t.Error(err)
			}
		})
	}
}

// TestDescriptorsCatchMismatch shows that the check fails on a descriptor
// that does not match its script: a missing, an extra, a renamed or a
// misplaced field, or a single field where the script has a group. (Whether
// a trailing field is optional is the descriptor's word: a script reads an
// absent one as nil.)
func TestDescriptorsCatchMismatch(t *testing.T) {
	swap := func(fs []Field, i, j int) []Field {
		out := slices.Clone(fs)
		out[i], out[j] = out[j], out[i]
		return out
	}
	rows := []struct {
		name string
		s    *Script
		want string // in one of the errors
		// edit changes the script's text (nil: as it is).
		edit func(string) string
	}{
		{"argument missing", &Script{Name: "lock_acquire", Keys: LockAcquire.Keys, Args: LockAcquire.Args[:3]}, "lagms", nil},
		{"argument extra", &Script{Name: "lock_acquire", Keys: LockAcquire.Keys, Args: append(slices.Clone(LockAcquire.Args), One("markttl"))}, "markttl", nil},
		{"key renamed", &Script{Name: "rw_release", Keys: []Field{One("lock"), One("holders")}, Args: RWRelease.Args}, "holders", nil},
		{"keys swapped", &Script{Name: "lock_info", Keys: swap(LockInfo.Keys, 0, 1), Args: nil}, "lock", nil},
		{"groups swapped", &Script{Name: "lock_extend", Keys: swap(LockExtend.Keys, 0, 1), Args: LockExtend.Args}, "lock", nil},
		{"group as one", &Script{Name: "lock_delete", Keys: []Field{One("lock"), One("fence"), One("lag")}, Args: LockDelete.Args}, "lock", nil},
		{"group misplaced", &Script{Name: "lock_acquire_nx", Keys: []Field{Each("lock"), Each("fence"), Each("owner"), One("lag"), One("seq"), One("lease")}, Args: LockAcquireNX.Args}, "owner", nil},
		{"rest missing", &Script{Name: "sem_acquire", Keys: SemAcquire.Keys, Args: SemAcquire.Args[:5]}, "exact", nil},
		{"body reads a bare key", LockInfo, `reads "KEYS[4]`, func(src string) string { return src + "redis.call('GET', KEYS[4])\n" }},
		{"body reads a group by number", LockRelease, `reads "ARGV[2]`, func(src string) string { return src + "redis.call('GET', ARGV[2])\n" }},
		{"name bound, not used", LockOwner, "does not use owner", func(src string) string {
			return strings.Replace(src, "redis.call('GET', owner)", "''", 1)
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			src := fileText(t, r.s.Name)
			if r.edit != nil {
				src = r.edit(src)
			}
			errs := checkScript(r.s, src)
			if len(errs) == 0 {
				t.Fatalf("no error for a wrong descriptor of %s", r.s.Name)
			}
			if !strings.Contains(fmt.Sprint(errs), r.want) {
				t.Fatalf("errors %v do not name %q", errs, r.want)
			}
		})
	}
}

// TestEveryFileDescribed: every script file has exactly one descriptor, and
// every assembled script parses.
func TestEveryFileDescribed(t *testing.T) {
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("%s: two descriptors", s.Name)
		}
		seen[s.Name] = true
		if ByName(s.Name) != s {
			t.Errorf("ByName(%q) is not its descriptor", s.Name)
		}
		if _, err := parse.Parse(strings.NewReader(s.Source()), s.Name); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	for _, n := range names {
		name := strings.TrimSuffix(n, ".lua")
		if name != "prelude" && !seen[name] {
			t.Errorf("%s has no descriptor", n)
		}
	}
}

// TestPrelude: a script gets the prelude functions it calls and those they
// call, and no other; the prelude reads KEYS only at offsets it is given.
func TestPrelude(t *testing.T) {
	has := func(s *Script, f string) bool { return strings.Contains(s.Source(), "local function "+f+"(") }
	rows := []struct {
		s        *Script
		with     []string
		without  []string
		wantBody string
	}{
		{LockAcquire, []string{"grant", "raise", "time_ms"}, []string{"wait_check", "promote", "fair_clean", "fair_place", "drop", "extend"}, ""},
		{LockAcquireWait, []string{"grant", "raise", "time_ms", "wait_check", "promote"}, []string{"fair_clean", "fair_place"}, ""},
		{LockAcquireFair, []string{"grant", "wait_check", "promote", "fair_clean", "fair_place"}, []string{"drop", "extend"}, ""},
		{LockRelease, []string{"readers_left", "time_ms"}, []string{"raise", "grant", "drop"}, ""},
		{BusPublish, nil, []string{"time_ms", "raise"}, ""},
	}
	for _, r := range rows {
		for _, f := range r.with {
			if !has(r.s, f) {
				t.Errorf("%s: no %s in the assembled script", r.s.Name, f)
			}
		}
		for _, f := range r.without {
			if has(r.s, f) {
				t.Errorf("%s: %s assembled in, unused", r.s.Name, f)
			}
		}
		if !strings.HasSuffix(r.s.Source(), fileText(t, r.s.Name)) {
			t.Errorf("%s: the assembled script does not end with the file", r.s.Name)
		}
	}
	b, err := files.ReadFile("prelude.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bareAccess(stripComments(string(b)), func(string, string) bool { return true }, nil) {
		t.Errorf("prelude: %s", e)
	}
	if len(preludeFuncs()) < 8 {
		t.Errorf("prelude split into %d functions", len(preludeFuncs()))
	}
}

// TestCheck: the counts a descriptor accepts.
func TestCheck(t *testing.T) {
	mk := func(n int) []string { return make([]string, n) }
	rows := []struct {
		s          *Script
		keys, args int
		ok         bool
	}{
		{LockAcquire, 5, 4, true},  // n = 1
		{LockAcquire, 7, 4, true},  // n = 2
		{LockAcquire, 6, 4, false}, // no n fits
		{LockAcquire, 5, 6, false}, // the waiting writer's arguments
		{LockAcquire, 8, 6, false}, // the waiting writer's keys
		{LockAcquireWait, 8, 6, true},
		{LockAcquireFair, 10, 9, true},
		{LockRelease, 4, 1, true},  // n = 1, no queue, no channel
		{LockRelease, 5, 2, true},  // n = 1, queue, channel
		{LockRelease, 8, 3, true},  // n = 2, channels
		{LockRelease, 8, 2, false}, // one channel for two resources
		{LockRelease, 3, 1, false}, // without the holds
		{LockFence, 3, 3, true},
		{LockFence, 3, 2, false},
		{LockDeleteExact, 5, 2, true},
		{LockDeleteExact, 5, 5, true},
		{LockDeleteExact, 5, 1, false},
		{LockDeleteExact, 4, 2, false},
		{SemAcquire, 5, 8, true},  // search
		{SemAcquire, 5, 10, true}, // exact slots
		{SemAcquire, 3, 5, false}, // without the queue
		{SemRelease, 2, 1, true},
		{SemRelease, 2, 3, true},
		{SemRelease, 2, 4, false},
		{BusPublish, 0, 2, true},
		{BusPublish, 1, 2, false},
	}
	for _, r := range rows {
		err := r.s.Check(mk(r.keys), mk(r.args))
		if (err == nil) != r.ok {
			t.Errorf("%s.Check(%d keys, %d args) = %v, want ok %v", r.s.Name, r.keys, r.args, err, r.ok)
		}
	}
}

func fileText(t *testing.T, name string) string {
	t.Helper()
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var headerLine = regexp.MustCompile(`^local ([a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*) = (.+)$`)

// checkScript returns every way in which the script text src disagrees with
// the descriptor s.
func checkScript(s *Script, src string) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(s.Name+": "+format, a...)) }
	lines := strings.Split(src, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "--") {
		i++
	}
	var header []string
	for ; i < len(lines) && lines[i] != ""; i++ {
		header = append(header, lines[i])
	}
	body := strings.Join(lines[i:], "\n")
	if len(header) == 0 {
		fail("no header (the lines after the comment, up to a blank line)")
		return errs
	}

	// The header binds exactly the descriptor's names (and n when there
	// is a group per resource), in the fixed form.
	bound := map[string]bool{}
	for _, l := range header {
		m := headerLine.FindStringSubmatch(l)
		if m == nil || strings.Contains(m[2], "redis.") || strings.Contains(m[2], "function") {
			fail("header line not of the form `local a, b = KEYS[..], ARGV[..]`: %q", l)
			continue
		}
		for _, name := range strings.Split(m[1], ", ") {
			bound[name] = true
		}
	}
	perResource := false
	want := map[string]bool{}
	for _, f := range slices.Concat(s.Keys, s.Args) {
		want[f.Name] = true
		perResource = perResource || f.Each
	}
	if perResource {
		want["n"] = true
	}
	for name := range want {
		if !bound[name] {
			fail("the header does not bind %s", name)
		}
	}
	for name := range bound {
		if !want[name] {
			fail("the header binds %s, which the descriptor does not name", name)
		}
	}

	// Run the header on keys and arguments laid out from the descriptor:
	// each name must come out as the value at its position.
	ns := []int{0}
	if perResource {
		ns = []int{1, 2, 3}
	}
	for _, n := range ns {
		for _, full := range []bool{true, false} {
			errs = append(errs, runHeader(s, strings.Join(header, "\n"), n, full)...)
		}
	}

	// The body reads KEYS and ARGV only through the names, and uses every
	// name.
	code := stripComments(body)
	groups := func(list []Field) map[string]bool {
		out := map[string]bool{}
		for _, f := range list {
			if f.Each || f.Rest {
				out[f.Name] = true
			}
		}
		return out
	}
	rests := map[string]bool{}
	for _, f := range slices.Concat(s.Keys, s.Args) {
		if f.Rest {
			rests[f.Name] = true
		}
	}
	kg, ag := groups(s.Keys), groups(s.Args)
	for _, e := range bareAccess(code, func(arr, name string) bool {
		if arr == "KEYS" {
			return kg[name]
		}
		return ag[name]
	}, rests) {
		fail("body: %s", e)
	}
	for name := range want {
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(code) {
			fail("the body does not use %s", name)
		}
	}
	return errs
}

// stripComments drops Lua line comments.
func stripComments(code string) string {
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		if j := strings.Index(l, "--"); j >= 0 {
			lines[i] = l[:j]
		}
	}
	return strings.Join(lines, "\n")
}

var (
	anyAccess   = regexp.MustCompile(`#?\b(KEYS|ARGV)\b`)
	groupAccess = regexp.MustCompile(`^(KEYS|ARGV)\[([a-z_][a-z0-9_]*) \+ `)
	restCount   = regexp.MustCompile(`^#(KEYS|ARGV) - ([a-z_][a-z0-9_]*)\b`)
)

// bareAccess lists the reads of KEYS or ARGV in code that are not
// KEYS[g + ...] / ARGV[g + ...] with ok(array, g), nor #ARGV - r for a
// trailing group r in rest.
func bareAccess(code string, ok func(arr, name string) bool, rest map[string]bool) []string {
	var out []string
	for _, loc := range anyAccess.FindAllStringIndex(code, -1) {
		at := code[loc[0]:]
		if m := groupAccess.FindStringSubmatch(at); m != nil && ok(m[1], m[2]) {
			continue
		}
		if m := restCount.FindStringSubmatch(at); m != nil && rest[m[2]] {
			continue
		}
		end := min(len(at), 24)
		if i := strings.IndexByte(at[:end], '\n'); i >= 0 {
			end = i
		}
		out = append(out, fmt.Sprintf("reads %q, not through a named key or argument", at[:end]))
	}
	return out
}

// runHeader runs the header with n resources, the optional and trailing
// fields present (full) or left off, and checks what each name holds.
func runHeader(s *Script, header string, n int, full bool) []error {
	var errs []error
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s (n=%d, optional fields %v): "+format, append([]any{s.Name, n, full}, a...)...))
	}
	const restLen = 2
	layout := func(list []Field) []string {
		var out []string
		for _, f := range list {
			switch {
			case f.Optional && !full, f.Rest && !full:
			case f.Each:
				for i := 1; i <= n; i++ {
					out = append(out, fmt.Sprintf("%s#%d", f.Name, i))
				}
			case f.Rest:
				for j := 1; j <= restLen; j++ {
					out = append(out, fmt.Sprintf("%s#%d", f.Name, j))
				}
			default:
				out = append(out, f.Name)
			}
		}
		return out
	}
	keys, args := layout(s.Keys), layout(s.Args)
	// Each check is a Lua expression after the header and the value it
	// must have ("" for nil).
	type check struct{ expr, want string }
	var checks []check
	add := func(arr string, f Field) {
		present := full || !f.Optional && !f.Rest
		switch {
		case f.Each:
			for i := 1; i <= n; i++ {
				w := ""
				if present {
					w = fmt.Sprintf("%s#%d", f.Name, i)
				}
				checks = append(checks, check{fmt.Sprintf("%s[%s + %d]", arr, f.Name, i), w})
			}
		case f.Rest:
			m := 0
			if present {
				m = restLen
			}
			checks = append(checks, check{fmt.Sprintf("tostring(#%s - %s)", arr, f.Name), fmt.Sprint(m)})
			for j := 1; j <= m; j++ {
				checks = append(checks, check{fmt.Sprintf("%s[%s + %d]", arr, f.Name, j), fmt.Sprintf("%s#%d", f.Name, j)})
			}
		default:
			w := ""
			if present {
				w = f.Name
			}
			checks = append(checks, check{f.Name, w})
		}
	}
	for _, f := range s.Keys {
		add("KEYS", f)
	}
	for _, f := range s.Args {
		add("ARGV", f)
	}
	L := lua.NewState()
	defer L.Close()
	strs := func(v []string) *lua.LTable {
		t := L.NewTable()
		for _, x := range v {
			t.Append(lua.LString(x))
		}
		return t
	}
	L.SetGlobal("KEYS", strs(keys))
	L.SetGlobal("ARGV", strs(args))
	for _, c := range checks {
		if err := L.DoString(header + "\nreturn " + c.expr); err != nil {
			fail("%s: %v", c.expr, err)
			continue
		}
		v := L.Get(-1)
		L.Pop(1)
		got := ""
		if v != lua.LNil {
			got = v.String()
		}
		if got != c.want {
			fail("%s is %q, want %q", c.expr, got, c.want)
		}
	}
	if err := s.Check(keys, args); err != nil {
		fail("Check: %v", err)
	}
	return errs
}
