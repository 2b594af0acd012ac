-- Who holds a lock key on this master, for a delete that must remove
-- exactly the grant a quorum holds (drop-in DEL, DELIFEQ and the release
-- scripts). KEYS[1] the lock key, KEYS[2] its owner key. Returns
-- {value, owner}: value false when free, owner "" when the key has no
-- owner nonce (it was not set by lock_acquire_nx).
local v = redis.call('GET', KEYS[1])
if not v then
  return {false, ''}
end
return {v, redis.call('GET', KEYS[2]) or ''}
