-- Raise a restarted master's fence sequence (seq), and its lagging bound
-- (lag) if it has one, to at least floor; given mark, then set the
-- master's intact mark (no expiry), which says that its data has been
-- continuous since proxies met it (quorum/doc.go, "Restarted masters").
-- Returns 1.
local seq, lag, mark = KEYS[1], KEYS[2], KEYS[3]
local floor = ARGV[1]

local v = tonumber(floor)
if v > tonumber(redis.call('GET', seq) or '0') then
  redis.call('SET', seq, floor)
end
local bound = redis.call('GET', lag)
if bound and v > tonumber(bound) then
  redis.call('SET', lag, floor, 'KEEPTTL')
end
if mark then
  redis.call('SET', mark, '1')
end
return 1
