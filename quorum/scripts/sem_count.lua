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
for i = 0, sem_span(sem, tonumber(stored)) - 1 do
  out[#out + 1] = redis.call('GET', base .. i) or ''
end
return out
