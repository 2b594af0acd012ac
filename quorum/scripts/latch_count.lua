-- The arrivals a latch still misses: count its count, arrivals its
-- arrivals. Returns the number, or -1 if there is no such latch.
local count, arrivals = KEYS[1], KEYS[2]

local c = redis.call('GET', count)
if not c then
  return -1
end
return math.max(tonumber(c) - redis.call('SCARD', arrivals), 0)
