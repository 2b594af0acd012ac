-- Roll back (or give back) what one lock_acquire_nx attempt set: each lock
-- key whose owner key holds the attempt's nonce and that still holds the
-- value is deleted with its fence key (the fence folded into the lagging
-- bound first, see drop); a key another client set, even with the same
-- value, is left alone. No announcement: nobody saw this grant.
-- lock the lock keys, fence their fence keys, lag the master's lagging
-- bound, owner the owner keys; value, nonce the attempt's owner nonce.
-- Returns how many lock keys it deleted.
local n = math.floor((#KEYS - 1) / 3)
local lock, fence, owner = 0, n, 2 * n + 1
local lag = KEYS[2 * n + 1]
local value, nonce = ARGV[1], ARGV[2]

local c = 0
for i = 1, n do
  local o = KEYS[owner + i]
  if redis.call('GET', o) == nonce then
    redis.call('DEL', o)
    if redis.call('GET', KEYS[lock + i]) == value then
      drop(KEYS[lock + i], KEYS[fence + i], lag)
      c = c + 1
    end
  end
end
return c
