-- Delete lock keys whatever token they hold (drop-in DEL / UNLINK), with
-- their fence keys. KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys,
-- KEYS[2n+1] the master's lagging bound. ARGV[1..n] the release channels.
-- As lock_release: a deleted fence key's value is folded into the lagging
-- bound first, and the deletion is announced. Returns, per lock key, 1 if
-- it existed, else 0.
local n = (#KEYS - 1) / 2
local lag = redis.call('GET', KEYS[2 * n + 1])
local out = {}
for i = 1, n do
  out[i] = 0
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('DEL', KEYS[i])
    local f = redis.call('GET', KEYS[n + i])
    if f then
      if lag and tonumber(f) > tonumber(lag) then
        lag = f
        redis.call('SET', KEYS[2 * n + 1], f, 'KEEPTTL')
      end
      redis.call('DEL', KEYS[n + i])
    end
    if ARGV[i] then
      redis.call('PUBLISH', ARGV[i], '1')
    end
    out[i] = 1
  end
end
return out
