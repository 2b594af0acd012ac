package tests

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The pages whose redis-cli sessions the test types, in this order: the
// README's walkthrough, then the examples of each command family that
// moved from the README to docs/commands.md.
var readmePages = []string{"README.md", "docs/commands.md"}

// A step of a redis-cli session in the README (or a page of readmePages):
// a command typed at the prompt and the reply lines shown under it.
type readmeStep struct {
	file    string // the page, as in readmePages
	block   int    // which console block of the page, from 1
	line    int    // the command's line in the page
	command string // without the prompt and comment
	comment string // the command's comment, if any
	reply   []string
}

var (
	cliPrompt = "127.0.0.1:6380> "
	// A comment: blanks, then "# ", after something else on the line.
	cliComment = regexp.MustCompile(`^(.*?\S)\s+#\s?(.*)$`)
	// A step whose comment says "N seconds later" is typed N seconds after
	// the one before: the session's expiry step.
	cliLater = regexp.MustCompile(`(\d+) seconds? later`)
)

// readmeSessions returns the redis-cli steps of one page's console blocks
// (file is relative to the repository's root).
func readmeSessions(t *testing.T, file string) []readmeStep {
	t.Helper()
	f, err := os.Open("../" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []readmeStep
	in, block := false, 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case !in && l == "```console":
			in = true
			block++
		case in && l == "```":
			in = false
		case !in, strings.HasPrefix(l, "$ "):
		case strings.HasPrefix(l, cliPrompt):
			st := readmeStep{file: file, block: block, line: n, command: strings.TrimPrefix(l, cliPrompt)}
			if m := cliComment.FindStringSubmatch(st.command); m != nil {
				st.command, st.comment = m[1], m[2]
			}
			steps = append(steps, st)
		default:
			if m := cliComment.FindStringSubmatch(l); m != nil {
				l = m[1]
			}
			if strings.TrimSpace(l) == "" {
				t.Fatalf("%s:%d: a line with no reply under a command (say what redis-cli shows)", file, n)
			}
			if len(steps) == 0 || steps[len(steps)-1].block != block {
				t.Fatalf("%s:%d: a reply before any command of its block", file, n)
			}
			steps[len(steps)-1].reply = append(steps[len(steps)-1].reply, strings.TrimRight(l, " "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

var (
	cliElem    = regexp.MustCompile(`^(\s*(?:\d+\) )*)(.*)$`)
	cliToken   = regexp.MustCompile(`^"([0-9a-f]{32}|[0-9a-f]{2,31}\.\.\.)"$`)
	cliHexTok  = regexp.MustCompile(`^"[0-9a-f]{32}"$`)
	cliInteger = regexp.MustCompile(`^\(integer\) (-?\d+)$`)
)

// TestReadmeSession types every redis-cli session of README.md's console
// blocks ("Thirty seconds with redis-cli"), then of docs/commands.md's
// (the examples of each command family), into the real redis-cli against
// a proxy started as `make run` starts it (--dev), in order, and checks
// each reply against what the page shows:
// the same lines, with tokens matched as tokens (and carried into the
// commands that name them), integers of 100 or more (validities, ttls)
// within 5%, small integers exactly at top level and as positive
// integers inside an array (fences), strings and nil exactly, and INFO's
// fields by name. The walkthrough includes an expiry: a lock nobody
// releases is free again once its ttl has passed.
func TestReadmeSession(t *testing.T) {
	waits(t) // mostly waits (expiries, quarantines, restarts): overlaps the other waiting tests
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-cli not found and CI=true (it comes with redis-server)")
		}
		t.Skip("SKIPPED: redis-cli not found (apt-get install -y redis-server brings it)")
	}
	var steps []readmeStep
	for _, file := range readmePages {
		s := readmeSessions(t, file)
		if len(s) == 0 {
			t.Fatalf("no redis-cli step found in %s's console blocks", file)
		}
		steps = append(steps, s...)
	}
	if len(steps) < 10 {
		t.Fatalf("only %d redis-cli steps found in the console blocks of %s", len(steps), strings.Join(readmePages, ", "))
	}
	addr, _ := startDev(t, "--metrics-listen", "off")
	host, port, _ := strings.Cut(addr, ":")
	tokens := map[string]string{} // the README's token (or its abbreviation) -> the real one
	expired := false
	for _, st := range steps {
		if m := cliLater.FindStringSubmatch(st.comment); m != nil {
			s, _ := strconv.Atoi(m[1])
			time.Sleep(time.Duration(s) * time.Second)
			expired = true
		}
		args := []string{"--no-raw", "-h", host, "-p", port}
		for _, a := range strings.Fields(st.command) {
			if real, ok := tokens[a]; ok {
				a = real
			}
			args = append(args, a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s:%d: redis-cli %s: %v\n%s", st.file, st.line, st.command, err, out)
		}
		got := strings.Split(strings.TrimRight(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n"), "\n")
		if st.reply == nil {
			t.Fatalf("%s:%d: %s shows no reply; redis-cli shows:\n%s", st.file, st.line, st.command, out)
		}
		if strings.HasPrefix(st.command, "INFO") {
			checkInfo(t, st, got)
			continue
		}
		if len(got) != len(st.reply) {
			t.Fatalf("%s:%d: %s: redis-cli shows %d lines, the page %d:\n%s", st.file, st.line, st.command, len(got), len(st.reply), out)
		}
		for i, want := range st.reply {
			wm, gm := cliElem.FindStringSubmatch(want), cliElem.FindStringSubmatch(got[i])
			if wm[1] != gm[1] {
				t.Fatalf("%s:%d: %s: line %d is %q, the page shows %q", st.file, st.line, st.command, i+1, got[i], want)
			}
			if err := matchValue(wm[2], gm[2], wm[1] != "", tokens); err != "" {
				t.Fatalf("%s:%d: %s: line %d is %q, the page shows %q: %s", st.file, st.line, st.command, i+1, got[i], want, err)
			}
		}
	}
	if !expired {
		t.Fatal(`no step of the sessions waits for an expiry (a comment saying "N seconds later")`)
	}
}

// matchValue compares one reply value redis-cli showed with the README's,
// and says why they differ ("" if they match).
func matchValue(want, got string, inArray bool, tokens map[string]string) string {
	if m := cliToken.FindStringSubmatch(want); m != nil {
		if !cliHexTok.MatchString(got) {
			return "want a token"
		}
		tokens[m[1]] = strings.Trim(got, `"`)
		return ""
	}
	if m := cliInteger.FindStringSubmatch(want); m != nil {
		g := cliInteger.FindStringSubmatch(got)
		if g == nil {
			return "want an integer"
		}
		w, _ := strconv.ParseInt(m[1], 10, 64)
		v, _ := strconv.ParseInt(g[1], 10, 64)
		switch {
		case w >= 100:
			if v < w*95/100 || v > w*105/100 {
				return "not within 5%"
			}
		case inArray && w > 0:
			if v < 1 {
				return "want a positive integer"
			}
		case v != w:
			return "a different integer"
		}
		return ""
	}
	if want != got {
		return "different"
	}
	return ""
}

// checkInfo compares an INFO reply with the README's lines: the same
// section header, the same fields, and for master lines the README's
// attribute names in the README's order.
func checkInfo(t *testing.T, st readmeStep, got []string) {
	t.Helper()
	fields := map[string]string{}
	for _, l := range got {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = v
		}
	}
	names := func(v string) []string {
		var ns []string
		for _, kv := range strings.Split(v, ",") {
			k, _, _ := strings.Cut(kv, "=")
			ns = append(ns, k)
		}
		return ns
	}
	for _, want := range st.reply {
		if strings.HasPrefix(want, "#") {
			if got[0] != want {
				t.Fatalf("%s:%d: %s begins %q, the page shows %q", st.file, st.line, st.command, got[0], want)
			}
			continue
		}
		k, wv, _ := strings.Cut(want, ":")
		gv, ok := fields[k]
		switch {
		case !ok:
			t.Fatalf("%s:%d: %s has no %s:\n%s", st.file, st.line, st.command, k, strings.Join(got, "\n"))
		case strings.Contains(wv, "="):
			// The README's fields, in its order (fields added since may
			// sit between them).
			w, g := names(wv), names(gv)
			j := 0
			for _, n := range g {
				if j < len(w) && n == w[j] {
					j++
				}
			}
			if j < len(w) {
				t.Fatalf("%s:%d: %s: %s has fields %s, the page shows %s", st.file, st.line, st.command, k, strings.Join(g, ","), strings.Join(w, ","))
			}
		case wv != gv:
			t.Fatalf("%s:%d: %s: %s:%s, the page shows %s:%s", st.file, st.line, st.command, k, gv, k, wv)
		}
	}
}
