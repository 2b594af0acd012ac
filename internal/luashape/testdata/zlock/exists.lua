-- A read-write lock kept in a sorted set, in the shape of Symfony Lock's
-- RedisStore (our own paraphrase; see internal/luashape/zlock_test.go).
-- Check (exists).
if redis.call('type', KEYS[1]).ok == 'string' then return false end
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zscore', KEYS[1], ARGV[2]) then return true end
return false
