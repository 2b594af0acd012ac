-- Acquire every lock key, all or none.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] fence counters, parallel to the lock keys
-- KEYS[2n+1]    the master's fence floor
-- ARGV[1] token, ARGV[2] ttl in milliseconds
-- Returns {1, fence_1, ..., fence_n} when every lock key now holds the
-- token, each fence being max(counter, floor) as a string; else {0} with
-- nothing changed.
local n = (#KEYS - 1) / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0}
  end
end
local floor = tonumber(redis.call('GET', KEYS[2 * n + 1]) or '0')
local out = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local c = tonumber(redis.call('GET', KEYS[n + i]) or '0')
  if floor > c then
    c = floor
  end
  out[i + 1] = string.format('%d', c)
end
return out
