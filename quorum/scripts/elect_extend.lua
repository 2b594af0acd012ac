-- Extend a leadership: lock_extend on the election's lock key, and the
-- advertisement kept as long as the lock key where it is the token's. Keys
-- and arguments as lock_extend's, then advert the advertisement.
-- Returns how many lock keys it extended.
local n = (#KEYS - 2) / 2
local lock, fence = 0, n
local lease, advert = KEYS[2 * n + 1], KEYS[2 * n + 2]
local token, ttl, lagms = ARGV[1], ARGV[2], ARGV[3]

local c = extend(lock, fence, nil, nil, nil, n, lease, token, ttl, lagms)
if c == n and redis.call('HGET', advert, 'token') == token then
  redis.call('PEXPIRE', advert, ttl)
end
return c
