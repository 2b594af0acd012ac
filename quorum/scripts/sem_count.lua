-- The holders of a semaphore's slots. KEYS[1] the limit key.
-- Returns {limit, holder of slot 0, holder of slot 1, ...}, each holder a
-- token or "" for a free slot; {} when the semaphore is not in use here.
local stored = redis.call('GET', KEYS[1])
if not stored then
  return {}
end
local base = KEYS[1] .. ':s:'
local out = {tonumber(stored)}
for i = 0, tonumber(stored) - 1 do
  out[#out + 1] = redis.call('GET', base .. i) or ''
end
return out
