package luashape

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A read-write lock kept in a sorted set (Symfony Lock's RedisStore): one
// sorted set per lock whose members are the holders' tokens, each scored
// by the time (ms) its hold ends, and a constant member (a marker such as
// "__write__") present while the one token in the set holds it
// exclusively. Such a lock is in one of six states as seen by a client
// whose token is T:
//
//	zFree        {}
//	zWrite       {T, marker}    T holds it exclusively
//	zRead        {T}            T is its only reader
//	zReadShared  {T, O}         T reads, and so does another
//	zOtherWrite  {O, marker}    another holds it exclusively
//	zOtherRead   {O}            others read
//
// A script is recognised as such a lock's operation (ZLock) when, run
// concretely from each state, it ends in a state and with changes that
// one of the quorum's read-write lock operations makes (zlockMoves),
// never touching another holder's member. Run reads the state from a
// quorum, runs the script from it with the client's arguments, and makes
// the move the script made as quorum operations (RWOps), then answers
// what the script answered; a run that would make any other move (a
// promotion of a read lock to a write lock included) is refused.

// ZLock is a read-write lock operation on a sorted set: its shape says
// which ARGV is the token; Run works out the move each call makes.
const ZLock Kind = "zlock"

// zstate is a sorted-set lock's state as seen by one token.
type zstate int

const (
	zFree zstate = iota
	zWrite
	zRead
	zReadShared
	zOtherWrite
	zOtherRead
	zInvalid
)

var zstateNames = [...]string{"free", "held for writing by the token", "read by the token alone", "read by the token and another", "held for writing by another", "read by others", "an invalid state"}

func (z zstate) String() string { return zstateNames[z] }

// RWOps is what a quorum offers for read-write locks. Each method is one
// quorum operation on key's read-write lock (the RRLOCK family's readers
// and the RLOCK family's writer). RWState reads what a quorum agrees on:
// the writer's token ("" when none), whether token reads, whether another
// token reads, and the time left (the writer's, or the readers').
// WriteAcquire takes the lock exclusively for token when it is free;
// ReadAcquire adds token as a reader when no writer other than token
// holds it (a writer that reads too keeps its write lock until
// WriteRelease). The releases and extensions report whether token held
// what they release or extend.
type RWOps interface {
	RWState(ctx context.Context, key, token string) (writer string, reads, othersRead bool, ttl time.Duration, err error)
	WriteAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	WriteRelease(ctx context.Context, key, token string) (bool, error)
	WriteExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	ReadAcquire(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
	ReadRelease(ctx context.Context, key, token string) (bool, error)
	ReadExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error)
}

// zmove is what a script did from one state.
type zmove struct {
	from, to zstate
	// refresh: the token's member got a new score (ttl: the new score
	// minus now).
	refresh bool
	ttl     float64
}

// zset is a sorted set of a concrete run.
type zset struct {
	m   map[string]float64
	exp float64 // absolute ms; 0: no expiry
	// added are the members a ZADD set (a new score, or the same one
	// again: a refresh either way).
	added map[string]bool
}

// zlockRun is a concrete run's sorted-set model and what the run touched.
type zlockRun struct {
	sets    map[int]*zset
	members map[string]bool // every member the script named
	pubs    []pub
}

// Names of the synthetic members of a recognition run: another holder
// and the marker of a script that names none (a script that only reads
// its token's member never does).
const (
	zOther      = "\x00another-holder"
	zNoMarker   = "\x00no-marker"
	zlockLeftMs = 10000 // what a held member has left in a recognition run
)

// recogniseZLock runs c from each state of a sorted-set lock and matches
// what it does with the read-write lock's moves.
func recogniseZLock(c *chunk) (*Shape, error) {
	if c.keys != 1 || c.dynK {
		return nil, errors.New("a sorted-set lock script uses one key")
	}
	nargv := c.argv
	if nargv == 0 {
		return nil, errors.New("a sorted-set lock script takes its token in ARGV")
	}
	argv := make([]string, nargv)
	for i := range argv {
		argv[i] = strconv.Itoa(30001 + i) // distinct, and numbers for ttls
	}
	s := &Shape{Kind: ZLock, c: c}
	now := 1.7e12
	// Which ARGV is the token, and which constant is the marker: the
	// members the script names from the states where the token holds.
	named := map[string]bool{}
	for t := 1; t <= nargv; t++ {
		r := &runner{s: &Shape{Kind: ZLock, c: c, Value: t}, keys: []string{"k"}, argv: argv, now: now}
		for st := zFree; st < zInvalid; st++ {
			_, zr, err := r.replayZ(st, zNoMarker, zlockLeftMs)
			if err == nil {
				for m := range zr.members {
					named[m] = true
				}
			}
		}
	}
	token, marker := 0, ""
	for m := range named {
		if m == zOther || m == zNoMarker {
			continue
		}
		if i, err := strconv.Atoi(m); err == nil && i >= 30001 && i < 30001+nargv {
			if token != 0 && token != i-30000 {
				return nil, errors.New("names sorted-set members from two ARGV")
			}
			token = i - 30000
			continue
		}
		if marker != "" {
			return nil, errors.New("names more than one constant sorted-set member")
		}
		marker = m
	}
	if token == 0 {
		return nil, errors.New("names no sorted-set member from ARGV")
	}
	if marker == "" {
		marker = zNoMarker
	}
	s.Value, s.zmarker = token, marker
	r := &runner{s: s, keys: []string{"k"}, argv: argv, now: now}
	for st := zFree; st < zInvalid; st++ {
		_, zr, err := r.replayZ(st, marker, zlockLeftMs)
		if err != nil {
			var rf *refusal
			if errors.As(err, &rf) {
				return nil, rf
			}
			continue // an error reply from this state is an answer
		}
		mv, err := r.zmoveOf(st, zr, zlockLeftMs)
		if err != nil {
			return nil, fmt.Errorf("from a lock %s: %w", st, err)
		}
		if _, err := zopsFor(mv); err != nil && !errors.Is(err, errPromotion) {
			return nil, fmt.Errorf("from a lock %s: %w", st, err)
		}
	}
	return s, nil
}

// replayZ runs the script concretely from state st, the token's and the
// other holder's members having left ms left.
func (r *runner) replayZ(st zstate, marker string, left float64) (value, *zlockRun, error) {
	token := r.value()
	z := &zset{m: map[string]float64{}, added: map[string]bool{}}
	score := zheld(r.now, left)
	switch st {
	case zWrite:
		z.m[token], z.m[marker] = score, score
	case zRead:
		z.m[token] = score
	case zReadShared:
		z.m[token], z.m[zOther] = score, score
	case zOtherWrite:
		z.m[zOther], z.m[marker] = score, score
	case zOtherRead:
		z.m[zOther] = score
	}
	if len(z.m) > 0 {
		z.exp = score
	}
	keys := make([]value, len(r.keys))
	for i, k := range r.keys {
		keys[i] = k
	}
	argv := make([]value, len(r.argv))
	for i, a := range r.argv {
		argv[i] = a
	}
	zr := &zlockRun{sets: map[int]*zset{1: z}, members: map[string]bool{}}
	m := &model{keys: keys, nargv: len(argv), ents: map[int]*entry{}, now: r.now, zl: zr}
	in := &interp{c: r.s.c, m: m, globals: newGlobals(keys, argv)}
	ret, err := in.run()
	zr.pubs = m.pubs
	if err != nil {
		return nil, zr, err
	}
	if len(m.ents) > 0 {
		return nil, zr, in.refuse("uses its key both as a sorted set and otherwise")
	}
	return ret, zr, nil
}

// zheld is the score of a member held with left ms left in a run.
func zheld(now, left float64) float64 { return now + left }

// zmoveOf reads the move a run made from state from.
func (r *runner) zmoveOf(from zstate, zr *zlockRun, left float64) (zmove, error) {
	token, marker := r.value(), r.s.zmarker
	z := zr.sets[1]
	live := map[string]float64{}
	for m, sc := range z.m {
		if sc > r.now && (z.exp == 0 || z.exp > r.now) {
			live[m] = sc
		}
	}
	mv := zmove{from: from}
	_, t := live[token]
	_, w := live[marker]
	o, oth := live[zOther]
	hadOther := from == zReadShared || from == zOtherWrite || from == zOtherRead
	if oth != hadOther || (oth && o != zheld(r.now, left)) {
		return mv, errors.New("changes another holder's member")
	}
	for m := range live {
		if m != token && m != marker && m != zOther {
			return mv, fmt.Errorf("adds the member %q", m)
		}
	}
	switch {
	case !t && !w && !oth:
		mv.to = zFree
	case t && w && !oth:
		mv.to = zWrite
	case t && !w && !oth:
		mv.to = zRead
	case t && !w && oth:
		mv.to = zReadShared
	case !t && w && oth:
		mv.to = zOtherWrite
	case !t && !w && oth:
		mv.to = zOtherRead
	default:
		return mv, errors.New("leaves the marker without a single holder, or a writer beside a reader")
	}
	if t {
		sc := live[token]
		if z.added[token] {
			mv.refresh, mv.ttl = true, sc-r.now
		}
		if w && live[marker] < sc {
			return mv, errors.New("ends the exclusive hold before the token's")
		}
	}
	if !mv.refresh && (mv.to == zWrite || mv.to == zRead || mv.to == zReadShared) && mv.to != from {
		return mv, errors.New("gives the token a hold without a new expiry")
	}
	return mv, nil
}

// zop is one quorum operation of a move.
type zop int

const (
	zopWriteAcquire zop = iota
	zopWriteRelease
	zopWriteExtend
	zopReadAcquire
	zopReadRelease
	zopReadExtend
)

var errPromotion = errors.New("turns the token's read lock into a write lock, which the proxy does not do on a quorum: release the read lock, then acquire the write lock")

// zopsFor maps a move to the quorum operations that make it.
func zopsFor(mv zmove) ([]zop, error) {
	switch {
	case mv.from == mv.to && !mv.refresh:
		return nil, nil
	case mv.from == zFree && mv.to == zWrite:
		return []zop{zopWriteAcquire}, nil
	case (mv.from == zFree && mv.to == zRead) || (mv.from == zOtherRead && mv.to == zReadShared):
		return []zop{zopReadAcquire}, nil
	case mv.from == zWrite && mv.to == zWrite:
		return []zop{zopWriteExtend}, nil
	case mv.from == zWrite && mv.to == zRead:
		// a downgrade: the read lock is taken while the write lock
		// still holds, then the write lock leaves it to the readers
		return []zop{zopReadAcquire, zopWriteRelease}, nil
	case mv.from == zWrite && mv.to == zFree:
		return []zop{zopWriteRelease}, nil
	case (mv.from == zRead || mv.from == zReadShared) && mv.to == mv.from:
		return []zop{zopReadExtend}, nil
	case (mv.from == zRead && mv.to == zFree) || (mv.from == zReadShared && mv.to == zOtherRead):
		return []zop{zopReadRelease}, nil
	case mv.from == zRead && mv.to == zWrite:
		return nil, errPromotion
	}
	return nil, fmt.Errorf("moves the lock from %s to %s", mv.from, mv.to)
}

// zlock runs a ZLock shape: read the state, run the script from it, make
// its move on the quorum; when the quorum refuses the move (the state
// changed meanwhile), read the state again.
func (r *runner) zlock(ctx context.Context, ops Ops) (any, error) {
	rw, ok := ops.(RWOps)
	if !ok {
		return nil, ScriptError("ERR drop-in: read-write locks are not served here")
	}
	if len(r.keys) != 1 {
		return nil, ScriptError("ERR drop-in: a sorted-set lock script takes one key")
	}
	if r.valueMissing() {
		return nil, ScriptError(fmt.Sprintf("ERR drop-in: ARGV[%d], the lock's token, is missing", r.s.Value))
	}
	key, token := r.keys[0], r.value()
	for try := 0; ; try++ {
		writer, reads, othersRead, ttl, err := rw.RWState(ctx, key, token)
		if err != nil {
			return nil, err
		}
		st := rwState(token, writer, reads, othersRead)
		left := math.Max(float64(ttl.Milliseconds()), 1)
		ret, zr, err := r.replayZ(st, r.s.zmarker, left)
		if err != nil {
			return nil, scriptErr(err)
		}
		mv, err := r.zmoveOf(st, zr, left)
		var zs []zop
		if err == nil {
			zs, err = zopsFor(mv)
		}
		if err != nil {
			return nil, ScriptError("ERR drop-in: with these arguments the script " + err.Error())
		}
		if mv.refresh && mv.ttl < 1 {
			return nil, ScriptError("ERR invalid expire time in 'pexpireat' command")
		}
		done := true
		for _, z := range zs {
			ok, err := r.zdo(ctx, rw, z, key, token, msDuration(mv.ttl), st == zWrite && reads)
			if err != nil {
				return nil, err
			}
			if !ok && (z == zopWriteAcquire || z == zopReadAcquire) {
				// Not granted on a quorum: another client got in
				// first, and the script answers as it does when
				// another holds the lock for writing.
				return r.zlockRefused(st)
			}
			if !ok {
				done = false
				break
			}
		}
		if done {
			for _, p := range zr.pubs {
				ch, ok1 := p.ch.(string)
				msg, ok2 := p.msg.(string)
				if !ok1 || !ok2 {
					continue
				}
				if err := ops.Publish(ctx, ch, msg); err != nil {
					return nil, err
				}
			}
			return convert(ret, true)
		}
		if try == 2 {
			return nil, ScriptError("ERR drop-in: the lock changed state three times while the script ran; try again")
		}
	}
}

// rwState is the state of a read-write lock as token sees it, from what
// RWOps.RWState reports.
func rwState(token, writer string, reads, othersRead bool) zstate {
	switch {
	case writer == token:
		return zWrite
	case writer != "":
		return zOtherWrite
	case reads && othersRead:
		return zReadShared
	case reads:
		return zRead
	case othersRead:
		return zOtherRead
	}
	return zFree
}

// zlockRefused answers an acquire the quorum did not grant from state st
// as the script does from a lock another holds for writing; a script that
// would make a move from there is answered an error.
func (r *runner) zlockRefused(st zstate) (any, error) {
	ret, zr, err := r.replayZ(zOtherWrite, r.s.zmarker, zlockLeftMs)
	if err != nil {
		return nil, scriptErr(err)
	}
	if mv, err := r.zmoveOf(zOtherWrite, zr, zlockLeftMs); err != nil || mv.to != zOtherWrite || mv.refresh {
		return nil, ScriptError(fmt.Sprintf("ERR drop-in: a quorum did not grant the script's acquire from a lock %s", st))
	}
	return convert(ret, true)
}

// zdo runs one quorum operation; alsoReads: the token holds a read lock
// beside its write lock, which a release of the write lock ends too.
func (r *runner) zdo(ctx context.Context, rw RWOps, z zop, key, token string, ttl time.Duration, alsoReads bool) (bool, error) {
	switch z {
	case zopWriteAcquire:
		return rw.WriteAcquire(ctx, key, token, ttl)
	case zopWriteRelease:
		ok, err := rw.WriteRelease(ctx, key, token)
		if err == nil && ok && alsoReads {
			_, err = rw.ReadRelease(ctx, key, token)
		}
		return ok, err
	case zopWriteExtend:
		return rw.WriteExtend(ctx, key, token, ttl)
	case zopReadAcquire:
		return rw.ReadAcquire(ctx, key, token, ttl)
	case zopReadRelease:
		return rw.ReadRelease(ctx, key, token)
	}
	return rw.ReadExtend(ctx, key, token, ttl)
}

// zlockCall runs a command of a concrete sorted-set lock run; handled is
// false for commands that do not touch keys (TIME, SELECT, PUBLISH).
func (in *interp) zlockCall(cmd string, a []value) (v value, handled bool, err error) {
	switch cmd {
	case "TIME", "SELECT", "PUBLISH", "SPUBLISH":
		return nil, false, nil
	}
	zr := in.m.zl
	if len(a) == 0 {
		return nil, true, wrongArgs(cmd)
	}
	idx := 0
	if k, ok := a[0].(string); ok {
		for i, s := range in.m.keys {
			if s == k {
				idx = i + 1
				break
			}
		}
	}
	if idx == 0 {
		return nil, true, in.refuse("touches a key that is not one of KEYS")
	}
	z := zr.sets[idx]
	now := in.m.now.(float64)
	if z.exp != 0 && z.exp <= now {
		z.m, z.exp = map[string]float64{}, 0
	}
	need := func(n int, exact bool) error {
		if len(a) < n || (exact && len(a) != n) {
			return wrongArgs(cmd)
		}
		return nil
	}
	str := func(i int) (string, error) {
		s, ok := a[i].(string)
		if !ok {
			return "", in.refuse("passes a value the run cannot compute")
		}
		return s, nil
	}
	member := func(i int) (string, error) {
		s, err := str(i)
		if err == nil {
			zr.members[s] = true
		}
		return s, err
	}
	switch cmd {
	case "TYPE":
		if err := need(1, true); err != nil {
			return nil, true, err
		}
		if len(z.m) > 0 {
			return okStatus("zset"), true, nil
		}
		return okStatus("none"), true, nil
	case "EXISTS":
		if err := need(1, true); err != nil {
			return nil, true, err
		}
		if len(z.m) > 0 {
			return 1.0, true, nil
		}
		return 0.0, true, nil
	case "DEL", "UNLINK":
		if err := need(1, true); err != nil {
			return nil, true, err
		}
		n := 0.0
		if len(z.m) > 0 {
			n = 1
		}
		z.m, z.exp = map[string]float64{}, 0
		return n, true, nil
	case "ZSCORE":
		if err := need(2, true); err != nil {
			return nil, true, err
		}
		m, err := member(1)
		if err != nil {
			return nil, true, err
		}
		if sc, ok := z.m[m]; ok {
			return zfmt(sc), true, nil
		}
		return false, true, nil
	case "ZCARD":
		if err := need(1, true); err != nil {
			return nil, true, err
		}
		return float64(len(z.m)), true, nil
	case "ZCOUNT", "ZREMRANGEBYSCORE":
		if err := need(3, true); err != nil {
			return nil, true, err
		}
		lo, err := in.zbound(a[1])
		if err != nil {
			return nil, true, err
		}
		hi, err := in.zbound(a[2])
		if err != nil {
			return nil, true, err
		}
		n := 0.0
		for m, sc := range z.m {
			if lo.below(sc) && hi.above(sc) {
				n++
				if cmd == "ZREMRANGEBYSCORE" {
					delete(z.m, m)
				}
			}
		}
		if len(z.m) == 0 {
			z.exp = 0
		}
		return n, true, nil
	case "ZADD":
		if err := need(3, false); err != nil {
			return nil, true, err
		}
		rest := a[1:]
		var nx, xx, gt, lt, ch bool
	opts:
		for len(rest) > 0 {
			o, ok := rest[0].(string)
			if !ok {
				break
			}
			switch strings.ToUpper(o) {
			case "NX":
				nx = true
			case "XX":
				xx = true
			case "GT":
				gt = true
			case "LT":
				lt = true
			case "CH":
				ch = true
			default:
				break opts
			}
			rest = rest[1:]
		}
		if len(rest) == 0 || len(rest)%2 != 0 || (nx && (xx || gt || lt)) || (gt && lt) {
			return nil, true, errSyntax
		}
		n := 0.0
		for i := 0; i < len(rest); i += 2 {
			ss, ok := rest[i].(string)
			if !ok {
				return nil, true, in.refuse("passes a score the run cannot compute")
			}
			sc, ok := zscore(ss)
			if !ok {
				return nil, true, errNotFloat
			}
			m, ok := rest[i+1].(string)
			if !ok {
				return nil, true, in.refuse("passes a member the run cannot compute")
			}
			zr.members[m] = true
			old, had := z.m[m]
			switch {
			case had && nx, !had && xx, had && gt && sc <= old, had && lt && sc >= old:
				continue
			}
			if !had || (ch && old != sc) {
				n++
			}
			z.m[m] = sc
			z.added[m] = true
		}
		return n, true, nil
	case "ZREM":
		if err := need(2, false); err != nil {
			return nil, true, err
		}
		n := 0.0
		for i := 1; i < len(a); i++ {
			m, err := member(i)
			if err != nil {
				return nil, true, err
			}
			if _, ok := z.m[m]; ok {
				delete(z.m, m)
				n++
			}
		}
		if len(z.m) == 0 {
			z.exp = 0
		}
		return n, true, nil
	case "ZRANGE", "ZREVRANGE":
		if err := need(3, false); err != nil {
			return nil, true, err
		}
		withScores := false
		for _, o := range a[3:] {
			s, ok := o.(string)
			if !ok || strings.ToUpper(s) != "WITHSCORES" {
				return nil, true, in.refuse("reads a sorted set with options other than WITHSCORES")
			}
			withScores = true
		}
		from, err1 := in.intArg(a[1])
		to, err2 := in.intArg(a[2])
		if err1 != nil || err2 != nil {
			return nil, true, errNotInt
		}
		type ms struct {
			m  string
			sc float64
		}
		var all []ms
		for m, sc := range z.m {
			all = append(all, ms{m, sc})
		}
		sort.Slice(all, func(i, j int) bool {
			if all[i].sc != all[j].sc {
				return all[i].sc < all[j].sc
			}
			return all[i].m < all[j].m
		})
		if cmd == "ZREVRANGE" {
			for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
				all[i], all[j] = all[j], all[i]
			}
		}
		n := len(all)
		f, t := int(from.(float64)), int(to.(float64))
		if f < 0 {
			f += n
		}
		if t < 0 {
			t += n
		}
		f = max(f, 0)
		t = min(t, n-1)
		out := &table{}
		for i := f; i <= t; i++ {
			out.arr = append(out.arr, all[i].m)
			if withScores {
				out.arr = append(out.arr, zfmt(all[i].sc))
			}
		}
		return out, true, nil
	case "PEXPIREAT", "EXPIREAT", "PEXPIRE", "EXPIRE":
		if err := need(2, true); err != nil {
			return nil, true, err
		}
		tv, err := in.intArg(a[1])
		if err != nil {
			return nil, true, err
		}
		at := tv.(float64)
		switch cmd {
		case "EXPIREAT":
			at *= 1000
		case "PEXPIRE":
			at += now
		case "EXPIRE":
			at = now + at*1000
		}
		if len(z.m) == 0 {
			return 0.0, true, nil
		}
		if at <= now {
			z.m, z.exp = map[string]float64{}, 0
		} else {
			z.exp = at
		}
		return 1.0, true, nil
	case "PTTL", "TTL":
		if err := need(1, true); err != nil {
			return nil, true, err
		}
		switch {
		case len(z.m) == 0:
			return -2.0, true, nil
		case z.exp == 0:
			return -1.0, true, nil
		case cmd == "TTL":
			return math.Round((z.exp - now) / 1000), true, nil
		}
		return z.exp - now, true, nil
	}
	return nil, true, in.refuse("calls %s on a sorted-set lock", cmd)
}

// zfmt formats a score as Redis replies it.
func zfmt(sc float64) string {
	switch {
	case math.IsInf(sc, 1):
		return "inf"
	case math.IsInf(sc, -1):
		return "-inf"
	}
	return strconv.FormatFloat(sc, 'g', 17, 64)
}

// zscore parses a score argument.
func zscore(s string) (float64, bool) {
	switch strings.ToLower(s) {
	case "+inf", "inf":
		return math.Inf(1), true
	case "-inf":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsNaN(f)
}

// zbnd is a ZCOUNT / ZREMRANGEBYSCORE bound.
type zbnd struct {
	v    float64
	open bool
}

func (b zbnd) below(sc float64) bool { return b.v < sc || (!b.open && b.v == sc) }
func (b zbnd) above(sc float64) bool { return sc < b.v || (!b.open && b.v == sc) }

func (in *interp) zbound(v value) (zbnd, error) {
	s, ok := v.(string)
	if !ok {
		return zbnd{}, in.refuse("passes a score range the run cannot compute")
	}
	b := zbnd{}
	if strings.HasPrefix(s, "(") {
		b.open, s = true, s[1:]
	}
	f, ok := zscore(s)
	if !ok {
		return zbnd{}, &redisError{"ERR min or max is not a float"}
	}
	b.v = f
	return b, nil
}
