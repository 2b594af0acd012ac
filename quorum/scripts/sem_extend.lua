-- Reset the ttl of the permits a token holds on a semaphore: sem the
-- limit key, record the token's record, lease the master's lease
-- high-water mark; token, ttl in ms.
-- Only if every slot of the record is still the token's: extends them,
-- the record, and the limit key (which outlives every slot), and returns
-- the record (the slot list) and the limit as "<slots>/<limit>"; else 0
-- and changes nothing.
local sem, record, lease = KEYS[1], KEYS[2], KEYS[3]
local token, ttl = ARGV[1], ARGV[2]

local stored = redis.call('GET', sem)
local rec = redis.call('GET', record)
if not stored or not rec then
  return 0
end
local base = sem .. ':s:'
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
local _, keep = sem_span(sem, 0)
sem_live(sem, stored, ttl, keep)
raise(lease, tonumber(ttl))
return rec .. '/' .. stored
