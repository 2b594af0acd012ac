-- Record one arrival at a latch. KEYS[1] its count, KEYS[2] its arrivals.
-- ARGV[1] the arrival's token, ARGV[2] the latch's channel. A token counts
-- once however often it arrives; arrivals beyond the count are not kept.
-- The arrivals expire with the latch. The arrival that opens the latch
-- announces it on the channel. Returns the arrivals still missing, or -1
-- if there is no such latch.
local c = redis.call('GET', KEYS[1])
if not c then
  return -1
end
c = tonumber(c)
local n = redis.call('SCARD', KEYS[2])
if n < c and redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  n = n + 1
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
  if n == c then
    redis.call('PUBLISH', ARGV[2], '1')
  end
end
return c - n
