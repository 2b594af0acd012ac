-- Release a read lock: lock the lock key, readers its readers; token,
-- channel the release channel (optional: a rollback does not announce).
-- The lock key and the readers then live as long as the longest-lived
-- reader left; when none is left both are deleted and, if the token held,
-- the release is announced so that writers try at once. Returns 1 if the
-- token held a live read lock, else 0.
local lock, readers = KEYS[1], KEYS[2]
local token, channel = ARGV[1], ARGV[2]

local now = time_ms()
local was = redis.call('ZSCORE', readers, token)
local held = was and tonumber(was) > now
redis.call('ZREM', readers, token)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local shared = redis.call('GET', lock) == ''
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')[2]
if last then
  if shared then
    redis.call('SET', lock, '', 'PX', tonumber(last) - now)
  end
  redis.call('PEXPIRE', readers, tonumber(last) - now)
else
  if shared then
    redis.call('DEL', lock)
  end
  redis.call('DEL', readers)
  if held and channel then
    redis.call('PUBLISH', channel, '1')
  end
end
if held then
  return {1, tonumber(was) - now}
end
return {0, 0}
