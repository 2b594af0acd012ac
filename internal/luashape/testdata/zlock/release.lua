-- A read-write lock kept in a sorted set, in the shape of Symfony Lock's
-- RedisStore (our own paraphrase; see internal/luashape/zlock_test.go).
-- Release (delete): ARGV[1] token.
if redis.call('type', KEYS[1]).ok == 'string' then return false end
if not redis.call('zscore', KEYS[1], ARGV[1]) then return false end
redis.call('zrem', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[1], '__write__')
local last = redis.call('zrevrange', KEYS[1], 0, 0, 'WITHSCORES')[2]
if last ~= nil then redis.call('pexpireat', KEYS[1], last) end
return true
