-- lock_extend for drop-in mode's locks: also resets the ttl of each
-- extended lock key's owner key when it has one (an owner nonce lives as
-- long as its lock, so that a delete can tell the grant from a later one
-- with the same value; see lock_delete_exact), and a re-taken key gets the
-- grant's owner nonce back. Keys as lock_extend's, with owner the owner
-- keys (one per lock key) before the tombstones; arguments as lock_extend's with nonce, the
-- grant's owner nonce, before the fences.
-- Returns how many lock keys hold the token after it.
local n = (#KEYS - 2) / 4
local lock, fence, owner, gone = 0, n, 2 * n + 2, 3 * n + 2
local lease, seq = KEYS[2 * n + 1], KEYS[2 * n + 2]
local token, ttl, lagms, live, nonce = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local value = 5

if live == '1' and nonce ~= '' then
  return retake(lock, fence, owner, gone, n, lease, seq, token, ttl, lagms, nonce, value)
end
return extend(lock, fence, owner, n, lease, token, ttl, lagms)
