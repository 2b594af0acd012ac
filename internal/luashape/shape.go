// Package luashape recognises a Redis lock script by what it does, so that
// drop-in mode can run it as a quorum operation.
//
// Recognise parses the script with gopher-lua's parser (Lua 5.1; function
// definitions are refused when run) and runs it symbolically against a
// model of one Redis: the client's KEYS and ARGV are symbols, each key starts
// free, holding one of the ARGV, or holding another client's value, and
// every comparison the run cannot decide (an ARGV against a constant, a
// sorted set's size against a limit) is explored both ways. Whitespace,
// comments, quoting, local names, redis.call or redis.pcall, command-name
// case, tonumber/tostring and the order of a comparison's operands do not
// change what such a run computes. The effects of all the paths (which
// keys end set, refreshed or deleted, from which state, with which value)
// are then matched against the lock operations a quorum can run: acquire,
// release, extend, check, force release (delete whatever holds), the
// semaphore's acquire, release and refresh, and the hash lock's (a
// re-entrant lock kept in a hash whose one field is the owner and its
// hold count, Redisson's layout) acquire, extend and release. A script
// that fails to match and uses a sorted set may be a read-write lock kept
// in a sorted set (Symfony Lock's layout): that is recognised by running
// it concretely from each state such a lock can be in (zlock.go). A
// script whose writes all expire within a millisecond is Ephemeral.
//
// Shape.Run runs the quorum operation, then runs the script once more,
// concretely, against one Redis holding the state the quorum reported, to
// compute the reply the script would have given.
//
// What the recogniser assumes: distinct ARGV hold distinct values (Run
// computes with the real ones, and answers an error if with them the
// script would write where the quorum operation did not); a held lock key
// has a ttl left; another holder's value differs from the client's value
// and from every prefix of it (so bsm/redislock's re-obtain by token
// prefix is run as a re-entrant acquire comparing the whole value).
package luashape

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind names a lock operation.
type Kind string

// The shapes a script can have.
const (
	Acquire    Kind = "acquire"
	Release    Kind = "release"
	Extend     Kind = "extend"
	Check      Kind = "check"
	SemAcquire Kind = "semacquire"
	SemRelease Kind = "semrelease"
	SemExtend  Kind = "semextend"
	// ForceRelease deletes the keys whatever holds them (Redisson's
	// forceUnlock; DEL as a command).
	ForceRelease Kind = "forcerelease"
	// The hash lock (Redisson's RLock layout): a hash per lock whose one
	// field is the owner (Value) and its hold count. HashAcquire takes
	// one more hold when the lock is free or the owner's; HashExtend sets
	// the expiry when the owner holds it; HashRelease takes one hold away
	// and deletes the lock with the last.
	HashAcquire Kind = "hashacquire"
	HashExtend  Kind = "hashextend"
	HashRelease Kind = "hashrelease"
	// Ephemeral writes only keys that expire within maxEphemeralMs
	// (Symfony Lock's probe of TIME in scripts: SET key "1" PX 1): no
	// later command can see what it wrote, so it is answered without
	// the masters.
	Ephemeral Kind = "ephemeral"
)

// maxEphemeralMs is the longest expiry an Ephemeral script may set.
const maxEphemeralMs = 1

// State is what a quorum found at a lock's keys.
type State int

// The states of a lock's keys.
const (
	Absent State = iota // no holder
	Mine                // held with the client's value
	Other               // held with another value
)

// Status is a status reply (+OK): what a script's {ok=...} converts to.
type Status string

// ScriptError is an error reply a script gives (its {err=...}, or the
// error Redis's Lua raises); the text is the whole reply, code included.
type ScriptError string

func (e ScriptError) Error() string { return string(e) }

// Ops is what a quorum offers; every method is one quorum operation.
//
// Acquire grants keys all-or-nothing: when every key is free, or, if
// reentrant, free or already holding value (those get the new ttl). A
// non-re-entrant Acquire of a key that already holds value is refused, as
// SET NX is. Release and Extend act when every key holds value and report
// the state they found: Mine (and they acted), Absent (no key held), or
// Other. Get reads one key's value and remaining ttl as a quorum agrees on
// them. SemAcquire grants count permits of the semaphore name to token
// when the permits held (the token's own included, which it replaces, as
// ZADD of members already there does) plus count are at most limit;
// SemRelease and SemExtend report Mine when the token held permits, else
// Absent. Publish delivers a message once to the channel's subscribers.
type Ops interface {
	Acquire(ctx context.Context, keys []string, value string, ttl time.Duration, reentrant bool) (granted bool, err error)
	Release(ctx context.Context, keys []string, value string) (State, error)
	Extend(ctx context.Context, keys []string, value string, ttl time.Duration) (State, error)
	Get(ctx context.Context, key string) (value string, pttl time.Duration, held bool, err error)
	SemAcquire(ctx context.Context, name string, limit, count int, ttl time.Duration, token string) (bool, error)
	SemRelease(ctx context.Context, name, token string) (State, error)
	SemExtend(ctx context.Context, name, token string, ttl time.Duration) (State, error)
	Publish(ctx context.Context, channel, message string) error
	// Hold takes one more hold of key's re-entrant lock for owner (free,
	// or owner's already) with ttl. Unhold takes one of owner's holds away
	// and reports the holds left (0: the lock is released). HoldExtend
	// sets ttl on owner's lock. Delete deletes keys whatever holds them
	// and reports which were held.
	Hold(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	Unhold(ctx context.Context, key, owner string) (State, int, error)
	HoldExtend(ctx context.Context, key, owner string, ttl time.Duration) (State, error)
	Delete(ctx context.Context, keys []string) ([]bool, error)
}

// Clock may be implemented by an Ops to give the time used for absolute
// expiries (PXAT, EXAT, PEXPIREAT, EXPIREAT); without it Run uses
// time.Now.
type Clock interface{ Now() time.Time }

// Shape is a recognised (or declared) lock operation. It is immutable and
// safe for concurrent use.
type Shape struct {
	Kind      Kind
	Reentrant bool // acquire: a key already holding the value is refreshed
	// Value is the ARGV index (1-based) of the value compared with the
	// keys (release, extend, check) or of the semaphore token; 0 when the
	// script sets a value computed otherwise (acquire).
	Value int

	c         *chunk
	needsPTTL bool  // extend: the new expiry depends on the current one
	pubNames  []int // ARGV indexes that name a publish command
	// batch, when not 0, makes a HashExtend a batch: each KEYS[i] is the
	// lock of ARGV[i + batch], extended or not on its own.
	batch int
	// memo is the KEYS index of a hash lock release's memo (Redisson's
	// unlock latch): a string key whose value, when present, is the
	// answer, and which the release sets to its answer for a while; 0:
	// none.
	memo       int
	readsOther bool   // the reply depends on another holder's value or ttl
	zmarker    string // a sorted-set lock's marker member (ZLock)
	// keyValues, when not 0, makes an Acquire take each KEYS[i] with its
	// own value, ARGV[i + keyValues - 1], all or none.
	keyValues int
	limit     *sx // semaphore acquire: expressions over ARGV
	count     *sx
	decl      *Declaration
}

// internalError marks a recovered panic (a bug), which the fuzz target
// looks for.
const internalError = "luashape internal error"

// Limits on the symbolic exploration.
const (
	maxPaths      = 1024
	maxTotalSteps = 400000
)

// Recognise parses src and returns its shape, or an error whose text names
// the first statement it could not place. It never panics.
func Recognise(src []byte) (s *Shape, err error) {
	defer func() {
		if r := recover(); r != nil { // a bug here must refuse, not crash
			s, err = nil, fmt.Errorf("%s: %v", internalError, r)
		}
	}()
	c, err := parse(string(src))
	if err != nil {
		return nil, err
	}
	s, err = recogniseSym(c)
	if err != nil && c.zsets {
		// A read-write lock kept in a sorted set is recognised by how it
		// behaves from each state such a lock can be in (zlock.go).
		if z, zerr := recogniseZLock(c); zerr == nil {
			return z, nil
		}
	}
	return s, err
}

// recogniseSym recognises c by exploring it symbolically.
func recogniseSym(c *chunk) (s *Shape, err error) {
	if c.keys == 0 && !c.dynK {
		return nil, errors.New("uses no KEYS")
	}
	nks := []int{c.keys}
	if c.dynK {
		nks = []int{max(c.keys, 1), max(c.keys, 2)}
		if nks[0] == nks[1] {
			nks = nks[:1]
		}
	}
	nargv := c.argv
	if c.dynA {
		nargv++
	}
	var paths []*path
	for _, nk := range nks {
		ps, err := explore(c, nk, nargv, nil)
		if err != nil {
			return nil, err
		}
		// KEYS the script never uses as keys may be values it compares
		// with (a fixed number of KEYS only): explore again with keys
		// that start holding them.
		if vk := unusedKeys(ps, nk); len(vk) > 0 && !c.dynK {
			if ps, err = explore(c, nk, nargv, vk); err != nil {
				return nil, err
			}
		}
		paths = append(paths, ps...)
	}
	s, err = classify(c, paths)
	if err != nil && c.dynK && c.dynA && !c.hashes && !c.zsets {
		// An acquire of every key, each with its own value (KEYS[i]
		// holding ARGV[i + offset], redlock-universal's batch acquire):
		// explore with an ARGV for every key besides the others.
		if e, eerr := recogniseEach(c, nks); eerr == nil {
			return e, nil
		}
	}
	if err != nil && c.dynK && c.dynA && c.hashes {
		// A batch over hash locks, one owner per key in ARGV after a
		// shared argument (Redisson's watchdog renews every lock of a
		// client in one script since 3.45): explore with an ARGV for
		// every key.
		if b, berr := recogniseBatch(c, nks); berr == nil {
			return b, nil
		}
	}
	return s, err
}

// recogniseBatch explores c with c.argv + nk ARGV for each number of keys
// and matches it as a batch of independent hash lock extensions.
func recogniseBatch(c *chunk, nks []int) (*Shape, error) {
	var paths []*path
	for _, nk := range nks {
		ps, err := explore(c, nk, c.argv+nk, nil)
		if err != nil {
			return nil, err
		}
		paths = append(paths, ps...)
	}
	return classifyHashBatch(c, paths)
}

// recogniseEach explores c with an ARGV for every key besides the
// script's others and matches it as an acquire of every key, each with
// its own value, all or none.
func recogniseEach(c *chunk, nks []int) (*Shape, error) {
	var paths []*path
	for _, nk := range nks {
		ps, err := explore(c, nk, c.argv+nk+1, nil)
		if err != nil {
			return nil, err
		}
		paths = append(paths, ps...)
	}
	return classifyEach(c, paths)
}

// classifyEach matches paths that either set every key, each from free
// to ARGV[i + offset] (one offset) with an expiry, or write nothing; a
// path that fails writes nothing.
func classifyEach(c *chunk, paths []*path) (*Shape, error) {
	off := -1
	sets := false
	for _, p := range paths {
		if len(p.pubs) > 0 {
			return nil, errors.New("publishes")
		}
		n := 0
		for _, e := range p.ents {
			ef := effectOf(e)
			if e.kind != 's' {
				return nil, errors.New("uses keys other than strings")
			}
			switch ef.kind {
			case "none":
				continue
			case "set":
			default:
				return nil, fmt.Errorf("%s: changes a key it does not take", at(c, e.wrote))
			}
			if p.err != nil {
				return nil, fmt.Errorf("%s: can fail after writing", at(c, p.end))
			}
			v, ok := e.val.(*sym)
			if !ok || v.e.op != "ARGV" || e.ttl == nil {
				return nil, fmt.Errorf("%s: sets a key to a value other than an ARGV, or without an expiry", at(c, e.wrote))
			}
			if o := v.e.i - e.idx; off >= 0 && o != off || o < 0 {
				return nil, fmt.Errorf("%s: sets the keys to ARGV at different offsets", at(c, e.wrote))
			} else {
				off = o
			}
			n++
		}
		if n > 0 && n != p.nk {
			return nil, errors.New("sets some of its keys and not others")
		}
		sets = sets || n > 0
	}
	if !sets {
		return nil, errors.New("sets no key")
	}
	return &Shape{Kind: Acquire, c: c, keyValues: off + 1}, nil
}

// classifyHashBatch matches a script that extends each of its hash
// locks, independently, where its own owner (ARGV[i + offset] for
// KEYS[i]) holds it, and leaves the others alone.
func classifyHashBatch(c *chunk, paths []*path) (*Shape, error) {
	off := 0
	for _, p := range paths {
		if p.err != nil {
			return nil, fmt.Errorf("%s: can fail", at(c, p.end))
		}
		if len(p.ents) != p.nk {
			return nil, fmt.Errorf("%s: leaves a key unread", at(c, p.end))
		}
		for _, e := range p.ents {
			if e.kind != 'h' {
				return nil, errors.New("uses keys that are not hash locks")
			}
			ef, err := hashEffectOf(e)
			if err != nil {
				return nil, err
			}
			mine := e.init == "argv"
			if mine {
				if off == 0 {
					off = e.hi - e.idx
				}
				mine = off > 0 && e.hi == e.idx+off
			}
			switch {
			case mine && ef == "expire":
			case !mine && ef == "none":
			default:
				return nil, fmt.Errorf("%s: does not extend each hash lock where its owner holds it, and only there", at(c, p.end))
			}
		}
	}
	if off <= 0 {
		return nil, errors.New("extends no hash lock")
	}
	return &Shape{Kind: HashExtend, batch: off, c: c}, nil
}

// keysValue + j as a Shape.Value (or an entry's value index) names
// KEYS[j] rather than an ARGV.
const keysValue = 1000

// valueName names a value index: ARGV[i] or KEYS[j].
func valueName(i int) string {
	if i > keysValue {
		return fmt.Sprintf("KEYS[%d]", i-keysValue)
	}
	return fmt.Sprintf("ARGV[%d]", i)
}

// unusedKeys are the KEYS indexes (1 to nk) that no path uses as a key.
func unusedKeys(paths []*path, nk int) []int {
	used := map[int]bool{}
	for _, p := range paths {
		for _, e := range p.ents {
			used[e.idx] = true
		}
	}
	var out []int
	for j := 1; j <= nk; j++ {
		if !used[j] {
			out = append(out, j)
		}
	}
	return out
}

// path is one way through the script in the symbolic model.
type path struct {
	nk       int
	pubNames []int
	ents     []*entry // by KEYS index
	pubs     []pub
	ret      value
	err      error
	assume   []assumption
	bind     map[string]float64
	end      stmt
}

func explore(c *chunk, nk, nargv int, valueKeys []int) ([]*path, error) {
	keys := make([]value, nk)
	for i := range keys {
		keys[i] = &sym{e: atom("KEYS", i+1)}
	}
	argv := make([]value, nargv)
	for i := range argv {
		argv[i] = &sym{e: atom("ARGV", i+1)}
	}
	var out []*path
	var choices []int
	total := 0
	for {
		if len(out) >= maxPaths {
			return nil, errors.New("too many ways through the script")
		}
		in := &interp{c: c, symbolic: true, choices: choices, globals: newGlobals(keys, argv)}
		in.m = &model{keys: keys, nargv: nargv, valueKeys: valueKeys, ents: map[int]*entry{}, now: &sym{e: atom("NOW", 0), num: true}}
		ret, err := in.run()
		var rf *refusal
		if errors.As(err, &rf) {
			return nil, rf
		}
		if errors.Is(err, errSteps{}) {
			return nil, fmt.Errorf("%s runs too long", at(c, in.cur))
		}
		if total += in.steps; total > maxTotalSteps {
			return nil, errors.New("too many ways through the script")
		}
		p := &path{nk: nk, pubs: in.m.pubs, pubNames: in.m.pubNames, ret: ret, err: err, assume: in.assume, bind: in.bind, end: in.cur}
		for i := 1; i <= nk; i++ {
			if e := in.m.ents[i]; e != nil {
				p.ents = append(p.ents, e)
			}
		}
		out = append(out, p)
		k := len(in.branches) - 1
		for k >= 0 && in.choices[k]+1 >= in.branches[k] {
			k--
		}
		if k < 0 {
			return out, nil
		}
		choices = append(append([]int(nil), in.choices[:k]...), in.choices[k]+1)
	}
}

// nonKeys counts, per number of KEYS, the KEYS entries that no way
// through the script uses as a key: a PUBLISH channel (Redisson passes
// its release channel in KEYS[2]) or a plain argument (node-redis-warlock
// passes its extend's ttl and value in KEYS). They are not lock keys.
func nonKeys(paths []*path) map[int]int {
	asKey := map[int]map[int]bool{}
	for _, p := range paths {
		if asKey[p.nk] == nil {
			asKey[p.nk] = map[int]bool{}
		}
		for _, e := range p.ents {
			asKey[p.nk][e.idx] = true
		}
	}
	out := map[int]int{}
	for nk, used := range asKey {
		out[nk] = nk - len(used)
	}
	return out
}

// ttlCondition reports whether the path took a comparison of a key's
// remaining ttl (PTTL or TTL) the way it did.
func (p *path) ttlCondition() bool {
	for _, a := range p.assume {
		for _, x := range []*sx{a.d, a.l, a.r} {
			if x != nil && (x.has("PTTL") || x.has("TTL")) {
				return true
			}
		}
	}
	return false
}

func at(c *chunk, s stmt) string {
	if s == nil {
		return "the script"
	}
	return c.describe(s)
}

// effect is what one path did to one string key.
type effect struct {
	e    *entry
	kind string // none set expire del overwrite
}

func effectOf(e *entry) effect {
	if e.kind != 's' {
		return effect{e: e, kind: "none"}
	}
	switch {
	case e.init == "absent" && e.present:
		return effect{e, "set"}
	case e.init == "absent":
		return effect{e, "none"}
	case !e.present:
		return effect{e, "del"}
	case e.valSet && !sameValue(e.val, e.initVal()):
		return effect{e, "overwrite"}
	case e.ttlSet:
		return effect{e, "expire"}
	}
	return effect{e, "none"}
}

func (e *entry) initVal() value { return e.val0 }

func sameValue(a, b value) bool { return valueKey(a) == valueKey(b) }

// valueKey is a canonical text of a Lua value, symbolic or not.
func valueKey(v value) string {
	switch v := v.(type) {
	case *sym:
		if v.num {
			return "n:" + v.e.key
		}
		return "s:" + v.e.key
	case string:
		return "s:" + strconv.Quote(v)
	case float64:
		return "n:#" + fmtNum(v)
	case *table:
		var b strings.Builder
		b.WriteString("{")
		for _, x := range v.arr {
			b.WriteString(valueKey(x) + ",")
		}
		var ks []string
		for k, x := range v.hash {
			ks = append(ks, fmt.Sprint(k)+"="+valueKey(x))
		}
		sort.Strings(ks)
		b.WriteString(strings.Join(ks, ","))
		b.WriteString("}")
		return b.String()
	}
	return fmt.Sprintf("%T:%v", v, v)
}

func replyKey(p *path) string {
	if p.err != nil {
		return "error:" + p.err.Error()
	}
	return valueKey(p.ret)
}

// NearError is a refusal of a script whose effects read as one lock
// operation (Near) that it does not do exactly: an extend that leaves a
// held key alone on some way through, a release that also sets keys.
// Drop-in mode names the operation in its error, so that a library's
// refused extend or release is not mistaken for an unrelated script.
type NearError struct {
	Near Kind
	Err  error
}

func (e *NearError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *NearError) Unwrap() error { return e.Err }

// Near is the lock operation a refusal of Recognise reads as, "" when the
// script's effects name none.
func Near(err error) Kind {
	var ne *NearError
	if errors.As(err, &ne) {
		return ne.Near
	}
	return ""
}

func classify(c *chunk, paths []*path) (*Shape, error) {
	if ephemeral(paths) {
		return &Shape{Kind: Ephemeral, c: c}, nil
	}
	var near Kind
	s, err := classifyAs(c, paths, &near)
	if err != nil && near != "" {
		return nil, &NearError{Near: near, Err: err}
	}
	if s != nil {
		for _, p := range paths {
			for _, i := range p.pubNames {
				if !slices.Contains(s.pubNames, i) {
					s.pubNames = append(s.pubNames, i)
				}
			}
		}
	}
	return s, err
}

// ephemeral reports whether every way through the script that writes
// only sets string keys unconditionally, each with a constant expiry of at
// most maxEphemeralMs, publishes nothing, and answers the same whatever
// the keys held; and one way writes.
func ephemeral(paths []*path) bool {
	writes := false
	reply := ""
	for i, p := range paths {
		if p.err != nil || len(p.pubs) > 0 {
			return false
		}
		if k := replyKey(p); i == 0 {
			reply = k
		} else if k != reply {
			return false
		}
		for _, e := range p.ents {
			if e.kind != 's' {
				return false
			}
			if !e.valSet && !e.ttlSet && e.present == (e.init != "absent") {
				continue
			}
			ttl, ok := e.ttl.(float64)
			if !e.present || !e.valSet || !ok || ttl <= 0 || ttl > maxEphemeralMs {
				return false
			}
			writes = true
		}
	}
	return writes
}

// classifyAs is classify; it sets near once the effects name the
// operation.
func classifyAs(c *chunk, paths []*path, near *Kind) (*Shape, error) {
	if force, err := forceRelease(c, paths); force != nil || err != nil {
		*near = ForceRelease
		return force, err
	}
	var dels, sets, expires []effect
	var zs, hs []*entry
	strKeys := false
	for _, p := range paths {
		for _, e := range p.ents {
			if e.kind == 'z' {
				zs = append(zs, e)
				continue
			}
			if e.kind == 'h' {
				hs = append(hs, e)
				continue
			}
			strKeys = true
			ef := effectOf(e)
			switch ef.kind {
			case "overwrite":
				return nil, fmt.Errorf("%s: overwrites a key that holds another value", at(c, e.wrote))
			case "del", "expire":
				if e.init == "other" {
					return nil, fmt.Errorf("%s: changes a key held by another value without comparing it with ARGV", at(c, e.wrote))
				}
				if ef.kind == "expire" && e.ttl == nil {
					return nil, fmt.Errorf("%s: removes a lock's expiry", at(c, e.wrote))
				}
				if ef.kind == "del" {
					dels = append(dels, ef)
				} else {
					expires = append(expires, ef)
				}
			case "set":
				if e.ttl == nil {
					return nil, fmt.Errorf("%s: sets a key without an expiry", at(c, e.wrote))
				}
				sets = append(sets, ef)
			}
		}
	}
	if len(zs) > 0 {
		if strKeys || len(hs) > 0 {
			return nil, errors.New("uses both a sorted set and other keys")
		}
		return classifySem(c, paths)
	}
	if len(hs) > 0 {
		memo := 0
		if strKeys {
			var err error
			if memo, paths, err = memoKey(c, paths); err != nil {
				return nil, err
			}
		}
		s, err := classifyHash(c, paths, near)
		if s != nil && memo != 0 {
			if s.Kind != HashRelease {
				return nil, fmt.Errorf("keeps a memo key (KEYS[%d]) beside a hash lock's %s: only a release's is served", memo, strings.TrimPrefix(string(s.Kind), "hash"))
			}
			s.memo = memo
		}
		return s, err
	}
	// Paths that failed with an error must not have written anything.
	for _, p := range paths {
		if p.err != nil {
			for _, e := range p.ents {
				if effectOf(e).kind != "none" {
					return nil, fmt.Errorf("%s: can fail after writing", at(c, p.end))
				}
			}
		}
	}
	s := &Shape{c: c}
	switch {
	case len(dels) > 0:
		if len(sets)+len(expires) > 0 {
			return nil, fmt.Errorf("%s: both deletes and sets keys", at(c, dels[0].e.wrote))
		}
		s.Kind, s.Value = Release, dels[0].e.hi
	case len(sets) > 0:
		s.Kind, *near = Acquire, Acquire
		v := sets[0].e.val
		if vs, ok := v.(*sym); ok && vs.e.op == "ARGV" {
			s.Value = vs.e.i
		}
		for _, ef := range sets {
			if !sameValue(ef.e.val, v) {
				return nil, fmt.Errorf("%s: sets keys to different values", at(c, ef.e.wrote))
			}
		}
		for _, ef := range expires {
			if s.Value == 0 || ef.e.hi != s.Value {
				return nil, fmt.Errorf("%s: refreshes a key holding %s, which is not the value it sets", at(c, ef.e.wrote), valueName(ef.e.hi))
			}
			s.Reentrant = true
		}
	case len(expires) > 0:
		s.Kind, s.Value = Extend, expires[0].e.hi
	default:
		for _, p := range paths {
			if len(p.pubs) > 0 {
				return nil, errors.New("publishes without taking, releasing or extending a lock")
			}
		}
		touched := false
		for _, p := range paths {
			touched = touched || len(p.ents) > 0
		}
		if !touched {
			return nil, errors.New("reads no key")
		}
		s.Kind = Check
		return s, nil
	}
	*near = s.Kind
	for _, ef := range append(dels, expires...) {
		if ef.e.hi != s.Value {
			return nil, fmt.Errorf("%s: compares keys with %s here and %s elsewhere", at(c, ef.e.wrote), valueName(ef.e.hi), valueName(s.Value))
		}
	}
	if s.Kind == Extend || s.Kind == Release || s.Reentrant {
		for _, ef := range expires {
			if ef.e.ttlSet && ef.e.ttl != nil {
				if ts, ok := ef.e.ttl.(*sym); ok && (ts.e.has("PTTL") || ts.e.has("TTL")) {
					s.needsPTTL = true
				}
			}
		}
	}
	if s.Value > 0 && s.Kind != Acquire {
		for _, p := range paths {
			for _, e := range p.ents {
				if e.init == "argv" && e.hi == s.Value && s.isTTLArg(e, paths) {
					return nil, fmt.Errorf("%s: compares keys with ARGV[%d], which is also the expiry", at(c, e.wrote), s.Value)
				}
			}
		}
	}
	// All or nothing, and always: where every key is in a state the
	// operation applies to, every key changes; elsewhere none does (a
	// release may also delete, key by key, those holding the value).
	granted, refused := map[int][]*path{}, map[int][]*path{}
	chans := nonKeys(paths)
	for _, p := range paths {
		if p.err != nil {
			refused[p.nk] = append(refused[p.nk], p)
			continue
		}
		if len(p.ents) == 0 {
			return nil, fmt.Errorf("%s: a way through the script that reads no key", at(c, p.end))
		}
		applies, perKey, all, none := true, true, true, true
		for _, e := range p.ents {
			ok := e.init == "argv" && e.hi == s.Value
			if s.Kind == Acquire {
				ok = e.init == "absent" || (s.Reentrant && ok)
			}
			changed := effectOf(e).kind != "none"
			applies = applies && ok
			perKey = perKey && ok == changed
			all = all && changed
			none = none && !changed
		}
		switch {
		case applies && all && len(p.ents) == p.nk-chans[p.nk]:
			granted[p.nk] = append(granted[p.nk], p)
		case applies && none && s.Kind == Extend && p.ttlCondition():
			// A conditional extend: it declines, where the keys hold the
			// value, on the ttl they have left (an extend only while at
			// least a margin is left). Run reads the ttl from the quorum
			// first and replays the script with it to decide.
			s.needsPTTL = true
			refused[p.nk] = append(refused[p.nk], p)
		case applies:
			return nil, fmt.Errorf("%s: does not %s every key where it should", at(c, p.end), s.Kind)
		case none:
			refused[p.nk] = append(refused[p.nk], p)
		case s.Kind == Release && perKey:
		case all:
			return nil, fmt.Errorf("%s: changes keys in a state it should leave alone", at(c, p.end))
		default:
			return nil, fmt.Errorf("%s: changes some keys and not others", at(c, p.end))
		}
	}
	// A reply that shows the ttl the key had: Run reads it first.
	for _, ps := range granted {
		for _, p := range ps {
			if k := replyKey(p); strings.Contains(k, "PTTL[") || strings.Contains(k, "TTL[") {
				s.needsPTTL = true
			}
		}
	}
	// Run answers from the state the quorum reports: for an acquire, the
	// reply must not depend on more than whether it was granted.
	if s.Kind == Acquire {
		for nk := range granted {
			if err := sameReply(c, granted[nk], "when it takes the lock"); err != nil {
				return nil, err
			}
			if err := sameReply(c, refused[nk], "when the lock is taken"); err != nil {
				return nil, err
			}
		}
	}
	for _, ps := range refused {
		for _, p := range ps {
			if k := replyKey(p); strings.Contains(k, "OTHER[") || strings.Contains(k, "PTTL[") || strings.Contains(k, "TTL[") {
				s.readsOther = true
			}
		}
	}
	return s, nil
}

// forceRelease recognises a script that deletes its keys whatever holds
// them (every way through it: a key held, by anyone, ends deleted; a free
// key is left alone; nothing is set or expired), which a quorum runs as
// a delete. nil, nil when the script is not one.
func forceRelease(c *chunk, paths []*path) (*Shape, error) {
	deletes := false
	unused := nonKeys(paths)
	for _, p := range paths {
		if p.err == nil && len(p.ents) != p.nk-unused[p.nk] {
			return nil, nil // leaves a key alone on some way through
		}
		for _, e := range p.ents {
			if e.kind != 's' && e.kind != 'h' {
				return nil, nil
			}
			switch {
			case e.init == "absent" && !e.present:
			case e.init != "absent" && !e.present:
				deletes = true
			default:
				return nil, nil
			}
		}
		if p.err != nil && len(p.ents) > 0 {
			for _, e := range p.ents {
				if e.init != "absent" {
					return nil, fmt.Errorf("%s: can fail after writing", at(c, p.end))
				}
			}
		}
	}
	if !deletes {
		return nil, nil
	}
	return &Shape{Kind: ForceRelease, c: c}, nil
}

// hashEffect is what one path did to a hash lock.
type hashEffect string

func hashEffectOf(e *entry) (hashEffect, error) {
	switch {
	case e.hmixed:
		return "", errors.New("changes a hold count by an amount that is not a constant")
	case e.init == "absent" && !e.present:
		return "none", nil
	case e.init == "absent" && e.hdelta == 1 && e.ttlSet && e.ttl != nil:
		return "take", nil
	case e.init == "absent":
		return "", errors.New("creates a hash lock without exactly one hold and an expiry")
	case !e.present:
		return "delete", nil
	case e.hdelta == 0 && !e.ttlSet:
		return "none", nil
	case e.hdelta == 0 && e.ttl != nil:
		return "expire", nil
	case e.hdelta == 1 && e.ttlSet && e.ttl != nil:
		return "take", nil
	case e.hdelta == -1 && e.ttlSet && e.ttl != nil:
		return "unhold", nil
	}
	return "", errors.New("changes a hash lock in a way no lock operation does")
}

// memoKey finds a hash lock script's memo (Redisson's unlock latch since
// 3.24): the one string key, read first, whose presence ends the script
// without a write (a retried request answers what the first one did), and
// which, when absent, the script may set with an expiry once it changed
// the lock. It returns the memo's index and the paths to classify: those
// that found it absent, without it.
func memoKey(c *chunk, paths []*path) (int, []*path, error) {
	memo := 0
	for _, p := range paths {
		for _, e := range p.ents {
			if e.kind != 's' {
				continue
			}
			if memo != 0 && memo != e.idx {
				return 0, nil, errors.New("uses both a hash and string keys")
			}
			memo = e.idx
		}
	}
	var out []*path
	for _, p := range paths {
		var rest []*entry
		var m *entry
		for _, e := range p.ents {
			if e.idx == memo {
				m = e
			} else {
				rest = append(rest, e)
			}
		}
		if m == nil {
			return 0, nil, fmt.Errorf("%s: a way through the script that does not read the memo key KEYS[%d]", at(c, p.end), memo)
		}
		if m.init != "absent" {
			for _, e := range rest {
				if ef, err := hashEffectOf(e); err != nil || ef != "none" {
					return 0, nil, fmt.Errorf("%s: changes the lock although KEYS[%d] holds an answer", at(c, p.end), memo)
				}
			}
			if effectOf(m).kind != "none" {
				return 0, nil, fmt.Errorf("%s: changes the memo key KEYS[%d] that holds an answer", at(c, p.end), memo)
			}
			continue // answered from the memo
		}
		switch ef := effectOf(m); {
		case ef.kind == "none":
		case ef.kind == "set" && m.ttl != nil:
			if _, isSym := m.val.(*sym); isSym {
				return 0, nil, fmt.Errorf("%s: sets the memo key KEYS[%d] to a value that is not a constant", at(c, p.end), memo)
			}
		default:
			return 0, nil, fmt.Errorf("%s: writes the memo key KEYS[%d] otherwise than setting it with an expiry", at(c, p.end), memo)
		}
		q := *p
		q.ents = rest
		out = append(out, &q)
	}
	return memo, out, nil
}

// classifyHash matches a script on one hash kept as a re-entrant lock:
// acquire (free or the owner's: one more hold and the expiry), extend (the
// owner's: the expiry), release (the owner's: one hold less, the expiry
// again while holds remain, deleted with the last).
func classifyHash(c *chunk, paths []*path, near *Kind) (*Shape, error) {
	var kind Kind
	owner := 0
	set := func(k Kind) error {
		if kind != "" && kind != k {
			return fmt.Errorf("both %ss and %ss a hash lock", kind, k)
		}
		kind, *near = k, k
		return nil
	}
	noteOwner := func(e *entry) error {
		o := e.hi
		if e.init == "absent" {
			os, ok := e.hown.(*sym)
			if !ok || os.e.op != "ARGV" {
				return errors.New("takes a hash lock for an owner that is not one of ARGV")
			}
			o = os.e.i
		}
		if owner != 0 && owner != o {
			return fmt.Errorf("uses owners ARGV[%d] and ARGV[%d]", owner, o)
		}
		owner = o
		return nil
	}
	for _, p := range paths {
		var h *entry
		for _, e := range p.ents {
			if h != nil {
				return nil, errors.New("uses more than one hash")
			}
			h = e
		}
		if h == nil {
			continue
		}
		ef, err := hashEffectOf(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at(c, p.end), err)
		}
		if p.err != nil {
			if ef != "none" {
				return nil, fmt.Errorf("%s: can fail after writing", at(c, p.end))
			}
			continue
		}
		switch {
		case ef == "none":
			continue
		case h.init == "other":
			return nil, fmt.Errorf("%s: changes a hash lock that another owner holds", at(c, p.end))
		}
		if err := noteOwner(h); err != nil {
			return nil, err
		}
		switch ef {
		case "take":
			err = set(HashAcquire)
		case "expire":
			err = set(HashExtend)
		case "unhold", "delete":
			err = set(HashRelease)
		}
		if err != nil {
			return nil, err
		}
	}
	if kind == "" {
		return nil, errors.New("neither takes, extends nor releases the hash lock")
	}
	// Where the owner holds it (or, for an acquire, where it is free),
	// every way through the script acts; elsewhere none does.
	var granted, refused []*path
	for _, p := range paths {
		if p.err != nil || len(p.ents) == 0 {
			if p.err == nil {
				return nil, fmt.Errorf("%s: a way through the script that reads no key", at(c, p.end))
			}
			refused = append(refused, p)
			continue
		}
		h := p.ents[0]
		ef, _ := hashEffectOf(h)
		applies := h.init == "argv" && h.hi == owner
		if kind == HashAcquire {
			applies = applies || h.init == "absent"
		}
		switch {
		case applies && ef != "none":
			granted = append(granted, p)
		case applies:
			return nil, fmt.Errorf("%s: does not %s the hash lock where it should", at(c, p.end), strings.TrimPrefix(string(kind), "hash"))
		case ef != "none":
			return nil, fmt.Errorf("%s: changes a hash lock that another owner holds", at(c, p.end))
		default:
			refused = append(refused, p)
		}
	}
	s := &Shape{Kind: kind, Value: owner, c: c}
	if kind == HashAcquire {
		if err := sameReply(c, granted, "when it takes the lock"); err != nil {
			return nil, err
		}
	}
	for _, p := range refused {
		if k := replyKey(p); strings.Contains(k, "OTHER[") || strings.Contains(k, "PTTL[") || strings.Contains(k, "HCOUNT[") {
			s.readsOther = true
		}
	}
	return s, nil
}

// isTTLArg reports whether ARGV[Value] ends up in an expiry.
func (s *Shape) isTTLArg(_ *entry, paths []*path) bool {
	for _, p := range paths {
		for _, e := range p.ents {
			if ts, ok := e.ttl.(*sym); ok && e.ttlSet {
				m := map[string]*sx{}
				ts.e.atoms(m)
				if _, ok := m[atom("ARGV", s.Value).key]; ok {
					return true
				}
			}
		}
	}
	return false
}

func sameReply(c *chunk, ps []*path, when string) error {
	for _, p := range ps[min(1, len(ps)):] {
		if replyKey(p) != replyKey(ps[0]) {
			return fmt.Errorf("%s: answers differently %s depending on more than whether the quorum granted it", at(c, p.end), when)
		}
	}
	return nil
}

// classifySem matches a script on one sorted set: a semaphore.
func classifySem(c *chunk, paths []*path) (*Shape, error) {
	s := &Shape{c: c}
	token := 0
	noteMember := func(m value) error {
		ms, ok := m.(*sym)
		if !ok {
			return errors.New("uses a sorted-set member that is not built from ARGV")
		}
		as := map[string]*sx{}
		ms.e.atoms(as)
		t := 0
		for _, a := range as {
			if a.op != "ARGV" || t != 0 {
				return errors.New("uses a sorted-set member that is not built from one ARGV")
			}
			t = a.i
		}
		if token != 0 && t != token {
			return fmt.Errorf("uses sorted-set members from ARGV[%d] and ARGV[%d]", token, t)
		}
		token = t
		return nil
	}
	adds, rems := false, false
	for _, p := range paths {
		if p.err != nil {
			continue
		}
		if len(p.ents) != 1 {
			return nil, errors.New("uses more than one sorted set")
		}
		e := p.ents[0]
		for _, m := range append(append([]value(nil), e.zadds...), e.zrems...) {
			if err := noteMember(m); err != nil {
				return nil, err
			}
		}
		adds = adds || len(e.zadds) > 0
		rems = rems || len(e.zrems) > 0
	}
	if token == 0 {
		return nil, errors.New("neither adds nor removes sorted-set members")
	}
	s.Value = token
	switch {
	case adds && rems:
		return nil, errors.New("both adds and removes sorted-set members")
	case rems:
		s.Kind = SemRelease
		for _, p := range paths {
			if p.err != nil {
				continue
			}
			if e := p.ents[0]; e.zttl != nil {
				return nil, errors.New("releases and sets an expiry")
			}
		}
		return s, nil
	}
	for _, p := range paths {
		if p.err != nil {
			continue
		}
		e := p.ents[0]
		if len(e.zadds) == 0 {
			continue
		}
		if e.zttl == nil {
			return nil, errors.New("adds sorted-set members without an expiry on the set")
		}
		var zc []assumption
		for _, a := range p.assume {
			if a.op == "<=" && a.d.has("ZCARD") {
				zc = append(zc, a)
			}
		}
		switch {
		case e.zmine == 1 && len(zc) == 0:
			if s.Kind == SemAcquire {
				return nil, errors.New("both acquires and refreshes semaphore permits")
			}
			s.Kind = SemExtend
		case e.zmine != 1 && len(zc) == 1 && zc[0].holds:
			if s.Kind == SemExtend {
				return nil, errors.New("both acquires and refreshes semaphore permits")
			}
			limit, count, err := splitLimit(zc[0].d)
			if err != nil {
				return nil, err
			}
			if s.limit != nil && (s.limit.key != limit.key || s.count.key != count.key) {
				return nil, errors.New("compares the set's size with different limits")
			}
			n, ok := evalSx(count, nil, p.bind)
			if !ok || n != float64(len(e.zadds)) {
				return nil, errors.New("adds a number of members other than the count it checks")
			}
			s.Kind, s.limit, s.count = SemAcquire, limit, count
		default:
			return nil, errors.New("adds sorted-set members without checking the limit or its own membership")
		}
	}
	if s.Kind == "" {
		return nil, errors.New("never adds a sorted-set member")
	}
	return s, nil
}

// splitLimit reads "ZCARD + count - limit <= 0".
func splitLimit(d *sx) (limit, count *sx, err error) {
	t, cf, c := linTerms(d)
	var zk string
	for k, e := range t {
		if e.op == "ZCARD" {
			zk = k
		}
	}
	if cf[zk] != 1 {
		return nil, nil, errors.New("compares the set's size in a way it cannot follow")
	}
	lt, lc := map[string]*sx{}, map[string]float64{}
	ct, cc := map[string]*sx{}, map[string]float64{}
	for k, v := range cf {
		switch {
		case k == zk:
		case v < 0:
			lt[k], lc[k] = t[k], -v
		default:
			ct[k], cc[k] = t[k], v
		}
	}
	limit, l0 := mkLin(lt, lc, 0)
	count, c0 := mkLin(ct, cc, c)
	if limit == nil {
		limit = numConst(l0)
	}
	if count == nil {
		count = numConst(c0)
	}
	return limit, count, nil
}

// evalSx evaluates a numeric expression over concrete ARGV.
func evalSx(e *sx, argv []string, bind map[string]float64) (float64, bool) {
	if v, ok := bind[e.key]; ok {
		return v, true
	}
	switch e.op {
	case "num":
		return e.c, true
	case "ARGV":
		if e.i < 1 || e.i > len(argv) {
			return 0, false
		}
		return str2number(argv[e.i-1])
	case "lin":
		sum := e.c
		for j, k := range e.kids {
			v, ok := evalSx(k, argv, bind)
			if !ok {
				return 0, false
			}
			sum += e.coef[j] * v
		}
		return sum, true
	}
	return 0, false
}

// String describes the shape.
func (s *Shape) String() string {
	if s == nil {
		return "<nil>"
	}
	b := string(s.Kind)
	if s.Reentrant {
		b += " (re-entrant)"
	}
	if s.Value > 0 {
		b += " value=" + valueName(s.Value)
	}
	if s.limit != nil {
		b += " limit=" + s.limit.key + " count=" + s.count.key
	}
	if s.keyValues > 0 {
		b += fmt.Sprintf(" each KEYS[i] with ARGV[i+%d]", s.keyValues-1)
	}
	return b
}

func msDuration(ms float64) time.Duration {
	return time.Duration(ms * float64(time.Millisecond))
}

var _ = math.Inf
