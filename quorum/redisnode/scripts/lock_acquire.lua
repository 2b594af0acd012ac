-- Acquire every lock key, all or none, and give each its fence.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] the resources' fence keys, parallel to the lock keys
-- KEYS[2n+1]    the master's lagging bound (expires after ARGV[4] ms)
-- KEYS[2n+2]    the master's fence sequence (high-water mark, no expiry)
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the proxy's proposed fence,
-- ARGV[4] the lag period in ms.
-- When every lock key is free or already holds the token: sets them, gives
-- each resource the fence max(proposal, its fence key + 1, lag + 1), keeps
-- it in the fence key for ttl + lag ms, raises the sequence, and returns
-- {1, sequence, fence_1, ..., fence_n}. Else changes nothing and returns
-- {0, sequence}. See quorum/doc.go, "Fencing", for why this is monotonic.
local n = (#KEYS - 2) / 2
local seq = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0, seq}
  end
end
local lag = redis.call('GET', KEYS[2 * n + 1])
if lag then
  lag = tonumber(lag)
else
  lag = seq
  redis.call('SET', KEYS[2 * n + 1], string.format('%d', seq), 'PX', ARGV[4])
end
local base = tonumber(ARGV[3])
if lag + 1 > base then
  base = lag + 1
end
local keep = tonumber(ARGV[2]) + tonumber(ARGV[4])
local top = seq
local out = {1, 0}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local c = base
  local cur = redis.call('GET', KEYS[n + i])
  if cur and tonumber(cur) + 1 > c then
    c = tonumber(cur) + 1
  end
  redis.call('SET', KEYS[n + i], string.format('%d', c), 'PX', keep)
  if c > top then
    top = c
  end
  out[i + 2] = c
end
if top > seq then
  redis.call('SET', KEYS[2 * n + 2], string.format('%d', top))
end
out[2] = top
return out
