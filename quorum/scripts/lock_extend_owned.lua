-- lock_extend for drop-in mode's locks: reset the ttl of each lock key that
-- holds the token, of its fence key, and of its owner key when it has one
-- (an owner nonce lives as long as its lock, so that a delete can tell the
-- grant from a later one with the same value; see lock_delete_exact).
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys, KEYS[2n+1] the master's
-- lease high-water mark, KEYS[2n+2..3n+1] the owner keys. ARGV[1] token,
-- ARGV[2] ttl in ms, ARGV[3] the lag period in ms.
-- Returns how many lock keys it extended.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local n = (#KEYS - 1) / 3
local c = 0
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('PEXPIRE', KEYS[n + i], tonumber(ARGV[2]) + tonumber(ARGV[3]))
    redis.call('PEXPIRE', KEYS[2 * n + 1 + i], ARGV[2])
    c = c + 1
  end
end
if c > 0 then
  raise(KEYS[2 * n + 1], tonumber(ARGV[2]))
end
return c
