-- Delete each lock key that holds the token and announce it.
-- KEYS[1..n] lock keys; ARGV[1] token; ARGV[2..n+1] channels, parallel.
-- Returns how many keys it deleted.
local c = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    redis.call('PUBLISH', ARGV[i + 1], '1')
    c = c + 1
  end
end
return c
