-- What one master holds for a resource: lock its lock key, fence its
-- fence key, readers its readers, holds its re-entrant holds. Returns
-- {holder, pttl, fence, readers or holds...}: holder is the lock key's
-- value ("" for readers, false when free), pttl its remaining ttl in ms
-- (-2 when free), fence the fence of a re-entrant lock's holds (0 for any
-- other: no fence is kept per resource, docs/design/fencing.md), then the
-- tokens of the live readers, or each of a writer's hold ids and its
-- order.
local lock, fence, readers, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local v = redis.call('GET', lock)
local out = {v, redis.call('PTTL', lock), 0}
if v == '' then
  for _, r in ipairs(redis.call('ZRANGEBYSCORE', readers, '(' .. time_ms(), '+inf')) do
    out[#out + 1] = r
  end
elseif v then
  for _, h in ipairs(redis.call('ZRANGE', holds, 0, -1, 'WITHSCORES')) do
    out[#out + 1] = h
  end
  if #out > 3 then
    out[3] = tonumber(redis.call('GET', fence) or '0')
  end
end
return out
