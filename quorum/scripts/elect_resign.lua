-- Resign (and the rollback of a campaign): release the election's lock key
-- where it holds the token, as lock_release does (its fence folded into
-- the lagging bound), and delete the token's advertisement. lock the lock
-- keys and fence their fence keys (one each for an election), lag the
-- master's lagging bound, advert the advertisement; token, then
-- optionally the change channels (one per lock key: a resignation
-- announces itself, "1", so that campaigners and observers on any proxy
-- wake up; a rollback does not). Returns how many lock keys it deleted.
local n = (#KEYS - 2) / 2
local lock, fence = 0, n
local lag, advert = KEYS[2 * n + 1], KEYS[2 * n + 2]
local token = ARGV[1]
local channel = 1

local c = 0
for i = 1, n do
  if redis.call('GET', KEYS[lock + i]) == token then
    drop(KEYS[lock + i], KEYS[fence + i], lag)
    if ARGV[channel + i] then
      redis.call('PUBLISH', ARGV[channel + i], '1')
    end
    c = c + 1
  end
end
if redis.call('HGET', advert, 'token') == token then
  redis.call('DEL', advert)
end
return c
