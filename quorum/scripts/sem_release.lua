-- Release the permits a token holds on a semaphore: sem the limit key,
-- record the token's record; token, then optionally channel the release
-- channel and id a release id: a release announces how many permits it
-- freed as "<count>:<id>", so that each proxy wakes only that many
-- waiters, once whichever masters tell it. Rollbacks of failed tries
-- announce the same way, with an id of their own, where they free slots.
-- Deletes the limit key once no slot is held, unless RSEMSET set it (it
-- then lives its keep: see sem_set). Slots up to the span (sem_span) are
-- the semaphore's. Returns {the record (the
-- token's slot list), the ms its slots had left} if every slot in it was
-- the token's up to the release, else {0, 0}.
local sem, record = KEYS[1], KEYS[2]
local token, channel, id = ARGV[1], ARGV[2], ARGV[3]

local stored = redis.call('GET', sem)
local rec = redis.call('GET', record)
redis.call('DEL', record)
if not stored then
  return {0, 0}
end
local base = sem .. ':s:'
local limit = tonumber(stored)
local span, keep = sem_span(sem, limit)
local mine, live, above, freed = {}, 0, 0, 0
local left = 0
local slot = slots_read(base, span)
for i = 0, span - 1 do
  local v = slot[i + 1]
  if v == token then
    left = math.max(left, redis.call('PTTL', base .. i))
    redis.call('DEL', base .. i)
    mine[#mine + 1] = tostring(i)
    if i >= limit then
      freed = freed + 1
    end
  elseif v then
    live = live + 1
    if i >= limit then
      above = above + 1
    end
  end
end
if live == 0 and keep == 0 then
  redis.call('DEL', sem)
end
if #mine > 0 and channel then
  -- The last permit held above a lowered limit lets every free one
  -- below it be taken: announce them all.
  local n = #mine
  if freed > 0 and above == 0 then
    n = math.max(n, limit - live)
  end
  redis.call('PUBLISH', channel, n .. ':' .. id)
end
if rec and rec == table.concat(mine, ',') then
  return {rec, left}
end
return {0, 0}
