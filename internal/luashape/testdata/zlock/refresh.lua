-- A read-write lock kept in a sorted set, in the shape of Symfony Lock's
-- RedisStore (our own paraphrase; see internal/luashape/zlock_test.go).
-- Refresh (putOffExpiration).
if redis.call('type', KEYS[1]).ok == 'string' then return false end
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if not redis.call('zscore', KEYS[1], ARGV[2]) then return false end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
if redis.call('zscore', KEYS[1], '__write__') then
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), '__write__')
end
redis.call('pexpireat', KEYS[1], redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[2])
return true
