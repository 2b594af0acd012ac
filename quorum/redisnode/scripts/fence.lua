-- Raise fence counters, only while every lock key still holds the token.
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence counters, KEYS[2n+1] the
-- master's high-water mark. ARGV[1] token, ARGV[2..n+1] fences.
-- Returns 1 if it held (and raised), else 0.
local n = (#KEYS - 1) / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local hwm = tonumber(redis.call('GET', KEYS[2 * n + 1]) or '0')
local top = hwm
for i = 1, n do
  local f = tonumber(ARGV[i + 1])
  if f > tonumber(redis.call('GET', KEYS[n + i]) or '0') then
    redis.call('SET', KEYS[n + i], ARGV[i + 1])
  end
  if f > top then
    top = f
  end
end
if top > hwm then
  redis.call('SET', KEYS[2 * n + 1], string.format('%d', top))
end
return 1
