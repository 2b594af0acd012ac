-- A read-write lock kept in a sorted set, in the shape of Symfony Lock's
-- RedisStore (our own paraphrase; see internal/luashape/zlock_test.go).
-- Shared acquire (saveRead).
if redis.call('type', KEYS[1]).ok == 'string' then return false end
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if not redis.call('zscore', KEYS[1], ARGV[2]) and redis.call('zscore', KEYS[1], '__write__') then
  return false
end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('zrem', KEYS[1], '__write__')
redis.call('pexpireat', KEYS[1], redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[2])
return true
