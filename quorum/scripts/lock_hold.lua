-- lock_acquire for a re-entrant hold (RLOCK ... TOKEN t REENTRANT; one
-- resource; quorum/doc.go, "Re-entrant locks"): keys and arguments as
-- lock_acquire's, then holds the lock's holds (a sorted set of hold ids
-- by order), hold this try's hold id, order its place among the holds,
-- and max the most holds a lock may count.
-- The lock is taken as lock_acquire takes it (free, or the token's
-- already: its life is never shortened), and the hold id joins the
-- holds. A lock the token holds without holds (a plain grant) counts as
-- one hold, "base". The holds share one fence, kept in the fence key
-- while they exist: the first hold's. Returns lock_acquire's reply, or
-- {-1, sequence} when the lock counts max holds already.
local n = (#KEYS - 4) / 2
local lock, fence = 0, n
local lag, seq, lease, holds = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3], KEYS[2 * n + 4]
local token, ttl, proposal, lagms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local hold, order, max = ARGV[5], ARGV[6], ARGV[7]

local high = tonumber(redis.call('GET', seq) or '0')
local v = redis.call('GET', KEYS[lock + 1])
if v and v ~= token then
  return {0, high}
end
local mine = v == token
-- kept: the fence of the lock's holds, when they exist here. Their fence
-- key is written whenever the holds are created (below, and in
-- lock_reenrol) and goes with them (lock_unhold's drop): a hold joins
-- the grant its holds belong to, and gets its fence (no fence is kept for
-- a plain lock: docs/design/fencing.md).
local kept = nil
if not mine then
  redis.call('DEL', holds)
else
  local c = redis.call('ZCARD', holds)
  if c > 0 then
    kept = redis.call('GET', KEYS[fence + 1])
  end
  if not redis.call('ZSCORE', holds, hold) then
    if c == 0 then
      redis.call('ZADD', holds, 0, 'base')
      c = 1
    end
    if c >= tonumber(max) then
      return {-1, high}
    end
  end
end
redis.call('ZADD', holds, order, hold)
local out
if kept then
  -- As grant, without a new fence: the key's life is never shortened.
  local px = math.max(tonumber(ttl), redis.call('PTTL', KEYS[lock + 1]))
  redis.call('SET', KEYS[lock + 1], token, 'PX', px)
  raise(lease, tonumber(ttl))
  out = {1, high, tonumber(kept)}
else
  out = grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
end
local life = redis.call('PTTL', KEYS[lock + 1])
-- (A lock key without an expiry, not the proxy's, leaves them as they are.)
if life > 0 then
  redis.call('PEXPIRE', holds, life)
  redis.call('SET', KEYS[fence + 1], string.format('%d', out[3]), 'PX', life)
end
return out
