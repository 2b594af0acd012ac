-- What one master holds for an election: lock its lock key, fence its
-- fence key, advert its advertisement. Returns {holder, pttl, fence,
-- value}: holder the lock key's value (false when free), pttl its
-- remaining ttl in ms, fence the fence key's value (0 when none), value
-- the advertised value when the advertisement is the holder's (else
-- false).
local lock, fence, advert = KEYS[1], KEYS[2], KEYS[3]

local v = redis.call('GET', lock)
local value = false
if v and redis.call('HGET', advert, 'token') == v then
  value = redis.call('HGET', advert, 'value')
end
return {v, redis.call('PTTL', lock), tonumber(redis.call('GET', fence) or '0'), value}
