-- Break a resource's lock (RLOCKBREAK, an operator's): lock the lock key,
-- fence its fence key, readers its readers, owner its drop-in owner key,
-- lag the master's lagging bound, broken its break mark, holds its
-- re-entrant holds; channel the
-- release channel, life the least time (ms) the mark lives.
-- Deletes the lock key whatever it holds (a writer's token, or "" for
-- readers) with its fence key, folded into the lagging bound first so that
-- the next grant's fence is greater (see drop), the readers and the owner
-- key; then adds the broken tokens (the writer's, every reader's) to the
-- break mark, a set living at least life ms and as long as the lock key
-- had left, so that an extension of a broken lease never takes it again
-- where it is gone (lock_reenrol, rw_reenrol); announces the release.
-- Returns {1, what the lock key held} if it existed, else {0, ''}.
local lock, fence, readers, owner, lag, broken = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local holds = KEYS[7]
local channel, life = ARGV[1], ARGV[2]

local v = redis.call('GET', lock)
if not v then
  return {0, ''}
end
local keep = math.max(tonumber(life), redis.call('PTTL', lock), redis.call('PTTL', broken))
local tokens = redis.call('ZRANGE', readers, 0, -1)
if v ~= '' then
  tokens[#tokens + 1] = v
end
drop(lock, fence, lag)
redis.call('DEL', readers, owner, holds)
if #tokens > 0 then
  redis.call('SADD', broken, unpack(tokens))
  redis.call('PEXPIRE', broken, keep)
end
redis.call('PUBLISH', channel, '1')
return {1, v}
