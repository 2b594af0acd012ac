-- Raise fence counters, only while every lock key still holds the token.
-- KEYS as in acquire.lua; ARGV[1] token, ARGV[2..n+1] fences.
-- Returns 1 if it held (and raised), else 0.
local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, n do
  local cur = tonumber(redis.call('GET', KEYS[n + i]) or '0')
  if tonumber(ARGV[i + 1]) > cur then
    redis.call('SET', KEYS[n + i], ARGV[i + 1])
  end
end
return 1
