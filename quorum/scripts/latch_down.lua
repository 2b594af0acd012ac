-- Record one arrival at a latch: count its count, arrivals its arrivals;
-- token the arrival's token, channel the latch's channel. A token counts
-- once however often it arrives; arrivals beyond the count are not kept.
-- The arrivals expire with the latch. The arrival that opens the latch
-- announces it on the channel. Returns the arrivals still missing, or -1
-- if there is no such latch.
local count, arrivals = KEYS[1], KEYS[2]
local token, channel = ARGV[1], ARGV[2]

local c = redis.call('GET', count)
if not c then
  return -1
end
c = tonumber(c)
local n = redis.call('SCARD', arrivals)
if n < c and redis.call('SADD', arrivals, token) == 1 then
  n = n + 1
  local ttl = redis.call('PTTL', count)
  if ttl > 0 then
    redis.call('PEXPIRE', arrivals, ttl)
  end
  if n == c then
    redis.call('PUBLISH', channel, '1')
  end
end
return c - n
