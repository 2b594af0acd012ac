-- A waiting reader gives up. KEYS[1] readers next, KEYS[2] readers after,
-- KEYS[3] the lock key. ARGV[1] the call's id, ARGV[2] the release
-- channel. It leaves both sets (deleted once empty); if it was the last
-- live reader next and the lock key is free, waiting writers may go now:
-- the release channel says so. Returns 1 if it was in either set.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local was = redis.call('ZSCORE', KEYS[1], ARGV[1])
local out = 0
for _, set in ipairs({KEYS[1], KEYS[2]}) do
  if redis.call('ZREM', set, ARGV[1]) == 1 then
    out = 1
    if redis.call('ZCARD', set) == 0 then
      redis.call('DEL', set)
    end
  end
end
if was and tonumber(was) > now and redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0
    and redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('PUBLISH', ARGV[2], '1')
end
return out
