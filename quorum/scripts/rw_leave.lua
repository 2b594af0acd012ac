-- A waiting reader gives up: rnext readers next, rafter readers after,
-- lock the lock key; id the call's id, channel the release channel. It
-- leaves both sets (deleted once empty); if it was the last live reader
-- next and the lock key is free, waiting writers may go now: the release
-- channel says so. Returns 1 if it was in either set.
local rnext, rafter, lock = KEYS[1], KEYS[2], KEYS[3]
local id, channel = ARGV[1], ARGV[2]

local now = time_ms()
local was = redis.call('ZSCORE', rnext, id)
local out = math.max(zleave(rnext, id), zleave(rafter, id))
if was and tonumber(was) > now and redis.call('ZCOUNT', rnext, '(' .. now, '+inf') == 0
    and redis.call('EXISTS', lock) == 0 then
  redis.call('PUBLISH', channel, '1')
end
return out
