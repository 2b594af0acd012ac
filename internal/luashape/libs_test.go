package luashape

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// libCase is a lock script written here in the shape a library's script
// has (our own paraphrase: same KEYS/ARGV layout, same behaviour on one
// Redis), with the arguments the library passes.
type libCase struct {
	lib       string
	src       string
	kind      Kind
	reentrant bool
	keys      []string
	argv      []string // "{now}", "{now+10000}" (ms) and "{nows+20}" (s) are replaced by timestamps
	val       int      // ARGV index of the value a held key has in state "mine"
	// valKey, when not 0, is the KEYS index of that value instead, and
	// only the first key is a lock key (node-redis-warlock's touch).
	valKey int
	// hash: the lock is a hash whose field owner holds a count (state
	// "mine2": two holds); pubIn lists the states that publish, when
	// not only "mine".
	hash      bool
	owner     string
	pubIn     []string
	num       []int // ARGV that are numbers (for the tonumber mutation)
	publishes bool  // publishes once in state "mine"
	// Semaphores: the token's members in state "mine", the limit.
	members func(token string) []string
	limit   int
}

const (
	tok   = "tok-5f2a9c"
	other = "someone-else"
)

func single(tok string) []string { return []string{tok} }
func permits(n int) func(string) []string {
	return func(tok string) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, tok+"_"+strconv.Itoa(i))
		}
		return out
	}
}

var libCases = []libCase{
	{lib: "redis-py Lock.release", kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
local held = redis.call('get', KEYS[1])
if (not held) or held ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
return 1`},
	{lib: "redis-py Lock.extend (add to the ttl)", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "5000", "0"}, val: 1, num: []int{2}, src: `
local held = redis.call('get', KEYS[1])
if not held or held ~= ARGV[1] then return 0 end
local left = redis.call('pttl', KEYS[1])
if not left then left = 0 end
if left < 0 then return 0 end
local ttl = ARGV[2]
if ARGV[3] == "0" then ttl = ARGV[2] + left end
redis.call('pexpire', KEYS[1], ttl)
return 1`},
	{lib: "redis-py Lock.extend (replace the ttl)", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "5000", "1"}, val: 1, num: []int{2}, src: `
local held = redis.call('get', KEYS[1])
if not held or held ~= ARGV[1] then return 0 end
local left = redis.call('pttl', KEYS[1])
if not left then left = 0 end
if left < 0 then return 0 end
local ttl = ARGV[2]
if ARGV[3] == "0" then ttl = ARGV[2] + left end
redis.call('pexpire', KEYS[1], ttl)
return 1`},
	{lib: "redis-py Lock.reacquire", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local held = redis.call('get', KEYS[1])
if not held or held ~= ARGV[1] then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1`},
	{lib: "go-redsync v4.11 delete, the redis.io release, bsm release, rueidislock delete, ioredis-lock delifequal",
		kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
else
	return 0
end`},
	{lib: "go-redsync v4.18 delete (three-way)", kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
	return redis.call("DEL", KEYS[1])
elseif v == false then
	return -1
else
	return 0
end`},
	{lib: "go-redsync touch, bsm refresh, ioredis-lock pexpireifequal", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end
return 0`},
	{lib: "go-redsync v4.18 touch or SET NX", kind: Acquire, reentrant: true, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
elseif redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2], "NX") then
	return 1
else
	return 0
end`},
	{lib: "bsm/redislock obtain (token prefix re-entry)", kind: Acquire, reentrant: true, keys: []string{"lk"}, argv: []string{tok, "6", "20000"}, val: 1, num: []int{2, 3}, src: `
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[3]) then
  return redis.status_reply("OK")
end
local n = tonumber(ARGV[2])
local head = redis.call("getrange", KEYS[1], 0, n - 1)
if head == string.sub(ARGV[1], 1, n) then
  return redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[3])
end`},
	{lib: "bsm/redislock pttl", kind: Check, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pttl", KEYS[1]) end
return -3`},
	{lib: "node-redlock 4.2 / 5.0 acquire", kind: Acquire, keys: []string{"a", "b"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
for _, k in ipairs(KEYS) do
  if redis.call("exists", k) == 1 then
    return 0
  end
end
for _, k in ipairs(KEYS) do
  redis.call("set", k, ARGV[1], "PX", ARGV[2])
end
return #KEYS`},
	{lib: "node-redlock 4.2 / 5.0 extend", kind: Extend, keys: []string{"a", "b"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
for _, k in ipairs(KEYS) do
  if redis.call("get", k) ~= ARGV[1] then
    return 0
  end
end
for _, k in ipairs(KEYS) do
  redis.call("set", k, ARGV[1], "PX", ARGV[2])
end
return #KEYS`},
	{lib: "node-redlock 4.2 / 5.0 release", kind: Release, keys: []string{"a", "b"}, argv: []string{tok}, val: 1, src: `
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call("get", k) == ARGV[1] then
    redis.pcall("del", k)
    n = n + 1
  end
end
return n`},
	{lib: "redis-semaphore Mutex refresh", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local key = KEYS[1]
local id = ARGV[1]
local timeout = ARGV[2]
if redis.call('get', key) == id then
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`},
	{lib: "redis-semaphore Semaphore acquire", kind: SemAcquire, keys: []string{"sem"}, argv: []string{"3", tok, "20000", "{now}"}, val: 2, num: []int{1, 3, 4}, members: single, limit: 3, src: `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local id = ARGV[2]
local timeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zcard', key) < limit then
  redis.call('zadd', key, now, id)
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`},
	{lib: "redis-semaphore Semaphore refresh", kind: SemExtend, keys: []string{"sem"}, argv: []string{"3", tok, "20000", "{now}"}, val: 2, num: []int{1, 3, 4}, members: single, limit: 3, src: `
local key = KEYS[1]
local id = ARGV[2]
local timeout = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zscore', key, id) then
  redis.call('zadd', key, now, id)
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`},
	{lib: "redis-semaphore MultiSemaphore acquire", kind: SemAcquire, keys: []string{"sem"}, argv: []string{"4", "2", tok, "20000", "{now}"}, val: 3, num: []int{1, 2, 4, 5}, members: permits(2), limit: 4, src: `
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local id = ARGV[3]
local timeout = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local args = {}
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zcard', key) + n <= limit then
  for i = 0, n - 1 do
    table.insert(args, now)
    table.insert(args, id .. '_' .. i)
  end
  redis.call('zadd', key, unpack(args))
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`},
	{lib: "redis-semaphore MultiSemaphore refresh", kind: SemExtend, keys: []string{"sem"}, argv: []string{"4", "2", tok, "20000", "{now}"}, val: 3, num: []int{1, 2, 4, 5}, members: permits(2), limit: 4, src: `
local key = KEYS[1]
local n = tonumber(ARGV[2])
local id = ARGV[3]
local timeout = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local args = {}
redis.call('zremrangebyscore', key, '-inf', now - timeout)
if redis.call('zscore', key, id .. '_0') then
  for i = 0, n - 1 do
    table.insert(args, now)
    table.insert(args, id .. '_' .. i)
  end
  redis.call('zadd', key, unpack(args))
  redis.call('pexpire', key, timeout)
  return 1
end
return 0`},
	{lib: "redis-semaphore MultiSemaphore release", kind: SemRelease, keys: []string{"sem"}, argv: []string{"2", tok}, val: 2, num: []int{1}, members: permits(2), limit: 4, src: `
local key = KEYS[1]
local n = tonumber(ARGV[1])
local id = ARGV[2]
local args = {}
for i = 0, n - 1 do
  table.insert(args, id .. '_' .. i)
end
return redis.call('zrem', key, unpack(args))`},
	{lib: "rueidislock extend (PEXPIREAT)", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "{now+10000}"}, val: 1, num: []int{2}, src: `
if redis.call("GET",KEYS[1]) == ARGV[1] then return redis.call("PEXPIREAT",KEYS[1],ARGV[2]) else return 0 end`},
	{lib: "Spring RedisLockRegistry obtain", kind: Acquire, reentrant: true, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return true
elseif not owner then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return true
end
return false`},
	{lib: "Spring RedisLockRegistry renew", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
if (redis.call('GET', KEYS[1]) == ARGV[1]) then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return true
end
return false`},
	{lib: "Spring RedisLockRegistry unlock (spin, UNLINK)", kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
	redis.call('UNLINK', KEYS[1])
	return true
end
return false`},
	{lib: "Spring RedisLockRegistry unlock (pub/sub)", kind: Release, keys: []string{"lk"}, argv: []string{tok, "spring-unlock"}, val: 1, publishes: true, src: `
local owner = redis.call('GET', KEYS[1])
if (owner == ARGV[1] and redis.call('DEL', KEYS[1]) == 1) then
	redis.call('PUBLISH', ARGV[2], KEYS[1])
	return true
end
return false`},
	// Other ways to write the same operations.
	{lib: "SETNX then PEXPIRE", kind: Acquire, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0`},
	{lib: "GET then SET EX if absent", kind: Acquire, keys: []string{"lk"}, argv: []string{tok, "20"}, val: 1, num: []int{2}, src: `
local cur = redis.call('get', KEYS[1])
if cur then return 0 end
return redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[2])`},
	{lib: "SET NX PXAT, two named keys", kind: Acquire, keys: []string{"a", "b"}, argv: []string{tok, "{now+10000}"}, val: 1, num: []int{2}, src: `
if redis.call('exists', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('set', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
redis.call('set', KEYS[2], ARGV[1], 'PXAT', ARGV[2])
return 1`},
	{lib: "extend with SET XX PX", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
if ARGV[1] == redis.call('get', KEYS[1]) then
  return redis.call('set', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2])
end
return nil`},
	{lib: "re-entrant with EXAT and EXPIREAT, status replies", kind: Acquire, reentrant: true, keys: []string{"lk"}, argv: []string{tok, "{nows+20}"}, val: 1, num: []int{2}, src: `
local v = redis.call('get', KEYS[1])
if not v then
  redis.call('set', KEYS[1], ARGV[1], 'EXAT', ARGV[2])
  return redis.status_reply('OK')
elseif v == ARGV[1] then
  redis.call('expireat', KEYS[1], ARGV[2])
  return redis.status_reply('OK')
end
return redis.error_reply('LOCKED held by another')`},
	{lib: "UNLINK over #KEYS by index, counting", kind: Release, keys: []string{"a", "b"}, argv: []string{tok}, val: 1, src: `
local n = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then n = n + redis.call('unlink', KEYS[i]) end
end
return n`},
	{lib: "release announcing on a constant channel", kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, publishes: true, src: `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
redis.call('publish', 'lock-released', KEYS[1] .. ':' .. ARGV[1])
return 1`},
	// redlock-universal's atomic extend (its auto-extension): it extends
	// only while at least ARGV[2] ms are left, and answers a table with
	// the ttl it found.
	{lib: "conditional extend on the ttl left (extends)", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "2000", "20000"}, val: 1, num: []int{2, 3}, src: condExtend},
	{lib: "conditional extend on the ttl left (declines)", kind: Extend, keys: []string{"lk"}, argv: []string{tok, "15000", "20000"}, val: 1, num: []int{2, 3}, src: condExtend},
	{lib: "extend over several keys read with MGET", kind: Extend, keys: []string{"a", "b"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local vals = redis.call('mget', unpack(KEYS))
for i = 1, #KEYS do
  if vals[i] ~= ARGV[1] then return 0 end
end
for _, k in ipairs(KEYS) do
  redis.call('set', k, ARGV[1], 'PX', ARGV[2])
end
return #KEYS`},
	{lib: "release publishing on a channel passed in KEYS[2]", kind: Release, keys: []string{"lk", "lk:released"}, argv: []string{tok, "0"}, val: 1, publishes: true, src: `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[2])
return 1`},
	// simple-redis-mutex announces a release with a message built by
	// string.format, on a channel passed in KEYS[2], and returns nothing.
	{lib: "release announcing a message built with string.format", kind: Release, keys: []string{"lk", "lk:released"}, argv: []string{tok}, val: 1, publishes: true, src: `
local k, ch, v = KEYS[1], KEYS[2], ARGV[1]
if redis.call('GET', k) == v then
  redis.call('DEL', k)
  redis.call('PUBLISH', ch, string.format('{"key":"%s","value":"%s"}', k, v))
end`},
	// @sesamecare-oss/redlock (a node-redlock fork) honours a db index
	// with a protected SELECT first.
	{lib: "multi-key acquire after a protected SELECT of the db", kind: Acquire, keys: []string{"a", "b"}, argv: []string{"0", tok, "20000"}, val: 2, num: []int{3}, src: `
redis.pcall("SELECT", tonumber(ARGV[1]))
for i, key in ipairs(KEYS) do
  if redis.call("exists", key) == 1 then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[2], "PX", ARGV[3])
end
return #KEYS`},
	{lib: "multi-key acquire checked with MGET", kind: Acquire, keys: []string{"a", "b"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local vals = redis.call('mget', unpack(KEYS))
for i = 1, #KEYS do
  if vals[i] then return 0 end
end
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return #KEYS`},
	{lib: "release asserting the key's TYPE", kind: Release, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
if redis.call("TYPE", KEYS[1]).ok ~= "string" then return false end
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return false end
redis.call("DEL", KEYS[1])
return true`},
	// node-redis-warlock's touch: the ttl and the value travel in KEYS.
	{lib: "extend with the ttl and value in KEYS", kind: Extend, keys: []string{"lk", "20000", tok}, valKey: 3, src: `
local key = KEYS[1]
local ttl = KEYS[2]
local id  = KEYS[3]
local value = redis.call('GET', key)
if value == id then
  return redis.call('SET', key, id, 'PX', ttl, 'XX');
else
  return 0
end`},
	// Redisson 3.17.0's RLock (Apache-2.0), verbatim: RedissonLock's
	// tryLockInnerAsync, unlockInnerAsync and forceUnlockAsync, and
	// RedissonBaseLock's renewExpirationAsync. ARGV as Redisson passes
	// them: the lease in ms, the owner "<client id>:<thread id>", the
	// unlock message.
	{lib: "Redisson RLock tryLockInner", kind: HashAcquire, hash: true, owner: "c0ffee:1", keys: []string{"lk"}, argv: []string{"30000", "c0ffee:1"}, num: []int{1}, src: redissonTryLock},
	{lib: "Redisson RLock renewExpiration", kind: HashExtend, hash: true, owner: "c0ffee:1", keys: []string{"lk"}, argv: []string{"30000", "c0ffee:1"}, num: []int{1}, src: redissonRenew},
	{lib: "Redisson RLock unlockInner", kind: HashRelease, hash: true, owner: "c0ffee:1", keys: []string{"lk", "redisson_lock__channel:{lk}"}, argv: []string{"0", "30000", "c0ffee:1"}, num: []int{2}, publishes: true, src: redissonUnlock},
	{lib: "Redisson RLock forceUnlock", kind: ForceRelease, hash: true, owner: "c0ffee:1", keys: []string{"lk", "redisson_lock__channel:{lk}"}, argv: []string{"0"}, pubIn: []string{"mine", "other", "mine2"}, src: redissonForceUnlock},
	// Redisson 3.22 and 3.23 name the publish command in ARGV (PUBLISH,
	// or SPUBLISH for sharded pub/sub).
	{lib: "Redisson 3.23 RLock unlockInner", kind: HashRelease, hash: true, owner: "c0ffee:1", keys: []string{"lk", "redisson_lock__channel:{lk}"}, argv: []string{"0", "30000", "c0ffee:1", "publish"}, num: []int{2}, publishes: true, src: redisson323Unlock},
	{lib: "Redisson 3.23 RLock forceUnlock", kind: ForceRelease, hash: true, owner: "c0ffee:1", keys: []string{"lk", "redisson_lock__channel:{lk}"}, argv: []string{"0", "spublish"}, pubIn: []string{"mine", "other", "mine2"}, src: redisson323ForceUnlock},
	// Since 3.24 Redisson's unlock keeps an unlock latch (KEYS[3]): a
	// retried request answers what the first one did.
	{lib: "Redisson RLock unlockInner with its latch", kind: HashRelease, hash: true, owner: "c0ffee:1", keys: []string{"lk", "redisson_lock__channel:{lk}", "redisson_unlock_latch:{lk}:9f1e"}, argv: []string{"0", "30000", "c0ffee:1", "publish", "5000"}, num: []int{2, 5}, publishes: true, src: redissonLatchUnlock},
	// Since 3.45 the watchdog renews every lock of a client in one script,
	// each KEYS[i] with its owner in ARGV[i + 1].
	{lib: "Redisson RLock batched renewal", kind: HashExtend, hash: true, owner: "c0ffee:1", keys: []string{"lk"}, argv: []string{"30000", "c0ffee:1"}, num: []int{1}, src: redissonBatchRenew},
	{lib: "acquire with an absolute expiry from TIME", kind: Acquire, keys: []string{"lk"}, argv: []string{tok, "20000"}, val: 1, num: []int{2}, src: `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PXAT', now + tonumber(ARGV[2])) then return 1 end
return 0`},
	{lib: "check returning the value", kind: Check, keys: []string{"lk"}, argv: []string{tok}, val: 1, src: `
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return {v, redis.call('pttl', KEYS[1])} end
return {}`},
}

// Redisson 3.17.0's RLock scripts, verbatim (the Java string
// concatenations joined).
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
	redissonForceUnlock = "if (redis.call('del', KEYS[1]) == 1) then " +
		"redis.call('publish', KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"
)

// Redisson 3.23.0's unlock and force unlock, verbatim.
const (
	redisson323Unlock = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
		"return nil;" +
		"end; " +
		"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
		"if (counter > 0) then " +
		"redis.call('pexpire', KEYS[1], ARGV[2]); " +
		"return 0; " +
		"else " +
		"redis.call('del', KEYS[1]); " +
		"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
		"return 1; " +
		"end; " +
		"return nil;"
	redisson323ForceUnlock = "if (redis.call('del', KEYS[1]) == 1) then " +
		"redis.call(ARGV[2], KEYS[2], ARGV[1]); " +
		"return 1 " +
		"else " +
		"return 0 " +
		"end"
)

// Redisson's unlock since 3.24 (here from 3.45.0), verbatim.
const redissonLatchUnlock = "local val = redis.call('get', KEYS[3]); " +
	"if val ~= false then " +
	"return tonumber(val);" +
	"end; " +
	"if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then " +
	"return nil;" +
	"end; " +
	"local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); " +
	"if (counter > 0) then " +
	"redis.call('pexpire', KEYS[1], ARGV[2]); " +
	"redis.call('set', KEYS[3], 0, 'px', ARGV[5]); " +
	"return 0; " +
	"else " +
	"redis.call('del', KEYS[1]); " +
	"redis.call(ARGV[4], KEYS[2], ARGV[1]); " +
	"redis.call('set', KEYS[3], 1, 'px', ARGV[5]); " +
	"return 1; " +
	"end; "

// Redisson 3.45.0's batched renewal (LockTask), verbatim.
const redissonBatchRenew = "local result = {} " +
	"for i = 1, #KEYS, 1 do " +
	"if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then " +
	"redis.call('pexpire', KEYS[i], ARGV[1]); " +
	"table.insert(result, 1); " +
	"else " +
	"table.insert(result, 0); " +
	"end; " +
	"end; " +
	"return result;"

const condExtend = `
local left = redis.call('pttl', KEYS[1])
local margin = tonumber(ARGV[2])
if left == -2 then return {-1, -2} end
if left < margin then return {0, left} end
if redis.call('get', KEYS[1]) ~= ARGV[1] then return {-1, left} end
redis.call('pexpire', KEYS[1], tonumber(ARGV[3]))
return {1, left}`

func nowArgs(argv []string) []string {
	out := make([]string, len(argv))
	now := time.Now().UnixMilli()
	for i, a := range argv {
		switch a {
		case "{now}":
			a = strconv.FormatInt(now, 10)
		case "{now+10000}":
			a = strconv.FormatInt(now+10000, 10)
		case "{nows+20}":
			a = strconv.FormatInt(now/1000+20, 10)
		}
		out[i] = a
	}
	return out
}

// TestLibraries runs each script, and each mutation of it, on one real
// Redis and through the recognised shape over a fake quorum, from every
// state (free, held by the client, held by another), and compares the
// replies and the state each leaves.
func TestLibraries(t *testing.T) {
	srv := redistest.Start(t)
	rc := dialRESP(t, srv.Addr)
	for _, lc := range libCases {
		for _, m := range mutations {
			if m.name == "tonumber wrappers" {
				m.wrapNum = lc.num
			}
			t.Run(lc.lib+"/"+m.name, func(t *testing.T) {
				src, err := printLua(lc.src, m)
				if err != nil {
					t.Fatal(err)
				}
				s, err := Recognise([]byte(src))
				if err != nil {
					t.Fatalf("not recognised: %v\n%s", err, src)
				}
				if s.Kind != lc.kind || s.Reentrant != lc.reentrant {
					t.Fatalf("shape %v, want %s (re-entrant %v)\n%s", s, lc.kind, lc.reentrant, src)
				}
				states := []string{"absent", "mine", "other"}
				if lc.members != nil {
					states = []string{"absent", "mine", "full"}
				}
				if lc.hash {
					states = append(states, "mine2")
				}
				for _, st := range states {
					compareRun(t, rc, lc, src, s, st)
				}
			})
		}
	}
}

func compareRun(t *testing.T, rc *respConn, lc libCase, src string, s *Shape, st string) {
	t.Helper()
	argv := nowArgs(lc.argv)
	fake := newFake()
	rc.do(t, "FLUSHALL")
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	lockKeys := lc.keys
	var val string
	switch {
	case lc.hash:
		val, lockKeys = lc.owner, lc.keys[:1]
	case lc.valKey > 0:
		val, lockKeys = lc.keys[lc.valKey-1], lc.keys[:1]
	default:
		val = argv[lc.val-1]
	}
	for _, k := range lockKeys {
		switch {
		case lc.hash && st != "absent":
			owner, n := val, 1
			switch st {
			case "other":
				owner = other
			case "mine2":
				n = 2
			}
			rc.do(t, "HINCRBY", k, owner, strconv.Itoa(n))
			rc.do(t, "PEXPIRE", k, "10000")
			fake.kv[k] = fakeKey{owner, time.Now().Add(10 * time.Second)}
			fake.holds[k] = n
		case lc.hash:
		case lc.members != nil && st == "mine":
			for _, m := range lc.members(val) {
				rc.do(t, "ZADD", k, now, m)
			}
			rc.do(t, "PEXPIRE", k, "10000")
			fake.sems[k] = map[string]int{val: len(lc.members(val))}
		case lc.members != nil && st == "full":
			fake.sems[k] = map[string]int{}
			for i := 0; i < lc.limit; i++ {
				rc.do(t, "ZADD", k, now, other+strconv.Itoa(i))
				fake.sems[k][other+strconv.Itoa(i)] = 1
			}
		case lc.members != nil:
		case st == "mine":
			rc.do(t, "SET", k, val, "PX", "10000")
			fake.kv[k] = fakeKey{val, time.Now().Add(10 * time.Second)}
		case st == "other":
			rc.do(t, "SET", k, other, "PX", "10000")
			fake.kv[k] = fakeKey{other, time.Now().Add(10 * time.Second)}
		}
	}
	args := append([]string{"EVAL", src, strconv.Itoa(len(lc.keys))}, lc.keys...)
	want := rc.do(t, append(args, argv...)...)
	got, err := s.Run(context.Background(), fake, lc.keys, argv)
	var se ScriptError
	if errors.As(err, &se) {
		got = se
	} else if err != nil {
		t.Fatalf("%s: Run: %v", st, err)
	}
	if fmtReply(got) != fmtReply(want) {
		t.Errorf("%s: Run answers %s, one Redis %s (ops: %v)\n%s", st, fmtReply(got), fmtReply(want), fake.calls, src)
	}
	// The state left behind.
	for _, k := range lockKeys {
		if lc.hash {
			fv, held := fake.held(k)
			exists := rc.do(t, "EXISTS", k) == int64(1)
			rp, _ := rc.do(t, "PTTL", k).(int64)
			switch {
			case exists != held:
				t.Errorf("%s: %s exists %v on one Redis, held %v through the quorum (ops: %v)", st, k, exists, held, fake.calls)
			case held:
				if n := rc.do(t, "HGET", k, fv.val); n != strconv.Itoa(fake.holds[k]) {
					t.Errorf("%s: %s counts %v holds of %q on one Redis, %d through the quorum (ops: %v)", st, k, n, fv.val, fake.holds[k], fake.calls)
				}
				if d := time.Until(fv.exp).Milliseconds() - rp; d > 500 || d < -500 {
					t.Errorf("%s: %s expires in %dms on one Redis, %v through the quorum (ops: %v)", st, k, rp, time.Until(fv.exp), fake.calls)
				}
			}
			continue
		}
		if lc.members != nil {
			n := 0
			for _, c := range fake.sems[k] {
				n += c
			}
			if real := rc.do(t, "ZCARD", k); real != int64(n) {
				t.Errorf("%s: %s has %v members on one Redis, %d permits through the quorum (ops: %v)", st, k, real, n, fake.calls)
			}
			continue
		}
		rv := rc.do(t, "GET", k)
		rp, _ := rc.do(t, "PTTL", k).(int64)
		fv, held := fake.held(k)
		switch {
		case !held && rv != nil, held && rv != fv.val:
			t.Errorf("%s: %s holds %v on one Redis, %q (held %v) through the quorum (ops: %v)", st, k, rv, fv.val, held, fake.calls)
		case held:
			if d := time.Until(fv.exp).Milliseconds() - rp; d > 500 || d < -500 {
				t.Errorf("%s: %s expires in %dms on one Redis, %v through the quorum (ops: %v)", st, k, rp, time.Until(fv.exp), fake.calls)
			}
		}
	}
	wantPubs := 0
	if lc.publishes && st == "mine" || slices.Contains(lc.pubIn, st) {
		wantPubs = 1
	}
	if len(fake.pubs) != wantPubs {
		t.Errorf("%s: published %v, want %d messages", st, fake.pubs, wantPubs)
	}
}

func fmtReply(v any) string {
	switch v := v.(type) {
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, fmtReply(x))
		}
		return "[" + strings.Join(parts, " ") + "]"
	case ScriptError:
		// Redis appends where the script failed; compare the error itself.
		s := string(v)
		if i := strings.Index(s, " script: "); i >= 0 {
			s = s[:i]
		}
		return "error:" + s
	case int64:
		// pttl replies differ by the time between the two runs.
		if v >= 1000 {
			return fmt.Sprintf("int:~%ds", (v+500)/1000)
		}
		return fmt.Sprintf("int:%d", v)
	}
	return fmtAny(v)
}
