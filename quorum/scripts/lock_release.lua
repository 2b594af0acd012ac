-- Release each lock key that holds the token: lock the lock keys, waiting
-- their waiting sets (docs/design/waiters.md), readers their readers,
-- holds their re-entrant holds (docs/design/reentrant.md), and for one
-- resource optionally queue its fair queue; token, then optionally the
-- release channels (one per lock key: a release announces
-- itself when a waiter may exist, so that waiters on any proxy wake up;
-- rollbacks of a failed try never do, so that they do not wake every
-- waiter, over and over; a grant given back because nobody will use it
-- does, see lockSet.giveBack).
-- A release publishes only where the resource's waiting set or its fair
-- queue exists: a waiter registers there before the try it sleeps after
-- (docs/design/fencing.md, "Waiters never miss the release they wait
-- for"). The announcement is "1", or "h:<id>" when the resource has fair
-- waiters: the head of the queue is the one fair waiter to wake.
-- Nothing else is folded or deleted: the sequence is per master, and what
-- an older proxy left beside the lock expires on its own.
-- A plain lock costs three calls: PEXPIRETIME and GETDEL of its key, and
-- one EXISTS of what else it may have. A writer that downgraded (its
-- token also holds the read lock, see read_hold) leaves the lock key to
-- its live readers: it then holds "" as long as they live. Returns {how
-- many lock keys it released, 0, when the last of them would have expired
-- (ms on the master's clock, 0 for none)}: a release that cannot decide
-- asks again until then (quorum/confirm.go, releaseUntil, which reads the
-- master's clock for it).
-- One resource whose lock the token holds with holds recorded is not
-- released: the answer is {-1, its ttl left in ms, each hold id and its
-- order}, and the proxy takes one hold away (lock_unhold). A release of
-- several resources drops their holds.
local n = math.floor(#KEYS / 4)
local lock, waiting, readers, holds = 0, n, 2 * n, 3 * n
local queue = KEYS[4 * n + 1]
local token = ARGV[1]
local channel = 1

local c, last = 0, 0
for i = 1, n do
  local k = KEYS[lock + i]
  -- The key's expiry (ms on the master's clock; -2: no key) read first,
  -- so that GETDEL can take it in the same call as its value, and a key
  -- that is not the token's is put back exactly as it was (PXAT: the
  -- master keeps expiries in whole ms, so nothing is shortened).
  local at = redis.call('PEXPIRETIME', k)
  local v = false
  if at ~= -2 then
    v = redis.call('GETDEL', k)
    if v ~= token then
      if at > 0 then
        redis.call('SET', k, v, 'PXAT', at)
      else
        redis.call('SET', k, v)
      end
    end
  end
  if v == token then
    local probe = {KEYS[holds + i], KEYS[readers + i], KEYS[waiting + i]}
    if queue then
      probe[4] = queue
    end
    local others = redis.call('EXISTS', unpack(probe)) > 0
    if others and n == 1 and redis.call('EXISTS', KEYS[holds + i]) == 1 then
      -- A re-entrant lock with holds: not released here.
      if at > 0 then
        redis.call('SET', k, token, 'PXAT', at)
      else
        redis.call('SET', k, token)
      end
      local out = {-1, redis.call('PTTL', k)}
      for _, h in ipairs(redis.call('ZRANGE', KEYS[holds + i], 0, -1, 'WITHSCORES')) do
        out[#out + 1] = h
      end
      return out
    end
    last = math.max(last, at)
    if others then
      if n > 1 then
        redis.call('DEL', KEYS[holds + i])
      end
      local keep = readers_left(KEYS[readers + i])
      if keep then
        redis.call('SET', k, '', 'PX', keep)
      end
      if ARGV[channel + i] then
        local msg = nil
        if queue then
          local head = redis.call('ZRANGE', queue, 0, 0)[1]
          if head then
            msg = 'h:' .. head
          end
        end
        if not msg and redis.call('EXISTS', KEYS[waiting + i]) == 1 then
          msg = '1'
        end
        if msg then
          redis.call('PUBLISH', ARGV[channel + i], msg)
        end
      end
    end
    c = c + 1
  end
end
return {c, 0, last}
