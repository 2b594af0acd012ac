-- Reset the ttl of each lock key that holds the token, and of its fence
-- key (to the ttl plus the lag period).
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys, KEYS[2n+1] the master's
-- lease high-water mark. ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the lag
-- period in ms.
-- Returns how many lock keys it extended.
-- raise sets the master's lease high-water mark (the master's time in ms
-- at which the longest-lived grant it holds expires) to now + ttl if that
-- is later; it expires with that grant.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local n = (#KEYS - 1) / 2
local c = 0
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('PEXPIRE', KEYS[n + i], tonumber(ARGV[2]) + tonumber(ARGV[3]))
    c = c + 1
  end
end
if c > 0 then
  raise(KEYS[2 * n + 1], tonumber(ARGV[2]))
end
return c
