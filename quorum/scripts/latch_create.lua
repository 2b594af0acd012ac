-- Create a count-down latch: count its count (a string, expiring with the
-- latch), arrivals its arrivals (a set of tokens); want the count, ttl in
-- ms. Returns {1, 0} if created, {0, 0} if it exists with that count,
-- {-1, count} if it exists with another count.
local count, arrivals = KEYS[1], KEYS[2]
local want, ttl = ARGV[1], ARGV[2]

local c = redis.call('GET', count)
if c then
  if c ~= want then
    return {-1, tonumber(c)}
  end
  return {0, 0}
end
redis.call('DEL', arrivals)
redis.call('SET', count, want, 'PX', ttl)
return {1, 0}
