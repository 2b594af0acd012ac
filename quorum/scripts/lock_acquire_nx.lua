-- Acquire every lock key, all or none, only where none of them exists:
-- SET NX's own rule (drop-in mode), so a key that already holds the same
-- value is refused too. Two clients that lock with one constant value must
-- not both win. Each key gets its fence as in lock_acquire, and beside it
-- the attempt's owner nonce, so that the rollback of a failed attempt
-- (lock_unacquire_nx) deletes only what this attempt set, never the key of
-- another client that used the same value.
-- Keys as lock_acquire's, then owner the owner keys (one per lock key);
-- value, ttl, proposal and lagms as lock_acquire's token, ttl, proposal
-- and lagms, nonce the attempt's owner nonce.
-- Returns {1, sequence, fence_1, ..., fence_n}, or {0, sequence} and
-- changes nothing.
local n = (#KEYS - 3) / 3
local lock, fence, owner = 0, n, 2 * n + 3
local lag, seq, lease = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3]
local value, ttl, proposal, lagms, nonce = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local high = tonumber(redis.call('GET', seq) or '0')
for i = 1, n do
  if redis.call('EXISTS', KEYS[lock + i]) == 1 then
    return {0, high}
  end
end
for i = 1, n do
  redis.call('SET', KEYS[owner + i], nonce, 'PX', ttl)
end
return grant(lock, fence, n, lag, seq, lease, high, value, ttl, proposal, lagms, false)
