-- Reset the ttl of each lock key that holds the token, and of its fence
-- key (to the ttl plus the lag period).
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys. ARGV[1] token, ARGV[2]
-- ttl in ms, ARGV[3] the lag period in ms.
-- Returns how many lock keys it extended.
local n = #KEYS / 2
local c = 0
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('PEXPIRE', KEYS[n + i], tonumber(ARGV[2]) + tonumber(ARGV[3]))
    c = c + 1
  end
end
return c
