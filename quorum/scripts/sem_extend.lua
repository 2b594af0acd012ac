-- Reset the ttl of the permits a token holds on a semaphore.
-- KEYS[1] the limit key, KEYS[2] the token's record, KEYS[3] the
-- master's lease high-water mark. ARGV[1] token,
-- ARGV[2] ttl ms.
-- Only if every slot of the record is still the token's: extends them,
-- the record, and the limit key (which outlives every slot), and returns
-- the record (the slot list); else 0 and changes nothing.
-- raise sets the master's lease high-water mark (the master's time in ms
-- at which the longest-lived grant it holds expires) to now + ttl if that
-- is later; it expires with that grant.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local stored = redis.call('GET', KEYS[1])
local rec = redis.call('GET', KEYS[2])
if not stored or not rec then
  return 0
end
local base = KEYS[1] .. ':s:'
local slots = {}
for s in string.gmatch(rec, '%d+') do
  if redis.call('GET', base .. s) ~= ARGV[1] then
    return 0
  end
  slots[#slots + 1] = s
end
for _, s in ipairs(slots) do
  redis.call('PEXPIRE', base .. s, ARGV[2])
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
raise(KEYS[3], tonumber(ARGV[2]))
return rec
