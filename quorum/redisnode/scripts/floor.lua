-- Raise the master's fence floor and high-water mark to at least ARGV[1].
-- KEYS[1] floor, KEYS[2] high-water mark.
local v = tonumber(ARGV[1])
for i = 1, 2 do
  if v > tonumber(redis.call('GET', KEYS[i]) or '0') then
    redis.call('SET', KEYS[i], ARGV[1])
  end
end
return 1
