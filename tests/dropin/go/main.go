// Command dropin-go runs the Go workers of the drop-in corpus
// (tests/dropin_corpus_test.go): go-redis with the docs' idiom, go-redsync
// v4.18 with its goredis, redigo and rueidis pools, bsm/redislock,
// rueidislock, and Spring Integration's RedisLockRegistry and Redisson's
// RLock protocols written out with go-redis. go-redsync v4.11 is in ./redsync411 (a module of its
// own: one build cannot hold two minor versions of one module).
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"dropin/loop"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
	"github.com/redis/rueidis/rueidislock"
)

func main() {
	loop.Main(map[string]loop.Row{
		"redisio-goredis":      redisio,
		"redsync-4.18-goredis": redsyncRow(goredisPool),
		"redsync-4.18-redigo":  redsyncRow(redigoPool),
		"redsync-4.18-rueidis": redsyncRow(rueidisPool),
		"bsm-redislock":        bsm,
		"rueidislock":          rueidisLock,
		"spring-shape":         springShape(),
		"redisson-shape":       redissonShape,
	})
}

// redisio: SET NX PX and the docs' release script, by EVAL (even workers)
// or go-redis's Script (EVALSHA first, EVAL on NOSCRIPT; odd workers).
func redisio(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	script := redis.NewScript(loop.Release)
	for i := range cycles {
		tok := fmt.Sprintf("%d-%d-%d", w, i, time.Now().UnixNano())
		if err := loop.Retry(ctx, "SET NX PX", func() (bool, error) { return c.SetNX(ctx, loop.Resource, tok, 10*time.Second).Result() }); err != nil {
			return err
		}
		if err := critical(ctx, i); err != nil {
			return err
		}
		var got int64
		var err error
		if w%2 == 0 {
			got, err = c.Eval(ctx, loop.Release, []string{loop.Resource}, tok).Int64()
		} else {
			got, err = script.Run(ctx, c, []string{loop.Resource}, tok).Int64()
		}
		if err != nil {
			return fmt.Errorf("release script: %w", err)
		}
		if got != 1 {
			return fmt.Errorf("the release script answered %d, want 1", got)
		}
	}
	return nil
}

func goredisPool(addr string) (rsredis.Pool, func()) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	return rsgoredis.NewPool(c), func() { c.Close() }
}

func redigoPool(addr string) (rsredis.Pool, func()) {
	p := &redigo.Pool{MaxIdle: 4, Dial: func() (redigo.Conn, error) { return redigo.Dial("tcp", addr) }}
	return rsredigo.NewPool(p), func() { p.Close() }
}

func rueidisPool(addr string) (rsredis.Pool, func()) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, func() {}
	}
	return rsrueidis.NewPool(rueidiscompat.NewAdapter(c)), c.Close
}

// redsyncRow: go-redsync given one pool on the lock address: Lock, Extend,
// Unlock.
func redsyncRow(pool func(addr string) (rsredis.Pool, func())) loop.Row {
	return func(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
		p, closer := pool(addr)
		if p == nil {
			return errors.New("the rueidis client did not connect")
		}
		defer closer()
		rs := redsync.New(p)
		for i := range cycles {
			m := rs.NewMutex(loop.Resource, redsync.WithExpiry(10*time.Second), redsync.WithTries(6000),
				redsync.WithRetryDelay(5*time.Millisecond))
			if err := m.LockContext(ctx); err != nil {
				return fmt.Errorf("Lock: %w", err)
			}
			if ok, err := m.ExtendContext(ctx); !ok || err != nil {
				return fmt.Errorf("Extend: %v, %w", ok, err)
			}
			if err := critical(ctx, i); err != nil {
				return err
			}
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				return fmt.Errorf("Unlock: %v, %w", ok, err)
			}
		}
		return nil
	}
}

// bsm: Obtain (retrying every 5 ms), obtain again with the same Token (a
// holder's retry), TTL, Refresh, Release.
func bsm(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	locker := redislock.New(c)
	for i := range cycles {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := locker.Obtain(octx, loop.Resource, 10*time.Second, &redislock.Options{
			RetryStrategy: redislock.LinearBackoff(5 * time.Millisecond),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("Obtain: %w", err)
		}
		again, err := locker.Obtain(ctx, loop.Resource, 10*time.Second, &redislock.Options{Token: l.Token()})
		if err != nil {
			return fmt.Errorf("Obtain with the holder's Token: %w", err)
		}
		if d, err := again.TTL(ctx); err != nil || d <= 0 {
			return fmt.Errorf("TTL: %v, %w", d, err)
		}
		if err := again.Refresh(ctx, 10*time.Second, nil); err != nil {
			return fmt.Errorf("Refresh: %w", err)
		}
		if err := critical(ctx, i); err != nil {
			return err
		}
		if err := again.Release(ctx); err != nil {
			return fmt.Errorf("Release: %w", err)
		}
	}
	return nil
}

// rueidisLock: rueidislock with its default options (client-side caching
// on), WithContext and its cancel.
func rueidisLock(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
	rec := &errorRecorder{}
	locker, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		ClientBuilder: func(opt rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(opt)
			rec.Client = c
			return rec, err
		},
	})
	if err != nil {
		return fmt.Errorf("NewLocker: %w", err)
	}
	defer locker.Close()
	for i := range cycles {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		lctx, cancel, err := locker.WithContext(wctx, loop.Resource)
		if err != nil {
			wcancel()
			return fmt.Errorf("WithContext: %w (first server error: %v)", err, rec.firstError())
		}
		err = critical(lctx, i)
		if lctx.Err() != nil && err == nil {
			err = fmt.Errorf("the lock's context ended while held: %w", context.Cause(lctx))
		}
		cancel()
		wcancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// errorRecorder is the rueidis client rueidislock is built with: it passes
// everything through and keeps the first server error, which rueidislock
// itself retries silently.
type errorRecorder struct {
	rueidis.Client
	mu    sync.Mutex
	first error
}

func (e *errorRecorder) note(r rueidis.RedisResult) rueidis.RedisResult {
	// NOSCRIPT is rueidis's EVALSHA-first at work, not a failure.
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) && !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		e.mu.Lock()
		if e.first == nil {
			e.first = err
		}
		e.mu.Unlock()
	}
	return r
}

func (e *errorRecorder) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return e.note(e.Client.Do(ctx, cmd))
}

func (e *errorRecorder) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	rs := e.Client.DoMulti(ctx, cmds...)
	for _, r := range rs {
		e.note(r)
	}
	return rs
}

func (e *errorRecorder) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	return e.note(e.Client.DoCache(ctx, cmd, ttl))
}

func (e *errorRecorder) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	rs := e.Client.DoMultiCache(ctx, multi...)
	for _, r := range rs {
		e.note(r)
	}
	return rs
}

func (e *errorRecorder) firstError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// Spring Integration's RedisLockRegistry cannot run here (no JVM, no Maven
// Central): springShape reproduces its protocol, with scripts of our own
// writing of the same shape as the registry's. One registry per lock
// address, each with its client id; a registry's threads take its local
// lock first, then the Redis lock with the obtain script (re-entrant for
// the same client id: it renews), spinning every 5 ms; unlock with an
// UNLINK of the key if it still holds the client id.
const (
	springObtain = `local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return true
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return true
end
return false`
	springUnlock = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('UNLINK', KEYS[1])
end
return false`
)

type springRegistry struct {
	clientID string
	local    sync.Mutex
	redis    *redis.Client
}

func springShape() loop.Row {
	var mu sync.Mutex
	registries := map[string]*springRegistry{}
	// registry returns the registry of half h of the workers on addr (on
	// the baseline both halves share one server, and still have a
	// registry each).
	registry := func(addr string, h int) *springRegistry {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprintf("%s#%d", addr, h)
		r, ok := registries[k]
		if !ok {
			r = &springRegistry{
				clientID: fmt.Sprintf("client-%d-%d", len(registries), time.Now().UnixNano()),
				redis:    redis.NewClient(&redis.Options{Addr: addr}),
			}
			registries[k] = r
		}
		return r
	}
	obtain, unlock := redis.NewScript(springObtain), redis.NewScript(springUnlock)
	return func(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
		reg := registry(addr, w%2)
		for i := range cycles {
			reg.local.Lock()
			err := loop.Retry(ctx, "obtain", func() (bool, error) {
				v, err := obtain.Run(ctx, reg.redis, []string{loop.Resource}, reg.clientID, 10000).Int64()
				if errors.Is(err, redis.Nil) {
					return false, nil
				}
				return v == 1, err
			})
			if err == nil {
				err = critical(ctx, i)
			}
			if err == nil {
				var n int64
				n, err = unlock.Run(ctx, reg.redis, []string{loop.Resource}, reg.clientID).Int64()
				if err == nil && n != 1 {
					err = fmt.Errorf("the unlock script answered %d, want 1", n)
				}
			}
			reg.local.Unlock()
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// Redisson 3.17.0's RLock scripts, verbatim (RedissonLock's
// tryLockInnerAsync and unlockInnerAsync, RedissonBaseLock's
// renewExpirationAsync; Apache-2.0): a hash per lock, field
// "<client id>:<thread id>", value the hold count.
const (
	redissonTryLock = "if (redis.call('exists', KEYS[1]) == 0) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('hincrby', KEYS[1], ARGV[2], 1); " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return nil; " +
		"end; " +
		"return redis.call('pttl', KEYS[1]);"
	redissonRenew = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then " +
		"redis.call('pexpire', KEYS[1], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return 0;"
	redissonUnlock = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call('publish', KEYS[2], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return nil;"
)

// redissonShape runs Redisson's RLock protocol as its Java client sends it
// (EVALSHA, EVAL on NOSCRIPT): tryLock until it answers nil, a re-entrant
// tryLock, the watchdog's renewal, the critical section, then two unlocks
// (0: a hold remains, 1: released and announced).
func redissonShape(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	try, renew, unlock := redis.NewScript(redissonTryLock), redis.NewScript(redissonRenew), redis.NewScript(redissonUnlock)
	owner := fmt.Sprintf("6a0f3c1e-%d:%d", time.Now().UnixNano(), w)
	keys := []string{loop.Resource, "redisson_lock__channel:{" + loop.Resource + "}"}
	for i := range cycles {
		err := loop.Retry(ctx, "tryLock", func() (bool, error) {
			err := try.Run(ctx, c, keys[:1], 30000, owner).Err()
			if errors.Is(err, redis.Nil) {
				return true, nil
			}
			return false, err // the holder's pttl: try again
		})
		if err != nil {
			return err
		}
		if err := try.Run(ctx, c, keys[:1], 30000, owner).Err(); !errors.Is(err, redis.Nil) {
			return fmt.Errorf("the re-entrant tryLock answered %v, want nil", err)
		}
		if n, err := renew.Run(ctx, c, keys[:1], 30000, owner).Int64(); err != nil || n != 1 {
			return fmt.Errorf("renewal answered %d %v, want 1", n, err)
		}
		if err := critical(ctx, i); err != nil {
			return err
		}
		for j, want := range []int64{0, 1} {
			n, err := unlock.Run(ctx, c, keys, 0, 30000, owner).Int64()
			if err != nil || n != want {
				return fmt.Errorf("unlock %d answered %d %v, want %d", j+1, n, err, want)
			}
		}
	}
	return nil
}
