-- What one master holds for an election: lock its lock key, advert its
-- advertisement. Returns {holder, pttl, term, value}: holder the lock
-- key's value (false when free), pttl its remaining ttl in ms, and, when
-- the advertisement is the holder's, the term recorded there (0 while
-- none is) and the advertised value (else 0 and false).
local lock, advert = KEYS[1], KEYS[2]

local v = redis.call('GET', lock)
local term, value = 0, false
if v and redis.call('HGET', advert, 'token') == v then
  term = tonumber(redis.call('HGET', advert, 'term') or '0')
  value = redis.call('HGET', advert, 'value')
end
return {v, redis.call('PTTL', lock), term, value}
