-- Write a grant's fence back, only while every lock key holds the token:
-- lock the lock keys, seq the master's fence sequence; token, then the
-- fences (one per lock key; a try gives all its resources one fence). Raises the sequence to
-- at least the highest of them (docs/design/fencing.md). Returns 1 if it
-- held, else 0 and changes nothing.
local n = #KEYS - 1
local lock = 0
local seq = KEYS[n + 1]
local token = ARGV[1]
local value = 1

for i = 1, n do
  if redis.call('GET', KEYS[lock + i]) ~= token then
    return 0
  end
end
local top = 0
for i = 1, n do
  top = math.max(top, tonumber(ARGV[value + i]))
end
if top > tonumber(redis.call('GET', seq) or '0') then
  redis.call('SET', seq, string.format('%d', top))
end
return 1
