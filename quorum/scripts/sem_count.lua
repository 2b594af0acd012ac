-- The holders of a semaphore's slots: sem its limit key.
-- Returns {limit, holder of slot 0, holder of slot 1, ...} up to the span
-- (sem_span: slots above a lowered limit still count), each holder a
-- token or "" for a free slot; {} when the semaphore is not in use here.
local sem = KEYS[1]

local stored = redis.call('GET', sem)
if not stored then
  return {}
end
local base = sem .. ':s:'
local out = {tonumber(stored)}
local span = sem_span(sem, tonumber(stored))
local slot = slots_read(base, span)
for i = 0, span - 1 do
  out[#out + 1] = slot[i + 1] or ''
end
return out
