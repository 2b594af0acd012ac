-- lock_acquire_wait for a fair lock (one resource): keys and arguments as
-- lock_acquire_wait's (markttl 0 and markid "" when the call does not
-- wait: no mark, readers next not consulted), then queue its queue (a
-- sorted set of waiting ids by ticket) and deadlines the waiters'
-- deadlines (ids by the master's time in ms); stale how long a waiter
-- stays queued without trying again (ms), ticket the waiter's ticket (0:
-- not queued) and id its id in the queue (one per call; the lock token may
-- change from try to try).
-- Waiters whose deadline passed leave the queue first; a queued id is
-- (re)placed at its ticket with a new deadline, whether or not the lock is
-- free; then the lock is refused unless the queue is empty or the id is
-- its head (or the token holds the lock already). A granted id stays
-- queued, at the head: the call takes it out (fair_dequeue) once a quorum
-- granted it, so that a grant the call rolls back (its answers came too
-- late, or too few) leaves the waiter its place rather than handing it to
-- the one behind. The queue expires 2 * stale ms after its last waiter's
-- last try, and is deleted once empty (fair_dequeue).
local n = (#KEYS - 5) / 5
local lock, fence, mark, rnext, rafter = 0, n, 2 * n + 3, 3 * n + 3, 4 * n + 3
local lag, seq, lease = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3]
local queue, deadlines = KEYS[5 * n + 4], KEYS[5 * n + 5]
local token, ttl, proposal, lagms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local markttl, markid, stale, ticket, id = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]

local high = tonumber(redis.call('GET', seq) or '0')
local now = time_ms()
fair_clean(queue, deadlines, now)
if tonumber(ticket) > 0 then
  fair_place(queue, deadlines, ticket, id, now, tonumber(stale))
end
local refused, mine = wait_check(lock, mark, rnext, n, token, markid, tonumber(markttl))
if refused then
  return {0, high}
end
local head = redis.call('ZRANGE', queue, 0, 0)[1]
for _ = 1, 100 do
  if not head or redis.call('ZSCORE', deadlines, head) then
    break
  end
  redis.call('ZREM', queue, head)
  head = redis.call('ZRANGE', queue, 0, 0)[1]
end
if head and head ~= id and not mine then
  return {0, high}
end
promote(mark, rnext, rafter, n, markid, tonumber(markttl))
return grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
