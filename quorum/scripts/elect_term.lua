-- Record a leadership's term in its advertisement, once the campaign
-- decided it (the lease's fence): only where the election's lock key and
-- the advertisement both hold the token. lock the election's lock key,
-- advert its advertisement; token, term. Returns 1 if it recorded it,
-- else 0 and changes nothing.
local lock, advert = KEYS[1], KEYS[2]
local token, term = ARGV[1], ARGV[2]

if redis.call('GET', lock) ~= token or redis.call('HGET', advert, 'token') ~= token then
  return 0
end
redis.call('HSET', advert, 'term', term)
return 1
