-- Roll back (or give back) what one lock_acquire_nx attempt set: each lock
-- key whose owner key holds the attempt's nonce and that still holds the
-- value is deleted with its fence key (the fence folded into the lagging
-- bound first, as lock_release does); a key another client set, even with
-- the same value, is left alone. No announcement: nobody saw this grant.
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys, KEYS[2n+1] the master's
-- lagging bound, KEYS[2n+2..3n+1] the owner keys.
-- ARGV[1] value, ARGV[2] the attempt's owner nonce.
-- Returns how many lock keys it deleted.
local n = math.floor((#KEYS - 1) / 3)
local lag = redis.call('GET', KEYS[2 * n + 1])
local c = 0
for i = 1, n do
  local o = KEYS[2 * n + 1 + i]
  if redis.call('GET', o) == ARGV[2] then
    redis.call('DEL', o)
    if redis.call('GET', KEYS[i]) == ARGV[1] then
      redis.call('DEL', KEYS[i])
      local f = redis.call('GET', KEYS[n + i])
      if f then
        if lag and tonumber(f) > tonumber(lag) then
          lag = f
          redis.call('SET', KEYS[2 * n + 1], f, 'KEEPTTL')
        end
        redis.call('DEL', KEYS[n + i])
      end
      c = c + 1
    end
  end
end
return c
