-- Break a resource's lock (RLOCKBREAK, an operator's): lock the lock key,
-- fence its fence key, readers its readers, lag the master's lagging
-- bound, broken its break mark; channel the release channel.
-- Deletes the lock key whatever it holds (a writer's token, or "" for
-- readers) with its fence key, folded into the lagging bound first so that
-- the next grant's fence is greater (see drop), and the readers; then
-- keeps the break mark, holding what the lock key held, as long as the
-- lock key had left, so that an extension of the broken lease never takes
-- it again where it is gone (lock_reenrol, rw_reenrol); announces the
-- release. Returns {1, what the lock key held} if it existed, else {0, ''}.
local lock, fence, readers, lag, broken = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local channel = ARGV[1]

local v = redis.call('GET', lock)
if not v then
  return {0, ''}
end
local left = redis.call('PTTL', lock)
drop(lock, fence, lag, redis.call('GET', lag))
redis.call('DEL', readers)
if left > 0 then
  redis.call('SET', broken, v, 'PX', left)
end
redis.call('PUBLISH', channel, '1')
return {1, v}
