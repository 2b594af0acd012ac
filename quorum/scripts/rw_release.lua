-- Release a read lock. KEYS[1] the lock key, KEYS[2] the readers. ARGV[1]
-- token, ARGV[2] the release channel (optional: a rollback does not
-- announce). The lock key and the readers then live as long as the
-- longest-lived reader left; when none is left both are deleted and,
-- if the token held, the release is announced so that writers try at
-- once. Returns 1 if the token held a live read lock, else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local was = redis.call('ZSCORE', KEYS[2], ARGV[1])
local held = was and tonumber(was) > now
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local readers = redis.call('GET', KEYS[1]) == ''
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
if last then
  if readers then
    redis.call('SET', KEYS[1], '', 'PX', tonumber(last) - now)
  end
  redis.call('PEXPIRE', KEYS[2], tonumber(last) - now)
else
  if readers then
    redis.call('DEL', KEYS[1])
  end
  redis.call('DEL', KEYS[2])
  if held and ARGV[2] then
    redis.call('PUBLISH', ARGV[2], '1')
  end
end
if held then
  return 1
end
return 0
