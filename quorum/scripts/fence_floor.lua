-- Raise a restarted master's fence sequence (seq), and its lagging bound
-- (lag) if it has one, to at least floor. Returns 1.
local seq, lag = KEYS[1], KEYS[2]
local floor = ARGV[1]

local v = tonumber(floor)
if v > tonumber(redis.call('GET', seq) or '0') then
  redis.call('SET', seq, floor)
end
local bound = redis.call('GET', lag)
if bound and v > tonumber(bound) then
  redis.call('SET', lag, floor, 'KEEPTTL')
end
return 1
