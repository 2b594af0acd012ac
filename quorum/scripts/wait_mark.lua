-- Count a waiting call in, or out of, the waiting sets of what it waits
-- for (quorum/doc.go, "Waiters"): waiting each set, one per resource; id
-- the call, wait how long it may still wait in ms (0: it left).
-- Members are the waiting calls' ids scored by the master's time at which
-- their wait ends; a set lives as long as its longest wait, drops the
-- ended waits as calls join it, and is gone with its last member.
local waiting = 0
local id, wait = ARGV[1], ARGV[2]

local now, wait = time_ms(), tonumber(wait)
for i = 1, #KEYS - waiting do
  local k = KEYS[waiting + i]
  if wait > 0 then
    redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
    redis.call('ZADD', k, now + wait, id)
    if redis.call('PTTL', k) < wait then
      redis.call('PEXPIRE', k, wait)
    end
  else
    redis.call('ZREM', k, id)
  end
end
return 1
