-- How long the longest-lived grant this master holds still lives, in ms
-- (0 when none): the PTTL of its lease high-water mark, lease.
local lease = KEYS[1]

return math.max(redis.call('PTTL', lease), 0)
