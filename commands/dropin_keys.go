package commands

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// dropinDocs is where a drop-in error sends its reader.
const dropinDocs = "see docs/PROTOCOL.md, Drop-in mode"

// keptLeaseTTL is the ttl on the masters of a lock taken with SET NX and no
// expiry: the proxy extends it about every third of that while the
// connection that took it stays open, so a proxy that dies frees the lock
// within it.
const keptLeaseTTL = 10 * time.Second

// setArgs is a drop-in SET: SET key value NX [PX|EX|PXAT|EXAT ttl], or
// SET key value XX PX|EX|PXAT|EXAT ttl (xx: the holder setting its own
// lock's ttl, ShedLock's unlock before lockAtLeastFor and its extend).
type setArgs struct {
	key, value string
	xx         bool
	// ttl is the lock's lifetime; 0 with kept: no expiry was given, the
	// lease lives as long as the connection.
	ttl  time.Duration
	kept bool
	// expired: an absolute expiry already in the past. One Redis answers
	// OK and the key is gone at once; no quorum operation is needed.
	expired bool
}

func dropinRefused(format string, a ...any) *proxy.Error {
	return proxy.Errorf("drop-in mode: "+format+" ("+dropinDocs+")", a...)
}

// parseSet parses SET's arguments as Redis does (the same syntax errors,
// in its wording), then refuses, before anything reaches a master, what
// is not a lock acquire: SET without NX, XX, GET, KEEPTTL.
func parseSet(args [][]byte, lim Limits, now time.Time) (setArgs, error) {
	a := proxy.NewArgs(args)
	key, _ := a.String()
	value, _ := a.String()
	var nx, xx, get, keepttl bool
	unit, expiry, absolute := time.Duration(0), int64(0), false
	for a.More() {
		switch opt := a.Option(); opt {
		case "NX":
			if xx || nx {
				return setArgs{}, proxy.ErrSyntax
			}
			nx = true
		case "XX":
			if nx || xx {
				return setArgs{}, proxy.ErrSyntax
			}
			xx = true
		case "GET":
			get = true
		case "KEEPTTL":
			if unit != 0 || keepttl {
				return setArgs{}, proxy.ErrSyntax
			}
			keepttl = true
		case "PX", "EX", "PXAT", "EXAT":
			if unit != 0 || keepttl || !a.More() {
				return setArgs{}, proxy.ErrSyntax
			}
			n, err := a.Int()
			if err != nil {
				return setArgs{}, err
			}
			if n <= 0 {
				return setArgs{}, proxy.Errorf("invalid expire time in 'set' command")
			}
			unit, expiry, absolute = time.Millisecond, n, strings.HasSuffix(opt, "AT")
			if opt[0] == 'E' {
				unit = time.Second
			}
		default:
			return setArgs{}, proxy.ErrSyntax
		}
	}
	switch {
	case xx && unit == 0:
		return setArgs{}, dropinRefused("SET ... XX on a lock key needs a ttl (PX, EX, PXAT or EXAT): it sets the ttl of the lock the key holds with that value")
	case !nx && !xx:
		return setArgs{}, dropinRefused("SET on a lock key must be SET key value NX [PX|EX|PXAT|EXAT ttl] (or XX with a ttl, by the value holding it): a SET without NX would overwrite the lock of another client")
	case get:
		return setArgs{}, dropinRefused("SET ... NX GET is not served; read the holder with GET")
	case keepttl:
		return setArgs{}, dropinRefused("SET ... KEEPTTL is not served on a lock key")
	case key == "":
		return setArgs{}, dropinRefused("the lock key must not be empty")
	case len(value) == 0 || len(value) > MaxTokenLen:
		return setArgs{}, dropinRefused("a lock's value must be 1 to %d bytes", MaxTokenLen)
	}
	s := setArgs{key: key, value: value, xx: xx}
	if unit == 0 {
		s.kept, s.ttl = true, min(keptLeaseTTL, lim.MaxTTL)
		return s, nil
	}
	if expiry > int64(1<<62)/int64(unit) {
		return setArgs{}, proxy.Errorf("invalid expire time in 'set' command")
	}
	d := time.Duration(expiry) * unit
	if absolute {
		d = time.UnixMilli(0).Add(d).Sub(now)
		if d <= 0 {
			s.expired = true
			return s, nil
		}
		d = max(d, time.Millisecond)
	}
	if d > lim.MaxTTL {
		return setArgs{}, proxy.Errorf("invalid expire time in 'set' command (limits.max_ttl is %s)", lim.MaxTTL)
	}
	s.ttl = d
	return s, nil
}

// dropinKeyCommands are the Redis commands on lock keys that drop-in mode
// serves as quorum operations: SET NX, GET, PTTL/TTL, EXISTS, DEL/UNLINK,
// DELIFEQ (Valkey 9) and DELEX (Redis 8.4).
func dropinKeyCommands(eng Engine, lim Limits, k *keeper, grants *dropinGrants) []*proxy.Command {
	info := func(ctx context.Context, key string) (*quorum.Info, error) { return eng.Info(ctx, quorum.Lock, key) }
	// acquire runs a drop-in SET NX; its reply is ok or notOK.
	acquire := func(ctx context.Context, sess *proxy.Session, sa setArgs, ok, notOK any) (any, error) {
		if sa.expired {
			// Held, or fewer than a quorum answered: not done, as for
			// any SET NX a quorum did not grant.
			li, err := info(ctx, sa.key)
			if err != nil || li.Held {
				return notOK, notGranted(err)
			}
			return ok, nil
		}
		if err := k.admitIf(sess, sa.kept); err != nil {
			return nil, err
		}
		lease, err := eng.Acquire(ctx, quorum.Request{Resources: []string{sa.key}, TTL: sa.ttl, Token: sa.value, Primitive: quorum.SetNX})
		if err != nil || lease == nil {
			// Not granted whenever a quorum does not grant it, as one
			// Redis answers a SET NX it did not do.
			return notOK, notGranted(err)
		}
		return proxy.Late(func() any {
			v, valid := validity(ctx, lease, eng.Abandon)
			if !valid {
				return notOK
			}
			grants.add(lease.Resources, lease.Token, time.Now().Add(time.Duration(v)*time.Millisecond))
			k.keepIf(sess, sa.kept, kindDropin, lease.Resources, lease.Token, sa.ttl, v)
			return ok
		}), nil
	}
	expire := func(name string, unit time.Duration) *proxy.Command {
		return &proxy.Command{
			Name: name, Result: proxy.ResultZero, Arity: -3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				key := string(args[0])
				a := proxy.NewArgs(args[1:])
				n, err := a.Int()
				if err != nil {
					return nil, err
				}
				if a.More() {
					return nil, dropinRefused("%s with NX, XX, GT or LT is not served on a lock key", strings.ToUpper(name))
				}
				if n > int64(lim.MaxTTL/unit) {
					return nil, proxy.Errorf("invalid expire time in '%s' command (limits.max_ttl is %s)", name, lim.MaxTTL)
				}
				// The holder: this connection's kept lease (SETNX, SET NX
				// without a ttl), else whatever value a quorum holds.
				holder := k.keptDropin(sess, key)
				if holder != "" {
					// After the keeper's round in flight, whose ttl
					// would otherwise land after this one.
					done, err := k.extending(ctx, sess, kindDropin, []string{key}, holder)
					if err != nil {
						return nil, err
					}
					defer done()
				} else {
					li, err := info(ctx, key)
					if err != nil {
						return nil, err
					}
					if !li.Held || li.Holder == "" {
						return int64(0), nil
					}
					// Another connection's lock may be kept longer, never
					// cut short: its holder counts on the validity it was
					// given.
					if n > 0 && time.Duration(n)*unit < li.TTL {
						return nil, dropinRefused("%s would shorten a lock this connection did not take with SETNX (%d ms left): set a lock's ttl when taking it, or extend it with a script that compares its value", strings.ToUpper(name), li.TTL.Milliseconds())
					}
					holder = li.Holder
				}
				lease := &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: holder}
				if n <= 0 { // Redis deletes the key
					held, err := eng.Release(ctx, lease)
					k.forgetDropin(sess, []string{key}, holder)
					grants.remove([]string{key}, holder)
					if err != nil {
						return nil, err
					}
					return boolInt(held), nil
				}
				v, err := eng.Extend(ctx, lease, time.Duration(n)*unit)
				if err != nil {
					return nil, err
				}
				if v <= 0 {
					return int64(0), nil
				}
				// From here the ttl governs the lock: the connection does
				// not keep it alive.
				k.forgetDropin(sess, []string{key}, holder)
				grants.add([]string{key}, holder, time.Now().Add(v))
				return int64(1), nil
			},
			Doc: proxy.Doc{
				Summary: "Drop-in mode: sets the ttl of the lock held at key, on a quorum, with the value that holds it (this connection's SETNX lease, which then lives by the ttl, or the value a quorum holds, whose ttl it may lengthen, never shorten); 1, or 0 if not held. A ttl of 0 or less deletes it.",
				Args:    []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "timeout", Type: "integer"}},
			},
		}
	}
	// setXX is SET key value XX with a ttl: the lock key holding value
	// gets that ttl (longer or shorter: its holder sets it), on a quorum;
	// nil when no lock is held at key, as one Redis answers XX on a
	// missing key. Another value's lock is refused: one Redis would
	// overwrite it, and its holder would share the lock.
	setXX := func(ctx context.Context, sess *proxy.Session, sa setArgs) (any, error) {
		holder := k.keptDropin(sess, sa.key)
		kept := holder != ""
		if !kept {
			li, err := info(ctx, sa.key)
			if err != nil {
				return nil, err
			}
			if !li.Held || li.Holder == "" {
				return nil, nil
			}
			holder = li.Holder
		}
		if holder != sa.value {
			return nil, dropinRefused("SET ... XX would overwrite the lock held at %q by another value: only the value that holds a lock may set its ttl", sa.key)
		}
		if kept {
			// After the keeper's round in flight, whose ttl would
			// otherwise land after this one.
			done, err := k.extending(ctx, sess, kindDropin, []string{sa.key}, holder)
			if err != nil {
				return nil, err
			}
			defer done()
		}
		lease := &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{sa.key}, Token: holder}
		if sa.expired { // Redis deletes the key
			_, err := eng.Release(ctx, lease)
			k.forgetDropin(sess, []string{sa.key}, holder)
			grants.remove([]string{sa.key}, holder)
			if err != nil {
				return nil, err
			}
			return proxy.OK, nil
		}
		v, err := eng.Extend(ctx, lease, sa.ttl)
		if err != nil {
			return nil, err
		}
		if v <= 0 {
			return nil, nil
		}
		k.forgetDropin(sess, []string{sa.key}, holder)
		grants.add([]string{sa.key}, holder, time.Now().Add(v))
		return proxy.OK, nil
	}
	del := func(name string) *proxy.Command {
		return &proxy.Command{
			Name: name, Arity: -2, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: -1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				keys := strs(args)
				defer k.forgetDropin(sess, keys, "")
				n := int64(0)
				for _, key := range keys {
					held, err := eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: ""})
					if err != nil {
						return nil, err
					}
					n += boolInt(held)
				}
				return n, nil
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: deletes the locks whatever value holds them, on every master; the number a quorum held."},
		}
	}
	delIfEq := func(ctx context.Context, sess *proxy.Session, key, value string) (any, error) {
		held, err := eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: value})
		k.forgetDropin(sess, []string{key}, value)
		if err != nil {
			return nil, err
		}
		return boolInt(held), nil
	}
	return []*proxy.Command{
		{
			Name: "set", Result: proxy.ResultNull, Arity: -3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				sa, err := parseSet(args, lim, time.Now())
				if err != nil {
					return nil, err
				}
				if sa.xx {
					return setXX(ctx, sess, sa)
				}
				return acquire(ctx, sess, sa, proxy.OK, nil)
			},
			Doc: proxy.Doc{
				Summary: "Drop-in mode: SET key value NX [PX|EX|PXAT|EXAT ttl] is a quorum lock acquire holding value; OK, or nil whenever a quorum does not grant it (also when the key holds the same value). Without a ttl the proxy keeps the lock alive while the connection is open. SET key value XX with a ttl sets the ttl of the lock the key holds with that value (nil when none is held; another value's lock is refused).",
				Args: []proxy.ArgDoc{
					{Name: "key", Type: "key"},
					{Name: "value", Type: "string"},
					{Name: "nx", Type: "pure-token", Token: "NX"},
					{Name: "expiration", Type: "oneof", Optional: true, Args: []proxy.ArgDoc{
						{Name: "seconds", Type: "integer", Token: "EX"},
						{Name: "milliseconds", Type: "integer", Token: "PX"},
						{Name: "unix-time-seconds", Type: "integer", Token: "EXAT"},
						{Name: "unix-time-milliseconds", Type: "integer", Token: "PXAT"},
					}},
				},
			},
		},
		{
			// The legacy form, without a ttl: a lease this connection
			// keeps, as SET key value NX.
			Name: "setnx", Result: proxy.ResultZero, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				sa, err := parseSet([][]byte{args[0], args[1], []byte("NX")}, lim, time.Now())
				if err != nil {
					return nil, err
				}
				return acquire(ctx, sess, sa, int64(1), int64(0))
			},
			Doc: proxy.Doc{
				Summary: "Drop-in mode: SET key value NX without a ttl (a lock the proxy keeps alive while the connection is open); 1 if acquired, 0 if not. A following EXPIRE or PEXPIRE of the key gives it that ttl instead.",
				Args:    []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "value", Type: "string"}},
			},
		},
		expire("expire", time.Second),
		expire("pexpire", time.Millisecond),
		hashRead("hexists", info),
		hashRead("hget", info),
		{
			Name: "get", Arity: 2, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				li, err := info(ctx, string(args[0]))
				if err != nil || !li.Held || li.Holder == "" {
					return nil, err
				}
				// A client that caches it is told when it expires.
				return proxy.Expires{Value: li.Holder, After: li.TTL}, nil
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: the value that holds the lock on a quorum, or nil."},
		},
		ttlCommand("pttl", info, time.Millisecond, false),
		ttlCommand("ttl", info, time.Second, false),
		ttlCommand("pexpiretime", info, time.Millisecond, true),
		ttlCommand("expiretime", info, time.Second, true),
		{
			Name: "mget", Arity: -2, FirstKey: 1, LastKey: -1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				out := make([]any, len(args))
				// A client that caches the reply is told when the first
				// of the locks expires, at once if one is free (as GET's).
				var after time.Duration
				for i, key := range args {
					li, err := info(ctx, string(key))
					if err != nil {
						return nil, err
					}
					if !li.Held || li.Holder == "" {
						after = -1
						continue
					}
					out[i] = li.Holder
					if after == 0 || after > li.TTL {
						after = li.TTL
					}
				}
				return proxy.Expires{Value: out, After: max(after, 0)}, nil
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: GET of each key: the value that holds each lock on a quorum, nil for one not held."},
		},
		{
			Name: "exists", Arity: -2, FirstKey: 1, LastKey: -1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				n := int64(0)
				for _, key := range args {
					li, err := info(ctx, string(key))
					if err != nil {
						return nil, err
					}
					if li.Held {
						n++
					}
				}
				return n, nil
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: how many of the locks are held on a quorum."},
		},
		del("del"),
		del("unlink"),
		{
			// A fencing counter: simple-redis-mutex numbers each grant
			// with INCR of one key.
			// It waits while other INCRs of the key hold it: a client that
			// hangs up meanwhile, or a shutdown, ends the wait.
			Name: "incr", Result: proxy.ResultZero, Arity: 2, Flags: proxy.FlagWrite | proxy.FlagMayBlock, FirstKey: 1, LastKey: 1, Step: 1,
			Blocks: func([][]byte) bool { return lim.MaxWait > 0 },
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				if len(args[0]) == 0 {
					return nil, dropinRefused("the counter key must not be empty")
				}
				return counterFence(ctx, eng, string(args[0]), min(counterTTL, lim.MaxTTL), min(counterWait, lim.MaxWait))
			},
			Doc: proxy.Doc{
				Summary: "Drop-in mode: a fencing counter. The answer is strictly greater than every earlier INCR's of key, through any proxy (a fence of the resource key, taken with a momentary lock of it), but not one more: it is not a counter to count with. The key holds no number on the masters.",
				Args:    []proxy.ArgDoc{{Name: "key", Type: "key"}},
			},
		},
		{
			// redis-semaphore releases a permit with ZREM of its
			// identifier from the semaphore's sorted set (no script).
			Name: "zrem", Result: proxy.ResultZero, Arity: -3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				n := int64(0)
				for _, tok := range args[1:] {
					if len(tok) == 0 || len(tok) > MaxTokenLen {
						continue // never a permit's token
					}
					held, err := eng.Release(ctx, &quorum.Lease{Primitive: quorum.Semaphore, Resources: []string{string(args[0])}, Token: string(tok)})
					if err != nil {
						return nil, err
					}
					n += boolInt(held)
				}
				return n, nil
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: ZREM semaphore token... releases the permits each token holds (a semaphore kept as a sorted set of holders, as redis-semaphore does); how many held permits on a quorum.",
				Args: []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "member", Type: "string", Multiple: true}}},
		},
		{
			Name: "delifeq", Result: proxy.ResultZero, Arity: 3, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				return delIfEq(ctx, sess, string(args[0]), string(args[1]))
			},
			Doc: proxy.Doc{Summary: "Drop-in mode (Valkey 9's DELIFEQ): deletes the lock if it holds value; 1 if it held it on a quorum, else 0.",
				Args: []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "value", Type: "string"}}},
		},
		{
			Name: "delex", Result: proxy.ResultZero, Arity: -2, Flags: proxy.FlagWrite, FirstKey: 1, LastKey: 1, Step: 1,
			Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
				key := string(args[0])
				switch {
				case len(args) == 1:
					held, err := eng.Release(ctx, &quorum.Lease{Primitive: quorum.SetNX, Resources: []string{key}, Token: ""})
					k.forgetDropin(sess, []string{key}, "")
					if err != nil {
						return nil, err
					}
					return boolInt(held), nil
				case len(args) == 3 && strings.EqualFold(string(args[1]), "IFEQ"):
					return delIfEq(ctx, sess, key, string(args[2]))
				case len(args) == 3:
					switch strings.ToUpper(string(args[1])) {
					case "IFNE", "IFDEQ", "IFDNE":
						return nil, dropinRefused("DELEX %s is not a lock release the proxy can run on a quorum; use IFEQ", strings.ToUpper(string(args[1])))
					}
				}
				return nil, proxy.ErrSyntax
			},
			Doc: proxy.Doc{Summary: "Drop-in mode (Redis 8.4's DELEX): DELEX key IFEQ value deletes the lock if it holds value (1 if it held it on a quorum, else 0); DELEX key deletes it.",
				Args: []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "condition", Type: "oneof", Optional: true, Args: []proxy.ArgDoc{
					{Name: "value", Type: "string", Token: "IFEQ"},
				}}}},
		},
	}
}

// counterTTL is the ttl of the momentary lock that INCR takes to draw a
// fence; it is released at once, and expires on its own if its proxy
// stops first.
const counterTTL = 2 * time.Second

// counterWait bounds how long INCR waits while other INCRs of its key
// hold their momentary lock.
const counterWait = 5 * time.Second

// counterFence serves drop-in INCR of key: the fence of a momentary lock
// of the resource key. A fence is strictly greater than every earlier
// grant's of its resource (docs/design/fencing.md), so an INCR answered
// before another started answers less: what a library numbering its
// grants with INCR needs. The lock is released before the answer.
func counterFence(ctx context.Context, eng Engine, key string, ttl, wait time.Duration) (any, error) {
	lease, err := eng.Acquire(ctx, quorum.Request{Primitive: quorum.Lock, Resources: []string{key}, TTL: ttl, Wait: wait})
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return nil, dropinRefused("INCR %q: no fence within %s: the key is held as a lock, or other INCRs of it kept it busy", key, wait)
	}
	// The fence is drawn whatever the release answers: a lock it did not
	// release expires within ttl.
	_, _ = eng.Release(context.WithoutCancel(ctx), lease)
	if len(lease.Fences) == 0 {
		return nil, fmt.Errorf("drop-in INCR %q: the grant carries no fence", key)
	}
	return int64(lease.Fences[0]), nil
}

// strs copies arguments into strings.
func strs(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

// hashRead serves HEXISTS and HGET of a lock kept in a hash (Redisson's
// isHeldByThread and getHoldCount): the lock's holder is its one field,
// its re-entrant holds the field's value.
func hashRead(name string, info func(context.Context, string) (*quorum.Info, error)) *proxy.Command {
	return &proxy.Command{
		Name: name, Arity: 3, FirstKey: 1, LastKey: 1, Step: 1,
		Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
			li, err := info(ctx, string(args[0]))
			if err != nil {
				return nil, err
			}
			mine := li.Held && li.Holder != "" && li.Holder == string(args[1])
			if name == "hexists" {
				return boolInt(mine), nil
			}
			if !mine {
				return nil, nil
			}
			return strconv.Itoa(max(li.Holds, 1)), nil
		},
		Doc: proxy.Doc{
			Summary: "Drop-in mode: a lock kept in a hash (Redisson's layout) read as the lock a quorum holds: " + map[string]string{
				"hexists": "1 if field is its holder, else 0.",
				"hget":    "its re-entrant holds if field is its holder, else nil."}[name],
			Args: []proxy.ArgDoc{{Name: "key", Type: "key"}, {Name: "field", Type: "string"}},
		},
	}
}

// ttlCommand serves PTTL and TTL (the lock's remaining time a quorum
// sees, in unit) and, absolute, PEXPIRETIME and EXPIRETIME (when it
// expires, as unix time in unit by this proxy's clock); both rounded as
// Redis rounds them, -2 if not held.
func ttlCommand(name string, info func(context.Context, string) (*quorum.Info, error), unit time.Duration, absolute bool) *proxy.Command {
	summary := "Drop-in mode: the lock's remaining time as a quorum sees it, -2 if not held."
	if absolute {
		summary = "Drop-in mode: when the lock expires, as unix time, by the remaining time a quorum sees; -2 if not held."
	}
	return &proxy.Command{
		Name: name, Arity: 2, FirstKey: 1, LastKey: 1, Step: 1,
		Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
			li, err := info(ctx, string(args[0]))
			if err != nil {
				return nil, err
			}
			if !li.Held {
				return int64(-2), nil
			}
			d := li.TTL
			if absolute {
				d = time.Duration(time.Now().Add(li.TTL).UnixNano())
			}
			return proxy.Expires{Value: int64((d + unit/2) / unit), After: li.TTL}, nil
		},
		Doc: proxy.Doc{Summary: summary},
	}
}
