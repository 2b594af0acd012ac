-- Reset the ttl of each lock key that holds the token.
-- KEYS[1..n] lock keys; ARGV[1] token; ARGV[2] ttl in milliseconds.
-- Returns how many keys it extended.
local c = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    c = c + 1
  end
end
return c
