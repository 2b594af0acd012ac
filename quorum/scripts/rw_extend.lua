-- Extend a read lock: lock the lock key, readers its readers, lease the
-- master's lease high-water mark, gone the token's release tombstone
-- (see tombstone); token, ttl in ms, live "1" when the
-- lease is known to be live. A live reader is extended (see read_hold);
-- a live lease whose reader is gone here is recorded again where the lock
-- key is free or held by readers, never where a writer holds it nor where
-- the token released it (quorum/
-- doc.go, "Extensions re-enrol masters"). Returns 1 if extended, else 0.
local lock, readers, lease, gone = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl, live = ARGV[1], ARGV[2], ARGV[3]

local now = time_ms()
local was = redis.call('ZSCORE', readers, token)
local v = redis.call('GET', lock)
if not (was and tonumber(was) > now and v == '') then
  if live ~= '1' or (v and v ~= '') or redis.call('EXISTS', gone) == 1 then
    return 0
  end
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
end
read_hold(lock, readers, lease, token, ttl, now)
return 1
