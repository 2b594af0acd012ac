package commands

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/luashape"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// maxCachedScripts bounds the scripts drop-in mode remembers by SHA1 (for
// EVALSHA and SCRIPT EXISTS), recognised or refused: the oldest is
// forgotten first, and an EVALSHA of it answers NOSCRIPT, on which every
// client sends the script again, as after Redis's SCRIPT FLUSH.
const maxCachedScripts = 1024

// DeclaredScript is a script an operator declared (config dropin_scripts)
// because the recogniser cannot place it: its SHA1 and its shape.
type DeclaredScript struct {
	// SHA1 is the script's SHA1, lower-case hex.
	SHA1 string
	// Declaration says which KEYS and ARGV hold the key, value and ttl.
	Declaration luashape.Declaration
}

// script is one script drop-in mode has seen: its shape, or why it was
// refused.
type script struct {
	shape   *luashape.Shape
	refused *proxy.Error
	// near is the lock operation a refused script reads as ("" when its
	// effects name none); reason is the recogniser's refusal.
	sha    string
	near   luashape.Kind
	reason string
	// runs counts its EVAL and EVALSHA, refused ones included (SCRIPT LIST).
	runs atomic.Int64
	// by are the tenants (proxy.Session.Tenant) that sent it (EVAL,
	// SCRIPT LOAD), "" for a session that sees the whole proxy: a tenant
	// finds by SHA1 only the scripts it sent, so that EVALSHA and SCRIPT
	// EXISTS tell it nothing of another's. Under dropin.mu; nil for a
	// declared script, which every session finds.
	by map[string]bool
}

// dropin serves drop-in mode's scripts. A script is recognised by what it
// does (internal/luashape), never by its bytes, or declared by the
// operator; it runs as the quorum operation of its shape and answers what
// it would have answered on one Redis. Client Lua never runs on the
// masters.
type dropin struct {
	eng Engine
	k   *keeper
	lim Limits

	declared map[string]*script // by SHA1; never forgotten

	mu    sync.Mutex
	seen  map[string]*script // by SHA1, at most maxCachedScripts
	order []string           // SHA1s in the order first seen, for eviction

	runs sync.Map // luashape.Kind -> *atomic.Int64, for INFO

	grants   dropinGrants
	refusals atomic.Int64 // EVAL and EVALSHA refused, for INFO
	heldRefs atomic.Int64 // of them, those naming a lock a client holds
}

// dropinGrants are the locks drop-in scripts took through this proxy and
// whose validity has not ended: by key, the holder's value and the end of
// its validity (local clock). A refused script that names one of them with
// the holder's value among its arguments is that holder's extend or
// release, and its error says so. Entries go when released, when their
// validity ends (swept as the map grows), so the map holds no more than
// the drop-in locks live on this proxy.
type dropinGrants struct {
	mu    sync.Mutex
	m     map[string]dropinGrant
	sweep int // sweep expired entries when the map reaches this size
}

type dropinGrant struct {
	value string
	until time.Time
}

// add records keys held with value until until.
func (g *dropinGrants) add(keys []string, value string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]dropinGrant{}
	}
	if len(g.m) >= g.sweep {
		now := time.Now()
		for k, x := range g.m {
			if !x.until.After(now) {
				delete(g.m, k)
			}
		}
		g.sweep = max(64, 2*len(g.m))
	}
	for _, k := range keys {
		g.m[k] = dropinGrant{value: value, until: until}
	}
}

// remove forgets the keys that value held.
func (g *dropinGrants) remove(keys []string, value string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		if x, ok := g.m[k]; ok && x.value == value {
			delete(g.m, k)
		}
	}
}

// removeAny forgets keys whatever value held them.
func (g *dropinGrants) removeAny(keys []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		delete(g.m, k)
	}
}

// holder finds, among keys, one held (validity not ended at now) with a
// value that is one of argv.
func (g *dropinGrants) holder(keys, argv []string, now time.Time) (key string, left time.Duration, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		x, found := g.m[k]
		if found && x.until.After(now) && slices.Contains(argv, x.value) {
			return k, x.until.Sub(now), true
		}
	}
	return "", 0, false
}

// newDropin serves drop-in mode; a declaration that luashape.Declare
// refuses is left out (the configuration is checked with it at start).
func newDropin(eng Engine, k *keeper, lim Limits) *dropin {
	d := &dropin{eng: eng, k: k, lim: lim, declared: map[string]*script{}, seen: map[string]*script{}}
	for _, ds := range lim.DropinDeclared {
		if s, err := luashape.Declare(ds.Declaration); err == nil {
			sha := strings.ToLower(ds.SHA1)
			d.declared[sha] = &script{sha: sha, shape: s}
		}
	}
	return d
}

// DropinUnknown is drop-in mode's error for a command it does not serve.
func DropinUnknown(args [][]byte) *proxy.Error {
	name := args[0][:min(len(args[0]), 64)]
	return proxy.Errorf("drop-in mode serves lock operations only: '%s' is not one (see docs/PROTOCOL.md, Drop-in mode)", name)
}

var (
	errNoScript    = &proxy.Error{Code: "NOSCRIPT", Msg: "No matching script. Please use EVAL."}
	errNumkeysNeg  = proxy.Errorf("Number of keys can't be negative")
	errNumkeysMany = proxy.Errorf("Number of keys can't be greater than number of args")
)

func shaOf(src []byte) string {
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// lookup recognises src (or finds it already seen or declared), sent by
// tenant ("" for a session that sees the whole proxy).
func (d *dropin) lookup(src []byte, tenant string) (string, *script) {
	sha := shaOf(src)
	if s := d.declared[sha]; s != nil {
		return sha, s
	}
	d.mu.Lock()
	old := d.seen[sha]
	if old != nil {
		old.by[tenant] = true
	}
	d.mu.Unlock()
	if old != nil {
		return sha, old
	}
	s := &script{sha: sha, by: map[string]bool{tenant: true}}
	shape, err := luashape.Recognise(src)
	if err != nil {
		s.near, s.reason = luashape.Near(err), oneLine(err.Error())
		s.refused = proxy.Errorf("drop-in: script %s is not a lock operation the proxy can run on a quorum (%s%s) (see docs/dropin.md, Refused scripts)", sha, readAs(s.near), s.reason)
	} else {
		s.shape = shape
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.seen[sha]; old != nil {
		old.by[tenant] = true
		return sha, old
	}
	if s.refused != nil && d.lim.Log != nil {
		d.lim.Log.Warn("drop-in: a script was refused: a library sending it gets an error instead of its lock operation (SCRIPT LIST shows every script seen; see docs/dropin.md, Refused scripts)",
			"sha1", sha, "reads_as", cmp.Or(string(s.near), "unknown"), "reason", s.reason)
	}
	if len(d.order) >= maxCachedScripts {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	d.seen[sha] = s
	d.order = append(d.order, sha)
	return sha, s
}

// bySHA finds a declared script, or a seen one that tenant sent (any
// seen one for "", a session that sees the whole proxy).
func (d *dropin) bySHA(sha, tenant string) *script {
	sha = strings.ToLower(sha)
	if s := d.declared[sha]; s != nil {
		return s
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.seen[sha]
	if s == nil || tenant != "" && !s.by[tenant] {
		return nil
	}
	return s
}

// flush forgets the scripts seen (SCRIPT FLUSH); declared ones stay. A
// tenant's flush forgets only that it sent them: another's stay.
func (d *dropin) flush(tenant string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if tenant == "" {
		d.seen, d.order = map[string]*script{}, nil
		return
	}
	kept := d.order[:0]
	for _, sha := range d.order {
		s := d.seen[sha]
		delete(s.by, tenant)
		if len(s.by) == 0 {
			delete(d.seen, sha)
			continue
		}
		kept = append(kept, sha)
	}
	clear(d.order[len(kept):])
	d.order = kept
}

// oneLine keeps an error on one RESP line.
func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// run runs a script's shape with EVAL's arguments (numkeys key... arg...).
func (d *dropin) run(ctx context.Context, sess *proxy.Session, s *script, args [][]byte) (any, error) {
	a := proxy.NewArgs(args)
	n, err := a.Int()
	if err != nil {
		return nil, err
	}
	switch {
	case n < 0:
		return nil, errNumkeysNeg
	case n > int64(a.Left()):
		return nil, errNumkeysMany
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i], _ = a.String()
	}
	var argv []string
	for a.More() {
		v, _ := a.String()
		argv = append(argv, v)
	}
	s.runs.Add(1)
	if s.refused != nil {
		return nil, d.refuse(s, keys, argv)
	}
	kind := s.shape.Kind
	c, _ := d.runs.LoadOrStore(kind, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	if d.lim.DropinScripts != nil {
		d.lim.DropinScripts(string(kind))
	}
	ops := &scriptOps{eng: d.eng, k: d.k, sess: sess, pub: d.lim.Publisher, grants: &d.grants}
	reply, err := s.shape.Run(ctx, ops, keys, argv)
	if err != nil {
		ops.giveBack(ctx)
		return nil, scriptErr(err)
	}
	reply = scriptReply(reply)
	if len(ops.leases) == 0 && ops.semLease == nil {
		return reply, nil
	}
	// A grant is checked again when its reply is written, as RLOCK's is:
	// a client that left, or a grant whose validity ran out before the
	// reply (in a pipeline or a transaction), holds nothing.
	return proxy.Late(func() any {
		if ctx.Err() != nil || !ops.stillValid(time.Now()) {
			ops.giveBack(ctx)
			return nil
		}
		return reply
	}), nil
}

// readAs is the start of a refusal's reason naming the operation the
// script reads as.
func readAs(near luashape.Kind) string {
	if near == "" {
		return ""
	}
	return "read as " + article(string(near)) + ": "
}

func article(w string) string {
	if strings.IndexByte("aeiou", w[0]) >= 0 {
		return "an " + w
	}
	return "a " + w
}

// refuse is a refused script's error. A script that names a lock a
// client took through this proxy, with the holder's value among its
// arguments, is that holder's extend or release: the error says which
// lock, that it is not extended or released, and when it expires, so that
// a library that logs the error and carries on cannot take the refusal
// for a passing failure.
func (d *dropin) refuse(s *script, keys, argv []string) error {
	d.refusals.Add(1)
	// The holder's value may travel in ARGV or, for some libraries, in
	// KEYS (see luashape).
	key, left, holds := d.grants.holder(keys, append(slices.Clone(argv), keys...), time.Now())
	if d.lim.DropinRefused != nil {
		d.lim.DropinRefused(cmp.Or(string(s.near), "unknown"), holds)
	}
	if !holds {
		return s.refused
	}
	d.heldRefs.Add(1)
	expected, outcome := "an extend or a release", "neither extended nor released"
	switch s.near {
	case luashape.Extend:
		expected, outcome = "an extend", "not extended"
	case luashape.Release:
		expected, outcome = "a release", "not released"
	}
	return proxy.Errorf("drop-in: script %s is not a lock operation the proxy can run on a quorum (%s%s), but expected %s of a lock this client holds (%q): the lock is %s and expires in %d ms (see docs/dropin.md, Refused scripts)",
		s.sha, readAs(s.near), s.reason, expected, key, outcome, left.Milliseconds())
}

// scriptErr turns a script's error reply into the RESP error it carries
// ("ERR ...", "NOSCRIPT ...": the first word is the code, as Redis does).
func scriptErr(err error) error {
	var se luashape.ScriptError
	if e, ok := err.(luashape.ScriptError); ok {
		se = e
	} else {
		return err
	}
	code, msg, ok := strings.Cut(string(se), " ")
	if !ok || code == "" || strings.ToUpper(code) != code {
		return &proxy.Error{Code: "ERR", Msg: string(se)}
	}
	return &proxy.Error{Code: code, Msg: msg}
}

// scriptReply maps luashape's reply values onto the proxy's.
func scriptReply(v any) any {
	switch x := v.(type) {
	case luashape.Status:
		return proxy.SimpleString(x)
	case luashape.ScriptError:
		return scriptErr(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = scriptReply(e)
		}
		return out
	}
	return v
}

// evalKeys locates EVAL's and EVALSHA's keys for the ACL check: numkeys is
// args[2], the keys follow.
func evalKeys(args [][]byte) [][]byte {
	if len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 0 || 3+n > len(args) {
		return nil
	}
	return args[3 : 3+n]
}

// dropinCommands are the Redis commands lock libraries written for one
// Redis send, served as quorum operations.
func dropinCommands(eng Engine, lim Limits, k *keeper, d *dropin) []*proxy.Command {
	return append(dropinKeyCommands(eng, lim, k, &d.grants), []*proxy.Command{
		{
			Name: "eval", Arity: -3, Flags: proxy.FlagWrite, Keys: evalKeys,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				_, s := d.lookup(args[0], sess.Tenant())
				return d.run(ctx, sess, s, args[1:])
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: runs a lock script, recognised by what it does (acquire, release, extend, check, semaphore), as the matching quorum operation; any other script is refused."},
		},
		{
			Name: "evalsha", Arity: -3, Flags: proxy.FlagWrite, Keys: evalKeys,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				s := d.bySHA(string(args[0]), sess.Tenant())
				if s == nil {
					return nil, errNoScript
				}
				return d.run(ctx, sess, s, args[1:])
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: EVAL of a script seen before (EVAL, SCRIPT LOAD) or declared, by its SHA1."},
		},
		{
			Name: "script", Arity: -2, Flags: proxy.FlagFast,
			Handler: func(_ context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				tenant := sess.Tenant()
				switch strings.ToUpper(string(args[0])) {
				case "LOAD":
					if len(args) != 2 {
						return nil, proxy.WrongArity("script|load")
					}
					sha, s := d.lookup(args[1], tenant)
					if s.refused != nil {
						return nil, s.refused
					}
					return sha, nil
				case "EXISTS":
					if len(args) < 2 {
						return nil, proxy.WrongArity("script|exists")
					}
					out := make([]int64, len(args)-1)
					for i, sha := range args[1:] {
						if s := d.bySHA(string(sha), tenant); s != nil && s.shape != nil {
							out[i] = 1
						}
					}
					return out, nil
				case "FLUSH":
					d.flush(tenant)
					return proxy.OK, nil
				case "LIST":
					if len(args) != 1 {
						return nil, proxy.WrongArity("script|list")
					}
					return d.list(tenant), nil
				}
				return nil, proxy.Errorf("drop-in mode: SCRIPT %s is not served (see docs/PROTOCOL.md, Drop-in mode)", strings.ToUpper(string(args[0])))
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: SCRIPT LOAD (of a lock script the proxy recognises), SCRIPT EXISTS, SCRIPT FLUSH, and SCRIPT LIST (not in Redis): every script seen or declared, how it was read or why it was refused, and how often it ran."},
		},
	}...)
}

// list is SCRIPT LIST: for each script tenant sent (every one for "")
// and each declared one, in the order first seen, an array of sha1,
// status (recognised, refused, declared), the operation it runs or reads
// as ("" if none), the refusal's reason ("" if none) and its runs.
func (d *dropin) list(tenant string) []any {
	var out []any
	declared := slices.Sorted(maps.Keys(d.declared))
	for _, sha := range declared {
		s := d.declared[sha]
		out = append(out, []any{sha, "declared", s.shape.String(), "", s.runs.Load()})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sha := range d.order {
		s := d.seen[sha]
		if tenant != "" && !s.by[tenant] {
			continue
		}
		if s.shape != nil {
			out = append(out, []any{sha, "recognised", s.shape.String(), "", s.runs.Load()})
		} else {
			out = append(out, []any{sha, "refused", string(s.near), s.reason, s.runs.Load()})
		}
	}
	return out
}

// info is the "dropin" section of INFO: how many scripts drop-in mode
// knows, and how often each shape ran.
func (d *dropin) info() proxy.InfoSection {
	return proxy.InfoSection{Name: "dropin", Lines: func() []string {
		d.mu.Lock()
		known, refused := 0, 0
		for _, s := range d.seen {
			if s.shape != nil {
				known++
			} else {
				refused++
			}
		}
		d.mu.Unlock()
		out := []string{
			fmt.Sprintf("scripts_recognised:%d", known),
			fmt.Sprintf("scripts_refused:%d", refused),
			fmt.Sprintf("scripts_declared:%d", len(d.declared)),
			fmt.Sprintf("refusals:%d", d.refusals.Load()),
			fmt.Sprintf("refusals_of_held_locks:%d", d.heldRefs.Load()),
		}
		var runs []string
		d.runs.Range(func(k, v any) bool {
			runs = append(runs, fmt.Sprintf("shape_%s:runs=%d", k, v.(*atomic.Int64).Load()))
			return true
		})
		slices.Sort(runs)
		return append(out, runs...)
	}}
}
