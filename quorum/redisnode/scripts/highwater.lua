-- KEYS[1] the master's fence floor, KEYS[2] its high-water mark.
-- Returns max(floor, high-water mark) as a string.
local f = tonumber(redis.call('GET', KEYS[1]) or '0')
local h = tonumber(redis.call('GET', KEYS[2]) or '0')
if f > h then
  h = f
end
return string.format('%d', h)
