-- Create a count-down latch. KEYS[1] its count (a string, expiring with
-- the latch), KEYS[2] its arrivals (a set of tokens). ARGV[1] count,
-- ARGV[2] ttl in ms. Returns {1, 0} if created, {0, 0} if it exists with
-- that count, {-1, count} if it exists with another count.
local c = redis.call('GET', KEYS[1])
if c then
  if c ~= ARGV[1] then
    return {-1, tonumber(c)}
  end
  return {0, 0}
end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}
