package commands

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// The lock scripts of the libraries drop-in mode serves, byte for byte as
// each library sends them: dropin/<library>@<version>/<operation>.lua.
// They are data: the proxy recognises them by SHA1 and runs the matching
// quorum operation; it never runs client Lua on the masters.
//
//go:embed dropin
var dropinScripts embed.FS

// dropinHandler runs one recognised script as a quorum operation and
// answers what the library expects.
type dropinHandler func(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error)

// dropinOps maps each recorded script (<library>@<version>/<operation>)
// to its quorum operation. redis-py 5.x (checked up to v5.3.1) sends the
// same three scripts as 4.3.4, byte for byte. Adding a library: record its scripts under
// dropin/, map each here, and add it to the drop-in test table.
func dropinOps() map[string]dropinHandler {
	return map[string]dropinHandler{
		"redis-py@4.3.4/release":            releaseOne(0),
		"redis-py@4.3.4/extend":             redisPyExtend,
		"redis-py@4.3.4/reacquire":          extendOne,
		"go-redsync@v4.18.1/delete":         releaseOne(-1),
		"go-redsync@v4.18.1/touch":          extendOne,
		"go-redsync@v4.18.1/touch_setnx":    touchOrAcquire,
		"bsm-redislock@v0.9.4/obtain":       bsmObtain,
		"bsm-redislock@v0.9.4/release":      releaseOne(0),
		"bsm-redislock@v0.9.4/refresh":      extendOne,
		"bsm-redislock@v0.9.4/pttl":         bsmPTTL,
		"node-redlock@5.0.0-beta.2/acquire": redlockAcquire,
		"node-redlock@5.0.0-beta.2/extend":  redlockExtend,
		"node-redlock@5.0.0-beta.2/release": redlockRelease,
		// Spring's lock type SPIN_LOCK (its default); PUB_SUB_LOCK's
		// unlock scripts are served too, but its waiters SUBSCRIBE, which
		// the proxy does not serve.
		"spring-integration@6.5.10/obtain":               luaBool(touchOrAcquire),
		"spring-integration@6.5.10/renew":                luaBool(extendOne),
		"spring-integration@6.5.10/spin_unlink_unlock":   luaBool(releaseOne(0)),
		"spring-integration@6.5.10/spin_delete_unlock":   luaBool(releaseOne(0)),
		"spring-integration@6.5.10/pubsub_unlink_unlock": luaBool(releaseOne(0)),
		"spring-integration@6.5.10/pubsub_delete_unlock": luaBool(releaseOne(0)),
	}
}

// knownScript is one recorded script.
type knownScript struct {
	name string // <library>@<version>/<operation>
	run  dropinHandler
	n    atomic.Int64 // runs, for INFO
}

// dropin serves drop-in mode: the recorded scripts by SHA1, and counts.
type dropin struct {
	eng   *quorum.Engine
	lim   Limits
	bySHA map[string]*knownScript
	names []string // sorted, for INFO
}

func newDropin(eng *quorum.Engine, lim Limits) *dropin {
	d := &dropin{eng: eng, lim: lim, bySHA: map[string]*knownScript{}}
	ops := dropinOps()
	fs.WalkDir(dropinScripts, "dropin", func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(p, ".lua") {
			return err
		}
		b, err := dropinScripts.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, "dropin/"), ".lua")
		run := ops[name]
		if run == nil {
			panic("drop-in script without an operation: " + name) // a build mistake, caught by the tests
		}
		sum := sha1.Sum(b)
		d.bySHA[hex.EncodeToString(sum[:])] = &knownScript{name: name, run: run}
		d.names = append(d.names, name)
		return nil
	})
	slices.Sort(d.names)
	return d
}

// DropinUnknown is drop-in mode's error for a command it does not serve.
func DropinUnknown(args [][]byte) *proxy.Error {
	name := args[0][:min(len(args[0]), 64)]
	return proxy.Errorf("drop-in mode serves lock operations only: '%s' is not one (see docs/PROTOCOL.md, Drop-in mode)", name)
}

var (
	errDropinScript = proxy.Errorf("drop-in mode runs only known lock scripts (see docs/PROTOCOL.md, Drop-in mode)")
	errDropinSet    = proxy.Errorf("drop-in mode: SET must be SET key value NX PX|EX ttl, a lock (see docs/PROTOCOL.md, Drop-in mode)")
	errNoScript     = &proxy.Error{Code: "NOSCRIPT", Msg: "No matching script. Please use EVAL."}
	errNumkeysNeg   = proxy.Errorf("Number of keys can't be negative")
	errNumkeysMany  = proxy.Errorf("Number of keys can't be greater than number of args")
)

// run runs a recognised script.
func (d *dropin) run(ctx context.Context, s *knownScript, args [][]byte) (any, error) {
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
	s.n.Add(1)
	if d.lim.DropinScripts != nil {
		d.lim.DropinScripts(s.name)
	}
	return s.run(ctx, d.eng, keys, argv)
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
func dropinCommands(eng *quorum.Engine, lim Limits, k *keeper, d *dropin) []*proxy.Command {
	return append(dropinKeyCommands(eng, lim, k), []*proxy.Command{
		{
			Name: "eval", Arity: -3, Flags: proxy.FlagWrite, Keys: evalKeys,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				sum := sha1.Sum(args[0])
				s := d.bySHA[hex.EncodeToString(sum[:])]
				if s == nil {
					return nil, errDropinScript
				}
				return d.run(ctx, s, args[1:])
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: runs a known lock script of a supported library as the matching quorum operation.", Since: since, Group: "redlock"},
		},
		{
			Name: "evalsha", Arity: -3, Flags: proxy.FlagWrite, Keys: evalKeys,
			Handler: func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				s := d.bySHA[strings.ToLower(string(args[0]))]
				if s == nil {
					return nil, errNoScript
				}
				return d.run(ctx, s, args[1:])
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: EVAL of a known lock script by its SHA1.", Since: since, Group: "redlock"},
		},
		{
			Name: "script", Arity: -2, Flags: proxy.FlagFast,
			Handler: func(_ context.Context, _ *proxy.Session, args [][]byte) (any, error) {
				switch strings.ToUpper(string(args[0])) {
				case "LOAD":
					if len(args) != 2 {
						return nil, proxy.WrongArity("script|load")
					}
					sum := sha1.Sum(args[1])
					sha := hex.EncodeToString(sum[:])
					if d.bySHA[sha] == nil {
						return nil, errDropinScript
					}
					return sha, nil
				case "EXISTS":
					if len(args) < 2 {
						return nil, proxy.WrongArity("script|exists")
					}
					out := make([]int64, len(args)-1)
					for i, s := range args[1:] {
						if d.bySHA[strings.ToLower(string(s))] != nil {
							out[i] = 1
						}
					}
					return out, nil
				}
				return nil, proxy.Errorf("drop-in mode: SCRIPT %s is not served (see docs/PROTOCOL.md, Drop-in mode)", strings.ToUpper(string(args[0])))
			},
			Doc: proxy.Doc{Summary: "Drop-in mode: SCRIPT LOAD and SCRIPT EXISTS for the known lock scripts.", Since: since, Group: "redlock"},
		},
	}...)
}

// info is the "dropin" section of INFO: how often each recorded script
// ran.
func (d *dropin) info() proxy.InfoSection {
	return proxy.InfoSection{Name: "dropin", Lines: func() []string {
		var out []string
		for sha, s := range d.bySHA {
			out = append(out, fmt.Sprintf("script:%s,sha=%s,runs=%d", s.name, sha, s.n.Load()))
		}
		slices.Sort(out)
		return out
	}}
}

// ---- the operations ----

func argsN(keys, argv []string, nk, na int) error {
	if len(keys) != nk || len(argv) < na {
		return proxy.Errorf("drop-in mode: this script takes %d key(s) and %d argument(s)", nk, na)
	}
	return nil
}

func msArg(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, proxy.Errorf("value is not an integer or out of range")
	}
	return time.Duration(n) * time.Millisecond, nil
}

// releaseOne: compare-and-delete of one key: 1 if the token held it on a
// quorum, else 0, or notHeld (go-redsync: -1) when nobody holds it.
func releaseOne(notHeld int64) dropinHandler {
	return func(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
		if err := argsN(keys, argv, 1, 1); err != nil {
			return nil, err
		}
		held, err := eng.Unlock(ctx, keys, argv[0])
		if err != nil || held {
			return int64(1), err
		}
		if notHeld == 0 {
			return int64(0), nil
		}
		li, err := eng.LockInfo(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		if li.Held {
			return int64(0), nil // another token's
		}
		return notHeld, nil
	}
}

// extendOne: compare-and-pexpire of one key: 1 or 0.
func extendOne(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if err := argsN(keys, argv, 1, 2); err != nil {
		return nil, err
	}
	ttl, err := msArg(argv[1])
	if err != nil {
		return nil, err
	}
	v, err := eng.Extend(ctx, keys, argv[0], ttl)
	if err != nil {
		return nil, err
	}
	return boolInt(v > 0), nil
}

// touchOrAcquire: go-redsync's touch with SET NX: extend if held, else
// take it if free: 1 or 0.
func touchOrAcquire(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	v, err := extendOne(ctx, eng, keys, argv)
	if err != nil || v == int64(1) {
		return v, err
	}
	ttl, _ := msArg(argv[1])
	lease, err := eng.Lock(ctx, quorum.LockRequest{Resources: keys, TTL: ttl, Token: argv[0]})
	if err != nil || lease == nil {
		return int64(0), err
	}
	if _, ok := validity(ctx, lease, eng.Abandon); !ok {
		return int64(0), nil
	}
	return int64(1), nil
}

// redisPyExtend: redis-py's Lock.extend: ARGV[2] more ms, or exactly ARGV[2]
// ms when ARGV[3] is "1": 1 or 0.
func redisPyExtend(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if err := argsN(keys, argv, 1, 3); err != nil {
		return nil, err
	}
	add, err := msArg(argv[1])
	if err != nil {
		return nil, err
	}
	ttl := add
	if argv[2] == "0" {
		li, err := eng.LockInfo(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		if !li.Held || li.Holder != argv[0] {
			return int64(0), nil
		}
		ttl += max(li.TTL, 0)
	}
	v, err := eng.Extend(ctx, keys, argv[0], ttl)
	if err != nil {
		return nil, err
	}
	return boolInt(v > 0), nil
}

// bsmObtain: bsm/redislock's obtain (value, token length, ttl): +OK or nil.
func bsmObtain(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if err := argsN(keys, argv, 1, 3); err != nil {
		return nil, err
	}
	ttl, err := msArg(argv[2])
	if err != nil {
		return nil, err
	}
	lease, err := eng.Lock(ctx, quorum.LockRequest{Resources: keys, TTL: ttl, Token: argv[0]})
	if err != nil || lease == nil {
		return nil, err
	}
	if _, ok := validity(ctx, lease, eng.Abandon); !ok {
		return nil, nil
	}
	return proxy.OK, nil
}

// bsmPTTL: the lock's remaining ms if the value holds it, else -3.
func bsmPTTL(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if err := argsN(keys, argv, 1, 1); err != nil {
		return nil, err
	}
	li, err := eng.LockInfo(ctx, keys[0])
	if err != nil {
		return nil, err
	}
	if !li.Held || li.Holder != argv[0] {
		return int64(-3), nil
	}
	return li.TTL.Milliseconds(), nil
}

// redlockAcquire: node-redlock's acquire of every key, all or none: the
// number of keys, or 0.
func redlockAcquire(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if len(keys) == 0 || len(argv) < 2 {
		return nil, argsN(keys, argv, 1, 2)
	}
	ttl, err := msArg(argv[1])
	if err != nil {
		return nil, err
	}
	lease, err := eng.Lock(ctx, quorum.LockRequest{Resources: keys, TTL: ttl, Token: argv[0]})
	if err != nil || lease == nil {
		return int64(0), err
	}
	if _, ok := validity(ctx, lease, eng.Abandon); !ok {
		return int64(0), nil
	}
	return int64(len(keys)), nil
}

// redlockExtend: node-redlock's extend of every key: the number of keys,
// or 0.
func redlockExtend(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if len(keys) == 0 || len(argv) < 2 {
		return nil, argsN(keys, argv, 1, 2)
	}
	ttl, err := msArg(argv[1])
	if err != nil {
		return nil, err
	}
	v, err := eng.Extend(ctx, keys, argv[0], ttl)
	if err != nil || v <= 0 {
		return int64(0), err
	}
	return int64(len(keys)), nil
}

// redlockRelease: node-redlock's release: how many keys it released (all
// of them, or 0).
func redlockRelease(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
	if len(keys) == 0 || len(argv) < 1 {
		return nil, argsN(keys, argv, 1, 1)
	}
	held, err := eng.Unlock(ctx, keys, argv[0])
	if err != nil || !held {
		return int64(0), err
	}
	return int64(len(keys)), nil
}

// luaBool turns a 1/0 answer into what a script returning Lua true/false
// gives a client: 1, or null.
func luaBool(h dropinHandler) dropinHandler {
	return func(ctx context.Context, eng *quorum.Engine, keys, argv []string) (any, error) {
		v, err := h(ctx, eng, keys, argv)
		if err != nil || v != int64(1) {
			return nil, err
		}
		return int64(1), nil
	}
}
