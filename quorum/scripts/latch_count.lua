-- The arrivals a latch still misses. KEYS[1] its count, KEYS[2] its
-- arrivals. Returns the number, or -1 if there is no such latch.
local c = redis.call('GET', KEYS[1])
if not c then
  return -1
end
return math.max(tonumber(c) - redis.call('SCARD', KEYS[2]), 0)
