-- Release the permits a token holds on a semaphore.
-- KEYS[1] the limit key, KEYS[2] the token's record. ARGV[1] token,
-- ARGV[2] (optional) the release channel and ARGV[3] a release id: a
-- release announces how many permits it freed as "<count>:<id>", so that
-- each proxy wakes only that many waiters, once whichever masters tell it;
-- rollbacks of failed tries do not announce.
-- Deletes the limit key once no slot is held. Returns the record (the
-- token's slot list) if every slot in it was the token's up to the
-- release, else 0.
local stored = redis.call('GET', KEYS[1])
local rec = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[2])
if not stored then
  return 0
end
local base = KEYS[1] .. ':s:'
local mine, live = {}, 0
for i = 0, tonumber(stored) - 1 do
  local v = redis.call('GET', base .. i)
  if v == ARGV[1] then
    redis.call('DEL', base .. i)
    mine[#mine + 1] = tostring(i)
  elseif v then
    live = live + 1
  end
end
if live == 0 then
  redis.call('DEL', KEYS[1])
end
if #mine > 0 and ARGV[2] then
  redis.call('PUBLISH', ARGV[2], #mine .. ':' .. ARGV[3])
end
if rec and rec == table.concat(mine, ',') then
  return rec
end
return 0
