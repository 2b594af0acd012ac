-- Delete lock keys whatever token they hold (drop-in DEL / UNLINK), with
-- their fence keys: lock the lock keys, fence their fence keys, lag the
-- master's lagging bound; channel the release channels (one per lock
-- key). As lock_release: a deleted fence key's value is folded into the
-- lagging bound first (see drop), and the deletion is announced. Returns,
-- per lock key, 1 if it existed, else 0.
local n = (#KEYS - 1) / 2
local lock, fence = 0, n
local lag = KEYS[2 * n + 1]
local channel = 0

local out = {}
for i = 1, n do
  out[i] = 0
  if redis.call('EXISTS', KEYS[lock + i]) == 1 then
    drop(KEYS[lock + i], KEYS[fence + i], lag)
    if ARGV[channel + i] then
      redis.call('PUBLISH', ARGV[channel + i], '1')
    end
    out[i] = 1
  end
end
return out
