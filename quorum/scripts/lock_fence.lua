-- Write a lease's fences back, only while every lock key holds the token:
-- lock the lock keys, fence their fence keys, seq the master's fence
-- sequence; token, lagms the lag period in ms, then the fences (one per
-- lock key). Raises each fence key to at least its fence (living as long
-- as the lock plus the lag period) and the sequence with them. Returns 1
-- if it held, else 0 and changes nothing.
local n = (#KEYS - 1) / 2
local lock, fence = 0, n
local seq = KEYS[2 * n + 1]
local token, lagms = ARGV[1], ARGV[2]
local value = 2

for i = 1, n do
  if redis.call('GET', KEYS[lock + i]) ~= token then
    return 0
  end
end
local high = tonumber(redis.call('GET', seq) or '0')
local top = high
for i = 1, n do
  local f = math.max(tonumber(ARGV[value + i]), tonumber(redis.call('GET', KEYS[fence + i]) or '0'))
  local ttl = math.max(redis.call('PTTL', KEYS[lock + i]), 0)
  redis.call('SET', KEYS[fence + i], string.format('%d', f), 'PX', ttl + tonumber(lagms))
  top = math.max(top, f)
end
if top > high then
  redis.call('SET', seq, string.format('%d', top))
end
return 1
