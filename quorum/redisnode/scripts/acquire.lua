-- Acquire every lock key, all or none, and take the next fence of each.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] fence counters, parallel to the lock keys
-- KEYS[2n+1]    the master's fence floor
-- KEYS[2n+2]    the master's fence high-water mark
-- ARGV[1] token, ARGV[2] ttl in milliseconds
-- When every lock key is free or already holds the token, sets them, raises
-- each counter to max(counter, floor) + 1 (and the high-water mark with it)
-- and returns {1, counter_1, ..., counter_n} as strings. Else changes
-- nothing and returns {0}.
local n = (#KEYS - 2) / 2
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0}
  end
end
local floor = tonumber(redis.call('GET', KEYS[2 * n + 1]) or '0')
local hwm = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
local top = hwm
local out = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local c = tonumber(redis.call('GET', KEYS[n + i]) or '0')
  if floor > c then
    c = floor
  end
  c = c + 1
  local s = string.format('%d', c)
  redis.call('SET', KEYS[n + i], s)
  if c > top then
    top = c
  end
  out[i + 1] = s
end
if top > hwm then
  redis.call('SET', KEYS[2 * n + 2], string.format('%d', top))
end
return out
