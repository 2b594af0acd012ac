-- How long the longest-lived grant this master holds still lives, in ms
-- (0 when none): the PTTL of its lease high-water mark. KEYS[1] the mark.
return math.max(redis.call('PTTL', KEYS[1]), 0)
