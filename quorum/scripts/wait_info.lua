-- How many calls wait for a resource on this master, and where a fair
-- waiter stands: waiting its waiting set (wait_mark), queue and deadlines
-- its fair queue (fair_enqueue; may be absent), id a queued waiter's id
-- ("": none asked).
-- Returns {waiting, queued, ahead...}: waiting the calls whose wait has
-- not ended, queued 1 when id is in the queue with a live deadline, then
-- the ids queued ahead of it whose deadline has not passed.
local waiting, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local id = ARGV[1]

local now = time_ms()
local out = {redis.call('ZCOUNT', waiting, '(' .. now, '+inf'), 0}
if id == '' or not deadlines then
  return out
end
local ticket = redis.call('ZSCORE', queue, id)
local dl = redis.call('ZSCORE', deadlines, id)
if not ticket or not dl or tonumber(dl) <= now then
  return out
end
out[2] = 1
for _, m in ipairs(redis.call('ZRANGEBYSCORE', queue, '-inf', '(' .. ticket)) do
  local d = redis.call('ZSCORE', deadlines, m)
  if d and tonumber(d) > now then
    out[#out + 1] = m
  end
end
return out
