-- Release each lock key that holds the token, with its fence key: lock
-- the lock keys, fence their fence keys, readers their readers, holds
-- their re-entrant holds (quorum/doc.go, "Re-entrant locks"), lag the
-- master's lagging bound, and for one resource optionally queue its fair
-- queue; token, then optionally the release channels (one per lock key:
-- releases announce themselves so that waiters on any proxy wake up;
-- rollbacks of a failed try do not, so that they do not wake every
-- waiter, over and over).
-- The announcement is "1", or "h:<id>" when the resource has fair
-- waiters: the head of the queue is the one fair waiter to wake.
-- A deleted fence key's value is folded into the lagging bound first (see
-- drop). A writer that downgraded (its token also holds the read lock,
-- see read_hold) leaves the lock key to its live readers: it then holds
-- "" as long as they live. Returns {how many lock keys it released, the
-- longest ttl in ms they had left} (a release that cannot decide asks
-- again until then: quorum/confirm.go). One resource whose lock the token
-- holds with holds recorded is not released: the answer is {-1, its ttl
-- left in ms, each hold id and its order}, and the proxy takes one hold away
-- (lock_unhold). A release of several resources drops their holds.
local n = math.floor((#KEYS - 1) / 4)
local lock, fence, readers, holds = 0, n, 2 * n, 3 * n
local lag, queue = KEYS[4 * n + 1], KEYS[4 * n + 2]
local token = ARGV[1]
local channel = 1

local c, left = 0, 0
for i = 1, n do
  if redis.call('GET', KEYS[lock + i]) == token then
    -- One EXISTS tells a plain lock (neither holds nor readers) apart.
    local others = n > 1 or redis.call('EXISTS', KEYS[holds + i], KEYS[readers + i]) > 0
    if n == 1 and others and redis.call('EXISTS', KEYS[holds + i]) == 1 then
      local out = {-1, redis.call('PTTL', KEYS[lock + i])}
      for _, h in ipairs(redis.call('ZRANGE', KEYS[holds + i], 0, -1, 'WITHSCORES')) do
        out[#out + 1] = h
      end
      return out
    end
    if n > 1 then
      redis.call('DEL', KEYS[holds + i])
    end
    left = math.max(left, redis.call('PTTL', KEYS[lock + i]))
    drop(KEYS[lock + i], KEYS[fence + i], lag)
    local keep = others and readers_left(KEYS[readers + i])
    if keep then
      redis.call('SET', KEYS[lock + i], '', 'PX', keep)
    end
    if ARGV[channel + i] then
      local msg = '1'
      if queue then
        local head = redis.call('ZRANGE', queue, 0, 0)[1]
        if head then
          msg = 'h:' .. head
        end
      end
      redis.call('PUBLISH', ARGV[channel + i], msg)
    end
    c = c + 1
  end
end
return {c, left}
