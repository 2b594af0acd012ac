-- Write a lease's fences back, only while every lock key holds the token.
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys, KEYS[2n+1] the master's
-- lagging bound (not used here), KEYS[2n+2] the master's fence sequence.
-- ARGV[1] token, ARGV[2] the lag period in ms, ARGV[3..n+2] the fences.
-- Raises each fence key to at least its fence (living as long as the lock
-- plus the lag period) and the sequence with them. Returns 1 if it held,
-- else 0 and changes nothing.
local n = (#KEYS - 2) / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
local seq = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
local top = seq
for i = 1, n do
  local f = tonumber(ARGV[i + 2])
  local cur = tonumber(redis.call('GET', KEYS[n + i]) or '0')
  if cur > f then
    f = cur
  end
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl < 0 then
    ttl = 0
  end
  redis.call('SET', KEYS[n + i], string.format('%d', f), 'PX', ttl + tonumber(ARGV[2]))
  if f > top then
    top = f
  end
end
if top > seq then
  redis.call('SET', KEYS[2 * n + 2], string.format('%d', top))
end
return 1
