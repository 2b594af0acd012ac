package luashape

import (
	"math"
	"strconv"
	"strings"
)

// entry is one key of the modelled Redis.
type entry struct {
	idx  int  // KEYS index, 1-based
	kind byte // 's' string, 'z' sorted set, 0 not yet used

	// A string key.
	init    string // symbolic runs: "absent", "argv" (holds ARGV[hi]) or "other"
	hi      int
	present bool
	val     value // string or *sym
	val0    value // the value it started with
	ttl     value // remaining ms (float64 or *sym); nil: no expiry
	valSet  bool
	ttlSet  bool
	readTTL bool
	wrote   stmt // the first statement that wrote it

	// A sorted set (a semaphore): whether the client's members are in it.
	zmine int // 0 not asked yet, 1 in it, 2 not
	zcard value
	zadds []value
	zrems []value
	zttl  value

	// A hash (a re-entrant lock in Redisson's layout): one owner field
	// and its hold count, present with the key.
	hown   value // the owner field: *sym or string
	hcount value // its count: float64 or *sym
	hdelta float64
	hmixed bool // HINCRBY by a non-constant amount
}

// defaultKind is the kind of a key first met by a command of any type
// (EXISTS, DEL, PEXPIRE, PTTL, TYPE): a hash in a script that uses hash
// commands, else a string.
func (in *interp) defaultKind() byte {
	if in.c != nil && in.c.hashes {
		return 'h'
	}
	return 's'
}

// pub is one PUBLISH a run made.
type pub struct{ ch, msg value }

// model is the one Redis a script runs against: symbolically while
// recognising (each key's initial state is a choice point), concretely
// when computing a reply from the state the quorum reported.
type model struct {
	keys  []value // KEYS: sym atoms, or the client's strings
	nargv int
	// valueKeys are KEYS indexes the script never uses as keys (it takes
	// values from them, as node-redis-warlock does): a key may start
	// holding one of them, as it may one of the ARGV.
	valueKeys []int
	// pubNames are the ARGV indexes a run used as a publish command's
	// name (symbolic runs).
	pubNames []int
	ents     map[int]*entry
	now      value // ms since the epoch: sym NOW or float64
	// zl, when set, is a concrete run of a sorted-set lock (zlock.go):
	// its keys are sorted sets with members and scores.
	zl   *zlockRun
	pubs []pub
}

func okStatus(s string) *table { return &table{hash: map[any]value{"ok": s}} }
func errTable(s string) *table { return &table{hash: map[any]value{"err": s}} }
func wrongArgs(cmd string) error {
	return &redisError{"ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command"}
}

var (
	errNotInt   = &redisError{"ERR value is not an integer or out of range"}
	errNotFloat = &redisError{"ERR value is not a valid float"}
	errSyntax   = &redisError{"ERR syntax error"}
)

// argText returns a command argument as Redis receives it: strings as they
// are, numbers as Lua formats them.
func (in *interp) argText(v value) (value, error) {
	switch v := in.resolve(v).(type) {
	case string:
		return v, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e18 {
			return strconv.FormatInt(int64(v), 10), nil
		}
		return strconv.FormatFloat(v, 'g', 17, 64), nil
	case *sym:
		return &sym{e: v.e}, nil
	}
	return nil, &redisError{"ERR Lua redis lib command arguments must be strings or integers"}
}

// ent returns the entry for a key argument; keys other than KEYS are refused.
func (in *interp) ent(k value, kind byte) (*entry, error) {
	m := in.m
	idx := 0
	switch k := k.(type) {
	case *sym:
		if k.e.op == "KEYS" {
			idx = k.e.i
		}
	case string:
		if !in.symbolic {
			for i, s := range m.keys {
				if s == k {
					idx = i + 1
					break
				}
			}
		} else {
			return nil, in.refuse("touches key '%s', which is not in KEYS", k)
		}
	}
	if idx == 0 {
		return nil, in.refuse("touches a key that is not one of KEYS")
	}
	e := m.ents[idx]
	if e == nil {
		e = &entry{idx: idx}
		m.ents[idx] = e
	}
	if e.kind == 0 {
		e.kind = kind
		if in.symbolic && kind == 's' {
			c := in.choose(m.nargv + len(m.valueKeys) + 2)
			switch {
			case c == 0:
				e.init = "absent"
			case c <= m.nargv:
				e.init, e.hi, e.present = "argv", c, true
				e.val, e.ttl = &sym{e: atom("ARGV", c)}, &sym{e: atom("PTTL", idx), num: true}
			case c <= m.nargv+len(m.valueKeys):
				j := m.valueKeys[c-m.nargv-1]
				e.init, e.hi, e.present = "argv", keysValue+j, true
				e.val, e.ttl = &sym{e: atom("KEYS", j)}, &sym{e: atom("PTTL", idx), num: true}
			default:
				e.init, e.present = "other", true
				e.val, e.ttl = &sym{e: atom("OTHER", idx)}, &sym{e: atom("PTTL", idx), num: true}
			}
		}
		if in.symbolic && kind == 'h' {
			c := in.choose(m.nargv + 2)
			switch {
			case c == 0:
				e.init = "absent"
			case c <= m.nargv:
				e.init, e.hi, e.present = "argv", c, true
				e.hown = &sym{e: atom("ARGV", c)}
			default:
				e.init, e.present = "other", true
				e.hown = &sym{e: atom("OTHER", idx)}
			}
			if e.present {
				e.hcount = &sym{e: atom("HCOUNT", idx), num: true}
				e.ttl = &sym{e: atom("PTTL", idx), num: true}
			}
		}
		e.val0 = e.val
		if in.symbolic && kind == 'z' {
			e.zcard = &sym{e: atom("ZCARD", idx), num: true}
		}
	}
	if kind != 0 && e.kind != kind {
		return nil, in.refuse("uses one key as two types (string, hash, sorted set)")
	}
	return e, nil
}

// intArg parses an integer argument (ttl, time); symbolic ones pass.
func (in *interp) intArg(v value) (value, error) {
	switch v := v.(type) {
	case *sym:
		return &sym{e: v.e, num: true}, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, errNotInt
		}
		return float64(n), nil
	}
	return nil, errNotInt
}

func (in *interp) optName(v value) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", in.refuse("passes a command option computed from the arguments")
	}
	return strings.ToUpper(s), nil
}

// expiryMs converts a SET/EXPIRE time argument to ms left.
func (in *interp) expiryMs(unit string, t value) (value, error) {
	switch unit {
	case "PX":
		return t, nil
	case "EX":
		return in.arith("*", t, 1000.0)
	case "PXAT":
		return in.arith("-", t, in.m.now)
	case "EXAT":
		ms, err := in.arith("*", t, 1000.0)
		if err != nil {
			return nil, err
		}
		return in.arith("-", ms, in.m.now)
	}
	return nil, errSyntax
}

// redisCall runs one command against the model.
func (in *interp) redisCall(args []value) (value, error) {
	if len(args) == 0 {
		return nil, &redisError{"ERR Please specify at least one argument for this redis lib call"}
	}
	for i := range args {
		a, err := in.argText(args[i])
		if err != nil {
			return nil, err
		}
		args[i] = a
	}
	name, ok := args[0].(string)
	if ns, isSym := args[0].(*sym); !ok && isSym && ns.e.op == "ARGV" && len(args) == 3 {
		// A publish command named by the client (Redisson passes
		// PUBLISH or SPUBLISH, for sharded pub/sub, in ARGV): explored
		// as PUBLISH; Run checks the name the client sent.
		in.m.pubNames = append(in.m.pubNames, ns.e.i)
		name, ok = "PUBLISH", true
	}
	if !ok {
		return nil, in.refuse("calls redis with a command name computed from the arguments")
	}
	cmd := strings.ToUpper(name)
	a := args[1:]
	need := func(n int, exact bool) error {
		if len(a) < n || (exact && len(a) != n) {
			return wrongArgs(cmd)
		}
		return nil
	}
	if in.m.zl != nil {
		if v, handled, err := in.zlockCall(cmd, a); handled {
			return v, err
		}
	}
	switch cmd {
	case "SELECT":
		// The proxy serves database 0, as its SELECT command does; a
		// script that selects it (a library honouring its configured
		// index) runs on; another index is Redis's error.
		if err := need(1, true); err != nil {
			return nil, err
		}
		switch x := a[0].(type) {
		case *sym:
			return okStatus("OK"), nil
		case string:
			if n, err := strconv.ParseInt(x, 10, 64); err != nil {
				return nil, errNotInt
			} else if n == 0 {
				return okStatus("OK"), nil
			}
		}
		return nil, &redisError{"ERR DB index is out of range"}
	case "TIME":
		// The proxy's clock, the one absolute expiries are converted
		// with: seconds and microseconds as strings, as Redis answers.
		if err := need(0, true); err != nil {
			return nil, err
		}
		if ms, ok := in.m.now.(float64); ok {
			sec := math.Floor(ms / 1000)
			return &table{arr: []value{strconv.FormatFloat(sec, 'f', 0, 64), strconv.FormatFloat((ms-sec*1000)*1000, 'f', 0, 64)}}, nil
		}
		sec, err := in.arith("*", in.m.now, 0.001)
		if err != nil {
			return nil, err
		}
		return &table{arr: []value{sec, 0.0}}, nil
	case "TYPE":
		if err := need(1, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 0)
		if err != nil {
			return nil, err
		}
		switch {
		case e.kind == 'z' && (e.zcard != 0.0 || e.zmine == 1):
			return okStatus("zset"), nil
		case e.kind == 'z':
			return okStatus("none"), nil
		}
		if e.kind == 0 {
			dk := in.defaultKind()
			e.kind = dk
			in.m.ents[e.idx] = e
			if in.symbolic {
				e.kind = 0
				if e, err = in.ent(a[0], dk); err != nil {
					return nil, err
				}
			}
		}
		if e.present && e.kind == 'h' {
			return okStatus("hash"), nil
		}
		if e.present {
			return okStatus("string"), nil
		}
		return okStatus("none"), nil
	case "GET":
		if err := need(1, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 's')
		if err != nil || !e.present {
			return false, err
		}
		return e.val, nil
	case "HEXISTS", "HGET":
		if err := need(2, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'h')
		if err != nil {
			return nil, err
		}
		if !e.present {
			if cmd == "HGET" {
				return false, nil
			}
			return 0.0, nil
		}
		same, err := in.equal(a[1], e.hown)
		if err != nil {
			return nil, err
		}
		switch {
		case cmd == "HEXISTS" && same:
			return 1.0, nil
		case cmd == "HEXISTS":
			return 0.0, nil
		case same:
			return e.hcount, nil
		}
		return false, nil
	case "HINCRBY":
		if err := need(3, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'h')
		if err != nil {
			return nil, err
		}
		d, err := in.intArg(a[2])
		if err != nil {
			return nil, err
		}
		df, isConst := d.(float64)
		if !isConst {
			e.hmixed = true
		}
		if e.wrote == nil {
			e.wrote = in.cur
		}
		if !e.present {
			e.present, e.hown, e.hcount, e.ttl, e.hdelta = true, a[1], d, nil, df
			return d, nil
		}
		same, err := in.equal(a[1], e.hown)
		if err != nil {
			return nil, err
		}
		if !same {
			return nil, in.refuse("adds an owner to a hash lock that another owner holds")
		}
		if e.hcount, err = in.arith("+", e.hcount, d); err != nil {
			return nil, err
		}
		e.hdelta += df
		return e.hcount, nil
	case "MGET":
		if err := need(1, false); err != nil {
			return nil, err
		}
		out := &table{}
		for _, k := range a {
			e, err := in.ent(k, 's')
			if err != nil {
				return nil, err
			}
			if e.present {
				out.arr = append(out.arr, e.val)
			} else {
				out.arr = append(out.arr, false)
			}
		}
		return out, nil
	case "GETRANGE":
		if err := need(3, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 's')
		if err != nil {
			return nil, err
		}
		from, err := in.intArg(a[1])
		if err != nil {
			return nil, err
		}
		to, err := in.intArg(a[2])
		if err != nil {
			return nil, err
		}
		if !e.present {
			return "", nil
		}
		return in.substr(e.val, from, to, true)
	case "EXISTS", "DEL", "UNLINK":
		if err := need(1, false); err != nil {
			return nil, err
		}
		n := 0.0
		for _, k := range a {
			e, err := in.ent(k, 0)
			if err != nil {
				return nil, err
			}
			if e.kind == 0 {
				dk := in.defaultKind()
				e.kind = dk
				in.m.ents[e.idx] = e
				if in.symbolic {
					e.kind = 0
					if e, err = in.ent(k, dk); err != nil {
						return nil, err
					}
				}
			}
			if e.kind == 'z' {
				if cmd != "EXISTS" {
					return nil, in.refuse("deletes a sorted set")
				}
				n++ // a semaphore in use exists
				continue
			}
			if e.present {
				n++
				if cmd != "EXISTS" {
					e.present, e.val, e.ttl, e.hown, e.hcount = false, nil, nil, nil, nil
					if e.wrote == nil {
						e.wrote = in.cur
					}
				}
			}
		}
		return n, nil
	case "SET", "SETNX", "SETEX", "PSETEX":
		var k, v value
		nx, xx, get, keep := false, false, false, false
		unit, t := "", value(nil)
		switch cmd {
		case "SET":
			if err := need(2, false); err != nil {
				return nil, err
			}
			k, v = a[0], a[1]
			for i := 2; i < len(a); i++ {
				o, err := in.optName(a[i])
				if err != nil {
					return nil, err
				}
				switch o {
				case "NX":
					nx = true
				case "XX":
					xx = true
				case "GET":
					get = true
				case "KEEPTTL":
					keep = true
				case "PX", "EX", "PXAT", "EXAT":
					if unit != "" || i+1 >= len(a) {
						return nil, errSyntax
					}
					unit, t = o, a[i+1]
					i++
				default:
					return nil, errSyntax
				}
			}
			if (nx && xx) || (keep && unit != "") {
				return nil, errSyntax
			}
		case "SETNX":
			if err := need(2, true); err != nil {
				return nil, err
			}
			k, v, nx = a[0], a[1], true
		default:
			if err := need(3, true); err != nil {
				return nil, err
			}
			k, t, v = a[0], a[1], a[2]
			unit = map[string]string{"SETEX": "EX", "PSETEX": "PX"}[cmd]
		}
		var ms value
		if unit != "" {
			n, err := in.intArg(t)
			if err != nil {
				return nil, err
			}
			if f, ok := n.(float64); ok && f <= 0 {
				return nil, &redisError{"ERR invalid expire time in '" + strings.ToLower(cmd) + "' command"}
			}
			if ms, err = in.expiryMs(unit, n); err != nil {
				return nil, err
			}
		}
		e, err := in.ent(k, 's')
		if err != nil {
			return nil, err
		}
		var old value = false
		if e.present {
			old = e.val
		}
		if (nx && e.present) || (xx && !e.present) {
			if get {
				return old, nil
			}
			if cmd == "SETNX" {
				return 0.0, nil
			}
			return false, nil
		}
		e.present, e.val, e.valSet = true, v, true
		if !keep {
			e.ttl, e.ttlSet = ms, true
		}
		if e.wrote == nil {
			e.wrote = in.cur
		}
		switch {
		case get:
			return old, nil
		case cmd == "SETNX":
			return 1.0, nil
		}
		return okStatus("OK"), nil
	case "PEXPIRE", "EXPIRE", "PEXPIREAT", "EXPIREAT":
		if err := need(2, false); err != nil {
			return nil, err
		}
		n, err := in.intArg(a[1])
		if err != nil {
			return nil, err
		}
		unit := map[string]string{"PEXPIRE": "PX", "EXPIRE": "EX", "PEXPIREAT": "PXAT", "EXPIREAT": "EXAT"}[cmd]
		ms, err := in.expiryMs(unit, n)
		if err != nil {
			return nil, err
		}
		var flag string
		if len(a) > 3 {
			return nil, errSyntax
		}
		if len(a) == 3 {
			if flag, err = in.optName(a[2]); err != nil {
				return nil, err
			}
			switch flag {
			case "NX", "XX", "GT", "LT":
			default:
				return nil, &redisError{"ERR Unsupported option " + flag}
			}
		}
		e, err := in.ent(a[0], 0)
		if err != nil {
			return nil, err
		}
		if e.kind == 0 {
			if e, err = in.ent(a[0], in.defaultKind()); err != nil {
				return nil, err
			}
		}
		if e.kind == 'z' {
			e.zttl = ms
			return 1.0, nil
		}
		if !e.present {
			return 0.0, nil
		}
		switch flag {
		case "NX":
			if e.ttl != nil {
				return 0.0, nil
			}
		case "XX":
			if e.ttl == nil {
				return 0.0, nil
			}
		case "GT", "LT":
			if e.ttl == nil {
				if flag == "GT" {
					return 0.0, nil
				}
			} else {
				l, r := e.ttl, ms
				if flag == "GT" {
					l, r = ms, e.ttl
				}
				ok, err := in.less(l, r, false)
				if err != nil {
					return nil, err
				}
				if !ok {
					return 0.0, nil
				}
			}
		}
		if f, ok := ms.(float64); ok && f <= 0 {
			e.present, e.val, e.ttl = false, nil, nil
		} else {
			e.ttl, e.ttlSet = ms, true
		}
		if e.wrote == nil {
			e.wrote = in.cur
		}
		return 1.0, nil
	case "PTTL", "TTL":
		if err := need(1, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 0)
		if err != nil {
			return nil, err
		}
		if e.kind == 0 || e.kind == 'z' {
			if e, err = in.ent(a[0], in.defaultKind()); err != nil {
				return nil, err
			}
		}
		e.readTTL = true
		switch {
		case !e.present:
			return -2.0, nil
		case e.ttl == nil:
			return -1.0, nil
		}
		t := in.resolve(e.ttl)
		if cmd == "PTTL" {
			if f, ok := t.(float64); ok {
				return math.Trunc(f), nil
			}
			return t, nil
		}
		if f, ok := t.(float64); ok {
			return math.Floor((f + 500) / 1000), nil
		}
		ts := t.(*sym)
		if ts.e.op == "PTTL" {
			return &sym{e: atom("TTL", ts.e.i), num: true}, nil
		}
		return &sym{e: opaque("ttl", ts.e), num: true}, nil
	case "PUBLISH", "SPUBLISH":
		if err := need(2, true); err != nil {
			return nil, err
		}
		in.m.pubs = append(in.m.pubs, pub{ch: a[0], msg: a[1]})
		return 0.0, nil
	case "ZCARD":
		if err := need(1, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'z')
		if err != nil {
			return nil, err
		}
		if e.zcard == nil {
			return 0.0, nil
		}
		return e.zcard, nil
	case "ZSCORE":
		if err := need(2, true); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'z')
		if err != nil {
			return nil, err
		}
		if in.mine(e) {
			if in.symbolic {
				return &sym{e: atom("SCORE", e.idx)}, nil
			}
			return "1", nil
		}
		return false, nil
	case "ZADD":
		if err := need(3, false); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'z')
		if err != nil {
			return nil, err
		}
		rest := a[1:]
		for len(rest) > 0 {
			o, ok := rest[0].(string)
			if !ok {
				break
			}
			switch strings.ToUpper(o) {
			case "NX", "XX", "GT", "LT", "CH":
				rest = rest[1:]
				continue
			}
			break
		}
		if len(rest) == 0 || len(rest)%2 != 0 {
			return nil, errSyntax
		}
		for i := 0; i < len(rest); i += 2 {
			if s, ok := rest[i].(string); ok {
				if _, ok := str2number(s); !ok && s != "+inf" && s != "-inf" {
					return nil, errNotFloat
				}
			}
			e.zadds = append(e.zadds, rest[i+1])
		}
		if in.symbolic && e.zmine == 0 {
			return &sym{e: opaque("zadd", atom("ZCARD", e.idx)), num: true}, nil
		}
		if in.mine(e) {
			return 0.0, nil
		}
		return float64(len(rest) / 2), nil
	case "ZREM":
		if err := need(2, false); err != nil {
			return nil, err
		}
		e, err := in.ent(a[0], 'z')
		if err != nil {
			return nil, err
		}
		e.zrems = append(e.zrems, a[1:]...)
		if in.symbolic && e.zmine == 0 {
			return &sym{e: opaque("zrem", atom("ZCARD", e.idx)), num: true}, nil
		}
		if in.mine(e) {
			return float64(len(a) - 1), nil
		}
		return 0.0, nil
	case "ZREMRANGEBYSCORE":
		if err := need(3, true); err != nil {
			return nil, err
		}
		if lo, ok := a[1].(string); !ok || (lo != "-inf" && lo != "0") {
			return nil, in.refuse("removes sorted-set members other than expired ones")
		}
		if _, err := in.ent(a[0], 'z'); err != nil {
			return nil, err
		}
		return 0.0, nil
	}
	return nil, in.refuse("calls %s, which is not a lock operation", cmd)
}

// mine reports whether the client's members are in a semaphore's set.
func (in *interp) mine(e *entry) bool {
	if e.zmine == 0 {
		if !in.symbolic {
			e.zmine = 2
		} else {
			e.zmine = 1 + in.choose(2)
		}
	}
	return e.zmine == 1
}

// substr is GETRANGE (redisIdx) or string.sub on a value.
func (in *interp) substr(s, from, to value, redisIdx bool) (value, error) {
	from, to = in.resolve(from), in.resolve(to)
	if str, ok := in.resolve(s).(string); ok {
		f, fok := toNumber(from)
		t, tok := toNumber(to)
		if fok && tok {
			n := float64(len(str))
			if redisIdx {
				if f < 0 {
					f += n
				}
				if t < 0 {
					t += n
				}
				f, t = math.Max(f, 0), math.Min(t, n-1)
				if f > t || n == 0 {
					return "", nil
				}
				return str[int(f) : int(t)+1], nil
			}
			if f < 0 {
				f = n + f + 1
			}
			if t < 0 {
				t = n + t + 1
			}
			f, t = math.Max(f, 1), math.Min(t, n)
			if f > t {
				return "", nil
			}
			return str[int(f)-1 : int(t)], nil
		}
	}
	var base *sx
	switch v := in.resolve(s).(type) {
	case string:
		base = strPart(v)
	case *sym:
		base = v.e
	default:
		return nil, in.errf("bad argument #1 to 'sub' (string expected, got %s)", typeName(s))
	}
	// A prefix: from the first byte to a given length.
	fe, fc, _ := symNum(from)
	te, tc, tok := symNum(to)
	first := 1.0
	if redisIdx {
		first = 0
	}
	if fe == nil && fc == first && tok {
		n := te
		var c float64
		if redisIdx {
			n, c = linAdd(te, 1, nil, 0, tc+1)
		} else if te == nil {
			c = tc
		}
		if n == nil {
			n = numConst(c)
		}
		e := &sx{op: "prefix", kids: []*sx{base, n}}
		e.key = "prefix(" + base.key + "," + n.key + ")"
		bounded(e)
		return &sym{e: e}, nil
	}
	return &sym{e: opaque("sub", base, numSx(fe, fc), numSx(te, tc))}, nil
}
