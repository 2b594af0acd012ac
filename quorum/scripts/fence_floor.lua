-- Raise a restarted master's fence sequence, and its lagging bound if it
-- has one, to at least ARGV[1]. KEYS[1] the sequence, KEYS[2] the lagging
-- bound. Returns 1.
local v = tonumber(ARGV[1])
if v > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1])
end
local lag = redis.call('GET', KEYS[2])
if lag and v > tonumber(lag) then
  redis.call('SET', KEYS[2], ARGV[1], 'KEEPTTL')
end
return 1
