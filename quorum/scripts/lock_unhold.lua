-- Take one hold of a re-entrant lock away (quorum/doc.go, "Re-entrant
-- locks"): lock its lock key, fence its fence key, lag the master's
-- lagging bound, holds its holds, readers its readers; token the holder,
-- hold the hold id, last "1" when it is the last hold a quorum counts,
-- then optionally the release channel.
-- With last "0" the hold leaves the holds, and the lock is released only
-- if that left none (the rollback of a try that took the lock here).
-- With last "1" the lock is released whatever holds are left (holds that
-- a minority of masters record never counted), and announced on the
-- channel; a writer that downgraded leaves the lock key to its live
-- readers, as lock_release does (read_hold). Returns {1 if the token held
-- the lock here, its ttl left in ms}.
local lock, fence, lag, holds, readers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, hold, last, channel = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local removed = redis.call('ZREM', holds, hold)
if redis.call('GET', lock) ~= token then
  return {0, 0}
end
local left = redis.call('PTTL', lock)
if last == '1' or (removed == 1 and redis.call('EXISTS', holds) == 0) then
  drop(lock, fence, lag)
  redis.call('DEL', holds)
  local keep = readers_left(readers)
  if keep then
    redis.call('SET', lock, '', 'PX', keep)
  end
  if channel then
    redis.call('PUBLISH', channel, '1')
  end
end
return {1, left}
