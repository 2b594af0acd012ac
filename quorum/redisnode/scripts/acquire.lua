-- Acquire every lock key, all or none.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] fence counters, parallel to the lock keys
-- ARGV[1] token, ARGV[2] ttl in milliseconds
-- Returns {1, fence_1, ..., fence_n} (fences as strings) when every lock key
-- now holds the token, else {0} with nothing changed.
local n = #KEYS / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0}
  end
end
local out = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  out[i + 1] = redis.call('GET', KEYS[n + i]) or '0'
end
return out
