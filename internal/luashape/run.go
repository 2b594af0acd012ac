package luashape

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Declaration is an operator's description of a script the recogniser
// cannot place (config dropin_scripts). Indexes are 1-based.
type Declaration struct {
	Shape     Kind   // acquire, release, extend, check, semacquire, semrelease, semextend
	Reentrant bool   // acquire: a key already holding the value is refreshed
	Key       int    // KEYS index of the key (semaphore name); 0: every KEYS
	Value     int    // ARGV index of the value (semaphore token)
	TTL       int    // ARGV index of the ttl (acquire, extend, semacquire, semextend)
	TTLUnit   string // "ms" (default) or "s"
	Limit     int    // ARGV index of the semaphore's limit (semacquire)
	Count     int    // ARGV index of the permits taken (semacquire); 0: one
	// Replies: Done when the operation took effect (check: the pttl in
	// ms is answered instead), Failed otherwise. Defaults 1 and 0.
	Done, Failed any
}

// Declare builds a shape from a declaration.
func Declare(d Declaration) (*Shape, error) {
	switch d.Shape {
	case Acquire, Extend, SemAcquire, SemExtend:
		if d.TTL < 1 {
			return nil, fmt.Errorf("%s needs the ARGV index of the ttl", d.Shape)
		}
	case Release, Check, SemRelease:
	default:
		return nil, fmt.Errorf("unknown shape %q (acquire, release, extend, check, semacquire, semrelease, semextend)", d.Shape)
	}
	if d.Value < 1 {
		return nil, errors.New("the ARGV index of the value is needed")
	}
	if d.TTLUnit != "" && d.TTLUnit != "ms" && d.TTLUnit != "s" {
		return nil, fmt.Errorf("ttl unit %q: ms or s", d.TTLUnit)
	}
	if d.Shape == SemAcquire && d.Limit < 1 {
		return nil, errors.New("semacquire needs the ARGV index of the limit")
	}
	if d.Key < 0 || d.Value > 64 || d.TTL > 64 || d.Limit > 64 || d.Count > 64 || d.Key > 64 {
		return nil, errors.New("index out of range")
	}
	if d.Done == nil {
		d.Done = int64(1)
	}
	if d.Failed == nil {
		d.Failed = int64(0)
	}
	return &Shape{Kind: d.Shape, Reentrant: d.Reentrant, Value: d.Value, decl: &d}, nil
}

// Run executes the shape with the client's KEYS and ARGV against ops and
// returns the reply the script would have given on one Redis holding the
// quorum's state: int64, string, nil, []any, Status, or ScriptError
// inside an array. A script error (bad arguments, a Lua error, an
// {err=...} reply) is returned as a ScriptError error; it is found, where
// the arguments alone decide it, before ops is called. Absolute expiries
// are converted with ops's Clock when it has one, else time.Now.
func (s *Shape) Run(ctx context.Context, ops Ops, keys, argv []string) (reply any, err error) {
	defer func() {
		if r := recover(); r != nil { // a bug here must answer an error, not crash
			reply, err = nil, ScriptError(fmt.Sprintf("ERR drop-in: %s: %v", internalError, r))
		}
	}()
	now := time.Now()
	if c, ok := ops.(Clock); ok {
		now = c.Now()
	}
	if s.decl != nil {
		return s.runDeclared(ctx, ops, keys, argv)
	}
	for _, i := range s.pubNames {
		if i > len(argv) {
			return nil, ScriptError("ERR Please specify at least one argument for this redis lib call")
		}
		if n := strings.ToUpper(argv[i-1]); n != "PUBLISH" && n != "SPUBLISH" {
			return nil, ScriptError(fmt.Sprintf("ERR drop-in: ARGV[%d] names the command the script runs; only PUBLISH or SPUBLISH is served there", i))
		}
	}
	r := &runner{s: s, keys: keys, argv: argv, now: float64(now.UnixMilli())}
	switch s.Kind {
	case Acquire:
		return r.acquire(ctx, ops)
	case Release, Extend:
		return r.releaseOrExtend(ctx, ops)
	case Check:
		return r.check(ctx, ops)
	case ForceRelease:
		return r.force(ctx, ops)
	case ZLock:
		return r.zlock(ctx, ops)
	case Ephemeral:
		ret, _, err := r.replay(r.all(start{}))
		if err != nil {
			return nil, scriptErr(err)
		}
		return convert(ret, true)
	case HashAcquire, HashExtend, HashRelease:
		return r.hash(ctx, ops)
	default:
		return r.sem(ctx, ops)
	}
}

type runner struct {
	s    *Shape
	keys []string
	argv []string
	now  float64
}

// start is the state of one key for a concrete run.
type start struct {
	present bool
	val     string  // a hash lock's owner
	ttl     float64 // ms; <0: no expiry
	count   float64 // a hash lock's holds (1 when 0)
	zmine   bool
	zcard   float64
}

// replay runs the script concretely against one Redis whose keys start as
// st says (nil: absent).
func (r *runner) replay(st func(idx int) start) (value, *model, error) {
	keys := make([]value, len(r.keys))
	for i, k := range r.keys {
		keys[i] = k
	}
	argv := make([]value, len(r.argv))
	for i, a := range r.argv {
		argv[i] = a
	}
	m := &model{keys: keys, nargv: len(argv), ents: map[int]*entry{}, now: r.now}
	sem := r.s.Kind == SemAcquire || r.s.Kind == SemRelease || r.s.Kind == SemExtend
	for i := range r.keys {
		x := st(i + 1)
		e := &entry{idx: i + 1, kind: 's', init: "absent"}
		if sem {
			e.kind, e.zcard, e.zmine = 'z', x.zcard, 2
			if x.zmine {
				e.zmine = 1
			}
		} else if i+1 == r.s.memo && x.present {
			e.init, e.present, e.val, e.val0 = "other", true, x.val, x.val
			if x.ttl >= 0 {
				e.ttl = x.ttl
			}
		} else if i+1 == r.s.memo {
		} else if x.present && r.s.hashKeys() {
			e.kind, e.init, e.present, e.hown, e.hcount = 'h', "other", true, x.val, max(x.count, 1)
			if x.ttl >= 0 {
				e.ttl = x.ttl
			}
		} else if x.present {
			e.init, e.present, e.val, e.val0 = "other", true, x.val, x.val
			if x.ttl >= 0 {
				e.ttl = x.ttl
			}
		} else if r.s.hashKeys() {
			e.kind = 'h'
		}
		m.ents[i+1] = e
	}
	in := &interp{c: r.s.c, m: m, globals: newGlobals(keys, argv)}
	ret, err := in.run()
	return ret, m, err
}

// scriptErr converts a concrete run's failure to the error reply Redis gives.
func scriptErr(err error) error {
	var re *redisError
	var le *luaError
	var rf *refusal
	switch {
	case errors.As(err, &re):
		return ScriptError(re.msg)
	case errors.As(err, &le):
		return ScriptError("ERR " + le.Error())
	case errors.As(err, &rf):
		return ScriptError("ERR drop-in: the script " + rf.msg)
	case errors.Is(err, errSteps{}):
		return ScriptError("ERR drop-in: the script runs too long")
	}
	return ScriptError("ERR drop-in: " + err.Error())
}

// finish converts the reply of the run that matches the quorum's state and
// delivers its PUBLISHes. done says whether the quorum operation took
// effect: a run that writes where it did not (arguments that make the
// script do more than its shape) answers an error instead.
func (r *runner) finish(ctx context.Context, ops Ops, st func(int) start, done bool) (any, error) {
	ret, m, err := r.replay(st)
	if err != nil {
		return nil, scriptErr(err)
	}
	if !done {
		for _, e := range m.ents {
			if e.kind == 'h' {
				if ef, err := hashEffectOf(e); err != nil || ef != "none" {
					return nil, ScriptError("ERR drop-in: with these arguments the script writes where the quorum operation did not")
				}
				continue
			}
			if effectOf(e).kind != "none" || len(e.zadds) > 0 || (len(e.zrems) > 0 && e.zmine == 1) {
				return nil, ScriptError("ERR drop-in: with these arguments the script writes where the quorum operation did not")
			}
		}
	}
	for _, p := range m.pubs {
		ch, ok1 := p.ch.(string)
		msg, ok2 := p.msg.(string)
		if ok1 && ok2 {
			if err := ops.Publish(ctx, ch, msg); err != nil {
				return nil, err
			}
		}
	}
	return convert(ret, true)
}

// convert turns a Lua value into a reply as Redis does.
func convert(v value, top bool) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case bool:
		if v {
			return int64(1), nil
		}
		return nil, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return int64(math.MinInt64), nil
		}
		return int64(v), nil
	case string:
		return v, nil
	case *table:
		if e, ok := v.get("err").(string); ok {
			if top {
				return nil, ScriptError(e)
			}
			return ScriptError(e), nil
		}
		if ok, isStr := v.get("ok").(string); isStr {
			return Status(ok), nil
		}
		out := []any{}
		for _, x := range v.arr {
			if x == nil {
				break
			}
			c, err := convert(x, false)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return nil, ScriptError("ERR drop-in: the script returned a value it cannot convert")
}

func (r *runner) all(x start) func(int) start { return func(int) start { return x } }

// written returns the keys a run changed, with the value and ttl it set.
func (r *runner) written(m *model, kind string) (keys []string, val string, ttl float64, err error) {
	ttl = -1
	for i := 1; i <= len(r.keys); i++ {
		e := m.ents[i]
		if e == nil || effectOf(e).kind != kind {
			continue
		}
		keys = append(keys, r.keys[i-1])
		if kind == "del" {
			continue
		}
		v, _ := e.val.(string)
		t, ok := e.ttl.(float64)
		if !ok || t <= 0 {
			return nil, "", 0, ScriptError("ERR invalid expire time in 'set' command")
		}
		if (val != "" && v != val) || (ttl >= 0 && t != ttl) {
			return nil, "", 0, ScriptError("ERR drop-in: the script sets keys to different values or ttls")
		}
		val, ttl = v, t
	}
	return keys, val, ttl, nil
}

// acquireEach takes every key, each with its own value, one quorum
// acquire per key in the order of KEYS; when one is not granted, those
// granted before it are released and the script answers as it does when
// that key is held by another (and the keys before it free).
func (r *runner) acquireEach(ctx context.Context, ops Ops) (any, error) {
	_, m, err := r.replay(r.all(start{}))
	if err != nil {
		return r.check(ctx, ops)
	}
	type grant struct {
		key, val string
		ttl      float64
	}
	var want []grant
	for i := 1; i <= len(r.keys); i++ {
		e := m.ents[i]
		if e == nil || effectOf(e).kind != "set" {
			continue
		}
		v, _ := e.val.(string)
		t, ok := e.ttl.(float64)
		if !ok || t <= 0 {
			return nil, ScriptError("ERR invalid expire time in 'set' command")
		}
		want = append(want, grant{r.keys[i-1], v, t})
	}
	if len(want) != len(r.keys) { // these arguments take nothing: answer as read
		return r.check(ctx, ops)
	}
	for i, g := range want {
		granted, err := ops.Acquire(ctx, []string{g.key}, g.val, msDuration(g.ttl), false)
		if err == nil && granted {
			continue
		}
		for _, h := range want[:i] {
			if _, rerr := ops.Release(ctx, []string{h.key}, h.val); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			return nil, err
		}
		taken := i + 1
		return r.finish(ctx, ops, func(j int) start {
			if j == taken {
				return start{present: true, val: "\x00another holder", ttl: 1}
			}
			return start{}
		}, false)
	}
	return r.finish(ctx, ops, r.all(start{}), true)
}

// other is the state used when the quorum reports another holder: read
// from the quorum when the reply depends on it.
func (r *runner) other(ctx context.Context, ops Ops) (func(int) start, error) {
	if !r.s.readsOther {
		return r.all(start{present: true, val: "\x00another holder", ttl: 1}), nil
	}
	sts := map[int]start{}
	for i, k := range r.keys {
		v, pttl, held, err := ops.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if !held {
			v, pttl = "\x00another holder", time.Millisecond
		}
		sts[i+1] = start{present: true, val: v, ttl: float64(pttl.Milliseconds())}
	}
	return func(i int) start { return sts[i] }, nil
}

func (r *runner) acquire(ctx context.Context, ops Ops) (any, error) {
	if r.s.keyValues > 0 {
		return r.acquireEach(ctx, ops)
	}
	_, m, err := r.replay(r.all(start{}))
	if err != nil { // fails where it would write: answer from the real state
		return r.check(ctx, ops)
	}
	keys, val, ttl, err := r.written(m, "set")
	if err != nil {
		return r.check(ctx, ops)
	}
	if len(keys) == 0 { // these arguments take nothing: answer as read
		return r.check(ctx, ops)
	}
	granted, err := ops.Acquire(ctx, keys, val, msDuration(ttl), r.s.Reentrant)
	if err != nil {
		return nil, err
	}
	if granted {
		return r.finish(ctx, ops, r.all(start{}), true)
	}
	st, err := r.other(ctx, ops)
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, ops, st, false)
}

func (r *runner) value() string {
	if j := r.s.Value - keysValue; j >= 1 && j <= len(r.keys) {
		return r.keys[j-1]
	}
	if r.s.Value >= 1 && r.s.Value <= len(r.argv) {
		return r.argv[r.s.Value-1]
	}
	return ""
}

// valueMissing reports whether the value the shape compares with is not
// among the arguments (a comparison with nil: never equal).
func (r *runner) valueMissing() bool {
	if j := r.s.Value - keysValue; j >= 1 {
		return j > len(r.keys)
	}
	return r.s.Value > len(r.argv)
}

func (r *runner) releaseOrExtend(ctx context.Context, ops Ops) (any, error) {
	if r.valueMissing() { // compared with nil: never equal
		return r.check(ctx, ops)
	}
	mine := start{present: true, val: r.value(), ttl: 1}
	if r.s.needsPTTL {
		_, pttl, held, err := ops.Get(ctx, r.keys[0])
		if err != nil {
			return nil, err
		}
		if held {
			mine.ttl = float64(pttl.Milliseconds())
		}
	}
	_, m, err := r.replay(r.all(mine))
	if err != nil { // fails where it would write: answer from the real state
		return r.check(ctx, ops)
	}
	var st State
	if keys, _, _, _ := r.written(m, "del"); len(keys) > 0 {
		// A release, or an extend to a time already past (Redis deletes).
		if st, err = ops.Release(ctx, keys, r.value()); err != nil {
			return nil, err
		}
	} else {
		keys, _, ttl, err := r.written(m, "expire")
		if err != nil {
			return r.check(ctx, ops)
		}
		if len(keys) == 0 {
			return r.check(ctx, ops)
		}
		if st, err = ops.Extend(ctx, keys, r.value(), msDuration(ttl)); err != nil {
			return nil, err
		}
	}
	switch st {
	case Mine:
		return r.finish(ctx, ops, r.all(mine), true)
	case Absent:
		return r.finish(ctx, ops, r.all(start{}), false)
	}
	o, err := r.other(ctx, ops)
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, ops, o, false)
}

// hashKeys reports whether the shape keeps its locks in hashes.
func (s *Shape) hashKeys() bool {
	switch s.Kind {
	case HashAcquire, HashExtend, HashRelease:
		return true
	case ForceRelease:
		return s.c != nil && s.c.hashes
	}
	return false
}

// force runs a script that deletes its keys whatever holds them.
func (r *runner) force(ctx context.Context, ops Ops) (any, error) {
	held, err := ops.Delete(ctx, r.keys)
	if err != nil {
		return nil, err
	}
	any := false
	for _, h := range held {
		any = any || h
	}
	return r.finish(ctx, ops, func(i int) start {
		if i <= len(held) && held[i-1] {
			return start{present: true, val: "\x00another holder", ttl: 1}
		}
		return start{}
	}, any)
}

// hashState reads, after the quorum operation did not act for owner, a
// hash lock's state from the quorum: its owner and ttl. What the quorum
// says must be consistent with the operation's refusal: a lock read free
// after an acquire was refused (or read as owner's after any refusal)
// changed in between, and is answered as held by another for 1 ms.
func (r *runner) hashState(ctx context.Context, ops Ops, owner string, acquire bool) (func(int) start, error) {
	v, pttl, held, err := ops.Get(ctx, r.keys[0])
	if err != nil {
		return nil, err
	}
	st := start{}
	switch {
	case held && v != owner:
		st = start{present: true, val: v, ttl: float64(pttl.Milliseconds()), count: 1}
	case held || acquire:
		st = start{present: true, val: "\x00another holder", ttl: 1, count: 1}
	}
	return func(i int) start {
		if i == 1 {
			return st
		}
		return start{}
	}, nil
}

// setMemo records the answer a release's run m set in its memo key (as a
// lock holding that answer for the memo's ttl), so that a retried request
// reads it; a memo another request set first stays.
func (r *runner) setMemo(ctx context.Context, ops Ops, m *model) error {
	if r.s.memo == 0 || r.s.memo > len(r.keys) {
		return nil
	}
	e := m.ents[r.s.memo]
	if e == nil || effectOf(e).kind != "set" {
		return nil
	}
	keys, val, ttl, err := r.written(m, "set")
	if err != nil || len(keys) != 1 {
		return err
	}
	_, err = ops.Acquire(ctx, keys, val, msDuration(ttl), false)
	return err
}

// hashBatch runs a batch of hash lock extensions: each key's own owner,
// each key extended on its own quorum operation.
func (r *runner) hashBatch(ctx context.Context, ops Ops) (any, error) {
	owner := func(i int) (string, bool) {
		j := i + r.s.batch
		if j > len(r.argv) {
			return "", false
		}
		return r.argv[j-1], true
	}
	mine := func(i int) start {
		o, _ := owner(i)
		return start{present: true, val: o, ttl: 1, count: 1}
	}
	for i := 1; i <= len(r.keys); i++ {
		if _, ok := owner(i); !ok {
			return nil, ScriptError(fmt.Sprintf("ERR drop-in: KEYS[%d] has no owner in ARGV[%d]", i, i+r.s.batch))
		}
	}
	_, m, err := r.replay(mine)
	if err != nil {
		return nil, scriptErr(err)
	}
	held := make([]bool, len(r.keys))
	for i, key := range r.keys {
		e := m.ents[i+1]
		t, ok := e.ttl.(float64)
		if e == nil || !e.ttlSet || !ok || t <= 0 {
			return nil, ScriptError("ERR invalid expire time in 'pexpire' command")
		}
		o, _ := owner(i + 1)
		st, err := ops.HoldExtend(ctx, key, o, msDuration(t))
		if err != nil {
			return nil, err
		}
		held[i] = st == Mine
	}
	return r.finish(ctx, ops, func(i int) start {
		if held[i-1] {
			return mine(i)
		}
		return start{}
	}, true)
}

// hash runs a hash lock's acquire, extend or release.
func (r *runner) hash(ctx context.Context, ops Ops) (any, error) {
	if len(r.keys) == 0 || r.valueMissing() {
		return nil, ScriptError("ERR drop-in: the hash lock's key or owner is missing")
	}
	key, owner := r.keys[0], r.value()
	one := func(x start) func(int) start {
		return func(i int) start {
			if i == 1 {
				return x
			}
			return start{}
		}
	}
	ttlOf := func(m *model) (time.Duration, error) {
		e := m.ents[1]
		if e == nil {
			return 0, ScriptError("ERR invalid expire time in 'pexpire' command")
		}
		t, ok := e.ttl.(float64)
		if !e.ttlSet || !ok || t <= 0 {
			return 0, ScriptError("ERR invalid expire time in 'pexpire' command")
		}
		return msDuration(t), nil
	}
	mine := start{present: true, val: owner, ttl: 1, count: 1}
	switch r.s.Kind {
	case HashAcquire:
		_, m, err := r.replay(one(start{}))
		if err != nil {
			return nil, scriptErr(err)
		}
		ttl, err := ttlOf(m)
		if err != nil {
			return nil, err
		}
		granted, err := ops.Hold(ctx, key, owner, ttl)
		if err != nil {
			return nil, err
		}
		if granted {
			return r.finish(ctx, ops, one(start{}), true)
		}
		st, err := r.hashState(ctx, ops, owner, true)
		if err != nil {
			return nil, err
		}
		return r.finish(ctx, ops, st, false)
	case HashExtend:
		if r.s.batch > 0 {
			return r.hashBatch(ctx, ops)
		}
		_, m, err := r.replay(one(mine))
		if err != nil {
			return nil, scriptErr(err)
		}
		ttl, err := ttlOf(m)
		if err != nil {
			return nil, err
		}
		st, err := ops.HoldExtend(ctx, key, owner, ttl)
		if err != nil {
			return nil, err
		}
		if st == Mine {
			return r.finish(ctx, ops, one(mine), true)
		}
	default: // HashRelease
		if m := r.s.memo; m > 0 && m <= len(r.keys) {
			// A retried release answers what the memo recorded.
			v, pttl, held, err := ops.Get(ctx, r.keys[m-1])
			if err != nil {
				return nil, err
			}
			if held {
				return r.finish(ctx, ops, func(i int) start {
					if i == m {
						return start{present: true, val: v, ttl: float64(pttl.Milliseconds())}
					}
					return start{}
				}, false)
			}
		}
		st, left, err := ops.Unhold(ctx, key, owner)
		if err != nil {
			return nil, err
		}
		if st == Mine {
			mine.count = float64(left + 1)
			_, m, err := r.replay(one(mine))
			if err != nil {
				return nil, scriptErr(err)
			}
			// While holds remain the script sets the expiry again.
			if e := m.ents[1]; left > 0 && e != nil && e.present && e.ttlSet {
				ttl, err := ttlOf(m)
				if err != nil {
					return nil, err
				}
				if _, err := ops.HoldExtend(ctx, key, owner, ttl); err != nil {
					return nil, err
				}
			}
			if err := r.setMemo(ctx, ops, m); err != nil {
				return nil, err
			}
			return r.finish(ctx, ops, one(mine), true)
		}
	}
	st, err := r.hashState(ctx, ops, owner, false)
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, ops, st, false)
}

// check answers a script that only reads, from the quorum's state.
func (r *runner) check(ctx context.Context, ops Ops) (any, error) {
	sts := map[int]start{}
	for i, k := range r.keys {
		v, pttl, held, err := ops.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if held {
			sts[i+1] = start{present: true, val: v, ttl: float64(pttl.Milliseconds())}
		}
	}
	ret, m, err := r.replay(func(i int) start { return sts[i] })
	if err != nil {
		return nil, scriptErr(err)
	}
	for _, e := range m.ents {
		if effectOf(e).kind != "none" || len(m.pubs) > 0 {
			return nil, ScriptError("ERR drop-in: with these arguments the script writes where it was recognised as only reading")
		}
	}
	return convert(ret, true)
}

func (r *runner) sem(ctx context.Context, ops Ops) (any, error) {
	if len(r.keys) == 0 {
		return nil, ScriptError("ERR drop-in: no key")
	}
	name, token := r.keys[0], r.value()
	if r.s.Value > len(r.argv) {
		return nil, ScriptError("ERR drop-in: the semaphore token is missing")
	}
	free := start{zcard: 0}
	full := start{zcard: math.MaxInt32}
	mine := start{zmine: true}
	var st State
	switch r.s.Kind {
	case SemAcquire:
		_, m, err := r.replay(r.all(free))
		if err != nil {
			return nil, scriptErr(err)
		}
		limit, ok1 := evalSx(r.s.limit, r.argv, nil)
		count, ok2 := evalSx(r.s.count, r.argv, nil)
		ttl, ok3 := m.ents[1].zttl.(float64)
		if !ok1 || !ok2 || limit != math.Trunc(limit) || count != math.Trunc(count) {
			return nil, ScriptError("ERR drop-in: the semaphore's limit and count must be integers")
		}
		if !ok3 || ttl <= 0 {
			return nil, ScriptError("ERR invalid expire time in 'pexpire' command")
		}
		granted, err := ops.SemAcquire(ctx, name, int(limit), int(count), msDuration(ttl), token)
		if err != nil {
			return nil, err
		}
		if granted {
			return r.finish(ctx, ops, r.all(free), true)
		}
		return r.finish(ctx, ops, r.all(full), false)
	case SemRelease:
		var err error
		if st, err = ops.SemRelease(ctx, name, token); err != nil {
			return nil, err
		}
	case SemExtend:
		_, m, err := r.replay(r.all(mine))
		if err != nil {
			return nil, scriptErr(err)
		}
		ttl, ok := m.ents[1].zttl.(float64)
		if !ok || ttl <= 0 {
			return nil, ScriptError("ERR invalid expire time in 'pexpire' command")
		}
		if st, err = ops.SemExtend(ctx, name, token, msDuration(ttl)); err != nil {
			return nil, err
		}
	}
	if st == Mine {
		return r.finish(ctx, ops, r.all(mine), true)
	}
	return r.finish(ctx, ops, r.all(free), false)
}

// runDeclared runs a declared shape.
func (s *Shape) runDeclared(ctx context.Context, ops Ops, keys, argv []string) (any, error) {
	d := s.decl
	get := func(i int) (string, error) {
		if i < 1 || i > len(argv) {
			return "", ScriptError(fmt.Sprintf("ERR drop-in: ARGV[%d] is missing", i))
		}
		return argv[i-1], nil
	}
	num := func(i int) (int64, error) {
		a, err := get(i)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return 0, ScriptError("ERR value is not an integer or out of range")
		}
		return n, nil
	}
	ks := keys
	if d.Key > 0 {
		if d.Key > len(keys) {
			return nil, ScriptError(fmt.Sprintf("ERR drop-in: KEYS[%d] is missing", d.Key))
		}
		ks = keys[d.Key-1 : d.Key]
	}
	if len(ks) == 0 {
		return nil, ScriptError("ERR drop-in: no key")
	}
	val, err := get(d.Value)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if d.TTL > 0 {
		n, err := num(d.TTL)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, ScriptError("ERR invalid expire time in 'set' command")
		}
		ttl = time.Duration(n) * time.Millisecond
		if d.TTLUnit == "s" {
			ttl = time.Duration(n) * time.Second
		}
	}
	reply := func(ok bool) any {
		if ok {
			return d.Done
		}
		return d.Failed
	}
	switch d.Shape {
	case Acquire:
		ok, err := ops.Acquire(ctx, ks, val, ttl, d.Reentrant)
		return reply(ok), err
	case Release:
		st, err := ops.Release(ctx, ks, val)
		return reply(st == Mine), err
	case Extend:
		st, err := ops.Extend(ctx, ks, val, ttl)
		return reply(st == Mine), err
	case Check:
		v, pttl, held, err := ops.Get(ctx, ks[0])
		if err != nil || !held || v != val {
			return d.Failed, err
		}
		return pttl.Milliseconds(), nil
	case SemAcquire:
		limit, err := num(d.Limit)
		if err != nil {
			return nil, err
		}
		count := int64(1)
		if d.Count > 0 {
			if count, err = num(d.Count); err != nil {
				return nil, err
			}
		}
		ok, err := ops.SemAcquire(ctx, ks[0], int(limit), int(count), ttl, val)
		return reply(ok), err
	case SemRelease:
		st, err := ops.SemRelease(ctx, ks[0], val)
		return reply(st == Mine), err
	case SemExtend:
		st, err := ops.SemExtend(ctx, ks[0], val, ttl)
		return reply(st == Mine), err
	}
	return nil, fmt.Errorf("unknown shape %q", d.Shape)
}
