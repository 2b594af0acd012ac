-- Who holds a lock key on this master, for a delete that must remove
-- exactly the grant a quorum holds (drop-in DEL, DELIFEQ and the release
-- scripts): lock the lock key, owner its owner key. Returns {value,
-- owner}: value false when free, owner "" when the key has no owner nonce
-- (it was not set by lock_acquire_nx).
local lock, owner = KEYS[1], KEYS[2]

local v = redis.call('GET', lock)
if not v then
  return {false, ''}
end
return {v, redis.call('GET', owner) or ''}
