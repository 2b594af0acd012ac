-- Acquire every lock key, all or none, and give each its fence: the plain
-- and multi-resource lock of a writer that does not wait (a writer that
-- waits runs lock_acquire_wait, a fair lock lock_acquire_fair).
-- lock the lock keys and fence the resources' fence keys (n each, sorted
-- by resource), lag the master's lagging bound (expires after lagms ms),
-- seq its fence sequence (high-water mark, no expiry), lease its lease
-- high-water mark (see raise); token, ttl in ms, proposal the proxy's
-- proposed fence, lagms the lag period in ms.
-- When every lock key is free or already holds the token: sets them and
-- gives each resource its fence (see grant), returning {1, sequence,
-- fence_1, ..., fence_n}. Else changes nothing and returns {0, sequence}.
-- A lock key holding "" is held by readers (no token is empty).
-- A plain lock (one resource) costs a master three calls when granted:
-- SET NX, the sequence's INCR and the lease mark's PTTL (see grant).
local n = (#KEYS - 3) / 2
local lock, fence = 0, n
local lag, seq, lease = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3]
local token, ttl, proposal, lagms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if n == 1 then
  -- One resource: SET NX takes a free key in one call; a taken one is
  -- refused unless the token holds it (a TOKEN retry).
  if redis.call('SET', KEYS[lock + 1], token, 'NX', 'PX', ttl) then
    return grant(lock, fence, n, lag, seq, lease, nil, token, ttl, proposal, lagms, false, true)
  end
  local v = redis.call('MGET', KEYS[lock + 1], seq)
  if not v[1] or v[1] == '' then
    -- The key exists (SET NX failed): held by readers (""), or not a
    -- string, which GET reports as WRONGTYPE.
    redis.call('GET', KEYS[lock + 1])
  end
  if v[1] ~= token then
    return {0, num(v[2]) or 0}
  end
  return grant(lock, fence, n, lag, seq, lease, num(v[2]) or 0, token, ttl, proposal, lagms, true)
end
local high = tonumber(redis.call('GET', seq) or '0')
local mine = free_or_mine(lock, n, token)
if mine == nil then
  return {0, high}
end
return grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
