-- lock_extend for drop-in mode's locks: also resets the ttl of each
-- extended lock key's owner key when it has one (an owner nonce lives as
-- long as its lock, so that a delete can tell the grant from a later one
-- with the same value; see lock_delete_exact). Keys and arguments as
-- lock_extend's, then owner the owner keys (one per lock key).
-- Returns how many lock keys it extended.
local n = (#KEYS - 1) / 3
local lock, fence, owner = 0, n, 2 * n + 1
local lease = KEYS[2 * n + 1]
local token, ttl, lagms = ARGV[1], ARGV[2], ARGV[3]

return extend(lock, fence, owner, nil, nil, n, lease, token, ttl, lagms)
