-- Acquire every lock key, all or none, only where none of them exists:
-- SET NX's own rule (drop-in mode), so a key that already holds the same
-- value is refused too. Two clients that lock with one constant value must
-- not both win. Each key gets its fence as in lock_acquire, and beside it
-- the attempt's owner nonce, so that the rollback of a failed attempt
-- (lock_unacquire_nx) deletes only what this attempt set, never the key of
-- another client that used the same value.
-- KEYS[1..n]       lock keys
-- KEYS[n+1..2n]    the resources' fence keys, parallel to the lock keys
-- KEYS[2n+1]       the master's lagging bound (expires after ARGV[4] ms)
-- KEYS[2n+2]       the master's fence sequence (high-water mark)
-- KEYS[2n+3]       the master's lease high-water mark
-- KEYS[2n+4..3n+3] the owner keys, parallel to the lock keys
-- ARGV[1] value, ARGV[2] ttl in ms, ARGV[3] the proxy's proposed fence,
-- ARGV[4] the lag period in ms, ARGV[5] the attempt's owner nonce.
-- Returns {1, sequence, fence_1, ..., fence_n}, or {0, sequence} and
-- changes nothing.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local n = (#KEYS - 3) / 3
local seq = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
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
  redis.call('SET', KEYS[2 * n + 3 + i], ARGV[5], 'PX', ARGV[2])
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
raise(KEYS[2 * n + 3], tonumber(ARGV[2]))
out[2] = top
return out
