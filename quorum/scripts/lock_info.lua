-- What one master holds for a resource. KEYS[1] the lock key, KEYS[2] its
-- fence key, KEYS[3] its readers. Returns {holder, pttl, fence, readers...}:
-- holder is the lock key's value ("" for readers, false when free), pttl
-- its remaining ttl in ms (-2 when free), fence the fence key's value (0
-- when none), then the tokens of the live readers.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
local out = {v, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
if v == '' then
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf')) do
    out[#out + 1] = r
  end
end
return out
