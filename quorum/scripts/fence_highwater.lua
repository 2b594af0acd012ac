-- The master's fence high-water mark: the highest fence it ever stored.
-- seq the fence sequence, old the fence floor of the layout before 1.1
-- (read so that an upgrade never lowers it).
-- Returns max(sequence, old floor) as an integer.
local seq, old = KEYS[1], KEYS[2]

local s = tonumber(redis.call('GET', seq) or '0')
local f = tonumber(redis.call('GET', old) or '0')
return math.max(s, f)
