-- Reset the ttl of the permits a token holds on a semaphore: sem the
-- limit key, record the token's record, lease the master's lease
-- high-water mark, gone the token's release tombstone (see tombstone);
-- token, ttl in ms, live "1" when the lease is known to
-- be live, limit its limit, then (live) slot the lease's slots, ascending.
-- Not live: only if every slot of the record is still the token's, extends
-- them, the record, and the limit key (which outlives every slot), and
-- returns the record (the slot list); else 0 and changes nothing.
-- Live: only if each of the lease's slots is the token's or free (and the
-- limit is the lease's) and the token did not release them here, holds
-- exactly them again (the token's other
-- slots in its record are let go), records them, keeps the limit key, and
-- returns the slot list; else 0 and changes nothing (quorum/doc.go,
-- "Extensions re-enrol masters").
local sem, record, lease, gone = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl, live, limit = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local slot = 4

local stored = redis.call('GET', sem)
local rec = redis.call('GET', record)
local base = sem .. ':s:'
if live == '1' and #ARGV - slot > 0 and redis.call('EXISTS', gone) == 0 then
  local size = tonumber(limit)
  if stored and tonumber(stored) ~= size then
    return 0
  end
  local want, list = {}, {}
  for j = 1, #ARGV - slot do
    local s = ARGV[slot + j]
    if tonumber(s) >= size then
      return 0
    end
    local v = redis.call('GET', base .. s)
    if v and v ~= token then
      return 0
    end
    want[s] = true
    list[#list + 1] = s
  end
  if rec then
    for s in string.gmatch(rec, '%d+') do
      if not want[s] and redis.call('GET', base .. s) == token then
        redis.call('DEL', base .. s)
      end
    end
  end
  for _, s in ipairs(list) do
    redis.call('SET', base .. s, token, 'PX', ttl)
  end
  rec = table.concat(list, ',')
  redis.call('SET', record, rec, 'PX', ttl)
  if not stored then
    redis.call('SET', sem, limit, 'PX', ttl)
  elseif redis.call('PTTL', sem) < tonumber(ttl) then
    redis.call('PEXPIRE', sem, ttl)
  end
  raise(lease, tonumber(ttl))
  return rec
end
if not stored or not rec then
  return 0
end
local slots = {}
for s in string.gmatch(rec, '%d+') do
  if redis.call('GET', base .. s) ~= token then
    return 0
  end
  slots[#slots + 1] = s
end
for _, s in ipairs(slots) do
  redis.call('PEXPIRE', base .. s, ttl)
end
redis.call('PEXPIRE', record, ttl)
if redis.call('PTTL', sem) < tonumber(ttl) then
  redis.call('PEXPIRE', sem, ttl)
end
raise(lease, tonumber(ttl))
return rec
