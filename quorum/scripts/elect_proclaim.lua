-- Proclaim: the leader changes its advertised value, only where the
-- election's lock key holds its token. lock the election's lock key,
-- advert its advertisement; token, value the new value. The advertisement
-- lives as long as the lock key. Returns 1 if the token holds the lock key
-- (the value is set), else 0 and changes nothing.
local lock, advert = KEYS[1], KEYS[2]
local token, value = ARGV[1], ARGV[2]

if redis.call('GET', lock) ~= token then
  return 0
end
local left = redis.call('PTTL', lock)
if left <= 0 then
  return 0
end
redis.call('HSET', advert, 'token', token, 'value', value)
redis.call('PEXPIRE', advert, left)
return 1
