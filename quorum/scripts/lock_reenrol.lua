-- Take a lease's lock keys again where they are gone (an extension's
-- re-enrolment, quorum/doc.go "Leases re-enrol masters"): lock_acquire's
-- keys and arguments, then broken each resource's break mark, and for a
-- re-entrant lock (one resource) holds its holds, with hold each hold id
-- and its order as a quorum records them ("Re-entrant locks").
-- As lock_acquire, except that nothing is taken where a break mark lists
-- the token (an operator broke the lease: RLOCKBREAK); the holds given
-- join the lock's holds here, living as long as it, with the fence
-- this master gives as theirs (lock_hold). Returns what
-- lock_acquire returns.
local n = math.floor((#KEYS - 3) / 3)
local lock, fence, broken = 0, n, 2 * n + 3
local lag, seq, lease, holds = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3], KEYS[3 * n + 4]
local token, ttl, proposal, lagms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local hold = 4

local high = tonumber(redis.call('GET', seq) or '0')
for i = 1, n do
  if redis.call('SISMEMBER', KEYS[broken + i], token) == 1 then
    return {0, high}
  end
end
local mine = free_or_mine(lock, n, token)
if mine == nil then
  return {0, high}
end
local out = grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
if holds and #ARGV - hold > 0 then
  for j = 1, #ARGV - hold - 1, 2 do
    redis.call('ZADD', holds, ARGV[hold + j + 1], ARGV[hold + j])
  end
  local life = redis.call('PTTL', KEYS[lock + 1])
  if life > 0 then
    redis.call('PEXPIRE', holds, life)
    -- The holds' fence (see lock_hold): this master's.
    redis.call('SET', KEYS[fence + 1], string.format('%d', out[3]), 'PX', life)
  end
end
return out
