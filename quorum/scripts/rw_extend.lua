-- Extend a read lock. KEYS[1] the lock key, KEYS[2] the readers, KEYS[3]
-- the master's lease high-water mark. ARGV[1] token, ARGV[2] ttl in ms.
-- Only a live reader is extended; the lock key and the readers then live
-- as long as the longest-lived reader.
-- Returns 1 if extended, else 0.
-- raise sets the master's lease high-water mark (the master's time in ms
-- at which the longest-lived grant it holds expires) to now + ttl if that
-- is later; it expires with that grant.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local was = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not (was and tonumber(was) > now) or redis.call('GET', KEYS[1]) ~= '' then
  return 0
end
redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('SET', KEYS[1], '', 'PX', last - now)
redis.call('PEXPIRE', KEYS[2], last - now)
raise(KEYS[3], tonumber(ARGV[2]))
return 1
