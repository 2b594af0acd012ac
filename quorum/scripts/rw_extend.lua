-- Extend a read lock: lock the lock key, readers its readers, lease the
-- master's lease high-water mark; token, ttl in ms. Only a live reader is
-- extended (see read_hold; also while its own downgraded write lock
-- holds the key). Returns 1 if extended, else 0.
local lock, readers, lease = KEYS[1], KEYS[2], KEYS[3]
local token, ttl = ARGV[1], ARGV[2]

local now = time_ms()
local was = redis.call('ZSCORE', readers, token)
local v = redis.call('GET', lock)
if not (was and tonumber(was) > now) or (v ~= '' and v ~= token) then
  return 0
end
read_hold(lock, readers, lease, token, ttl, now, v == token)
return 1
