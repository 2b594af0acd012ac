-- Campaign: take the election's lock key as lock_acquire does (the
-- election is a lock on one resource; its fence is the leader's term) and,
-- in the same step, advertise the leader's value. Keys as lock_acquire's
-- (lock and fence one each for an election), then advert the election's
-- advertisement (a hash: token, value; it lives as long as the lock key);
-- token, ttl, proposal and lagms as lock_acquire's, value the value to
-- advertise.
-- When every lock key is free or already holds the token: sets them, gives
-- each its fence (see grant) and advertises (token, value), returning {1,
-- sequence, fence_1, ..., fence_n}. Else changes nothing and returns {0,
-- sequence}.
local n = (#KEYS - 4) / 2
local lock, fence = 0, n
local lag, seq, lease, advert = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3], KEYS[2 * n + 4]
local token, ttl, proposal, lagms, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local high = tonumber(redis.call('GET', seq) or '0')
local mine = free_or_mine(lock, n, token)
if mine == nil then
  return {0, high}
end
local out = grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
redis.call('DEL', advert)
redis.call('HSET', advert, 'token', token, 'value', value)
redis.call('PEXPIRE', advert, math.max(tonumber(ttl), redis.call('PTTL', KEYS[lock + 1])))
return out
