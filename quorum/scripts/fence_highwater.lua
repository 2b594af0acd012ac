-- The master's fence high-water mark: the highest fence it ever stored.
-- KEYS[1] the fence sequence, KEYS[2] the fence floor of the layout before
-- 1.1 (read so that an upgrade never lowers it).
-- Returns max(sequence, old floor) as an integer.
local s = tonumber(redis.call('GET', KEYS[1]) or '0')
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
if f > s then
  s = f
end
return s
