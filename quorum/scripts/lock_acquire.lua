-- Acquire every lock key, all or none, and give each its fence.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] the resources' fence keys, parallel to the lock keys
-- KEYS[2n+1]    the master's lagging bound (expires after ARGV[4] ms)
-- KEYS[2n+2]    the master's fence sequence (high-water mark, no expiry)
-- KEYS[2n+3]    the master's lease high-water mark (see raise)
-- KEYS[2n+4..3n+3] the resources' writer-waiting marks (read-write locks)
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the proxy's proposed fence,
-- ARGV[4] the lag period in ms, ARGV[5] how long a refused writer that
-- waits marks the resource that refused it (ms; 0: it does not wait), so
-- that new readers queue behind it, ARGV[6] the call's mark; a grant
-- deletes the call's own marks.
-- A writer that waits (ARGV[5] > 0) also passes KEYS[3n+4..4n+3] the
-- resources' readers next and KEYS[4n+4..5n+3] their readers after
-- (sorted sets of waiting readers' ids by deadline): it is refused where
-- a free lock key has a live reader next, and its grant moves the readers
-- after into readers next (quorum/doc.go, "Read-write locks"). The fair
-- keys below then follow these.
-- A fair lock (one resource) adds KEYS[3n+4] its queue (a sorted set of
-- waiting tokens by ticket) and KEYS[3n+5] the waiters' deadlines (a
-- sorted set of tokens by the master's time in ms), ARGV[7] how long a
-- waiter stays queued without trying again (ms), ARGV[8] the waiter's
-- ticket (0: not queued) and ARGV[9] its id in the queue (one per call;
-- the lock token may change from try to try). Waiters whose deadline passed leave the queue
-- first; a queued token is (re)placed at its ticket with a new deadline,
-- whether or not the lock is free; then the lock is refused unless the
-- queue is empty or the token is its head, and the token leaves the queue
-- when it takes the lock. The queue expires 2 * ARGV[7] ms after its last
-- waiter's last try, and is deleted once empty.
-- When every lock key is free or already holds the token: sets them, gives
-- each resource the fence max(proposal, its fence key + 1, lag + 1), keeps
-- it in the fence key for ttl + lag ms, raises the sequence, and returns
-- {1, sequence, fence_1, ..., fence_n}. Else changes nothing and returns
-- {0, sequence}. See quorum/doc.go, "Fencing", for why this is monotonic.
-- When every lock key holds the token already, each resource keeps the
-- fence its key holds (the same grant, retried) instead of a new one.
-- A lock key holding "" is held by readers (no token is empty).
-- raise sets the master's lease high-water mark (the master's time in ms
-- at which the longest-lived grant it holds expires) to now + ttl if that
-- is later; it expires with that grant.
local function raise(key, ttl)
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if at > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, string.format('%d', at), 'PX', ttl)
  end
end
local fair = ARGV[7] ~= nil
local mark = tonumber(ARGV[5])
local per = 3
if mark > 0 then
  per = 5
end
local n = (#KEYS - 3) / per
if fair then
  n = (#KEYS - 5) / per
end
local seq = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
local q, qd
if fair then
  q, qd = KEYS[per * n + 4], KEYS[per * n + 5]
  local stale = tonumber(ARGV[7])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', qd, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', q, unpack(gone))
    redis.call('ZREM', qd, unpack(gone))
  end
  if tonumber(ARGV[8]) > 0 then
    redis.call('ZADD', q, ARGV[8], ARGV[9])
    redis.call('ZADD', qd, now + stale, ARGV[9])
    redis.call('PEXPIRE', q, 2 * stale)
    redis.call('PEXPIRE', qd, 2 * stale)
  end
end
local mine = true
local now
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v ~= ARGV[1] then
    mine = false
  end
  local taken = v and v ~= ARGV[1]
  if not v and mark > 0 then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    taken = redis.call('ZCOUNT', KEYS[3 * n + 3 + i], '(' .. now, '+inf') > 0
  end
  if taken then
    if mark > 0 then
      redis.call('SET', KEYS[2 * n + 3 + i], ARGV[6], 'PX', mark)
    end
    return {0, seq}
  end
end
if fair then
  local head = redis.call('ZRANGE', q, 0, 0)[1]
  for _ = 1, 100 do
    if not head or redis.call('ZSCORE', qd, head) then
      break
    end
    redis.call('ZREM', q, head)
    head = redis.call('ZRANGE', q, 0, 0)[1]
  end
  if head and head ~= ARGV[9] and not mine then
    return {0, seq}
  end
  redis.call('ZREM', q, ARGV[9])
  redis.call('ZREM', qd, ARGV[9])
  if redis.call('ZCARD', q) == 0 then
    redis.call('DEL', q, qd)
  end
end
local lag = redis.call('GET', KEYS[2 * n + 1])
if lag then
  lag = tonumber(lag)
else
  lag = seq
  redis.call('SET', KEYS[2 * n + 1], string.format('%d', seq), 'PX', ARGV[4])
end
local base = tonumber(ARGV[3])
if lag + 1 > base then
  base = lag + 1
end
for i = 1, n do
  local m = KEYS[2 * n + 3 + i]
  if ARGV[6] ~= '' and redis.call('GET', m) == ARGV[6] then
    redis.call('DEL', m)
  end
  if mark > 0 then
    local nx, af = KEYS[3 * n + 3 + i], KEYS[4 * n + 3 + i]
    local keep = redis.call('PTTL', af)
    if keep > 0 then
      keep = math.max(keep, redis.call('PTTL', nx))
      redis.call('ZUNIONSTORE', nx, 2, nx, af, 'AGGREGATE', 'MAX')
      redis.call('DEL', af)
      redis.call('PEXPIRE', nx, keep)
    end
  end
end
local keep = tonumber(ARGV[2]) + tonumber(ARGV[4])
local top = seq
local out = {1, 0}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local c = base
  local cur = redis.call('GET', KEYS[n + i])
  if mine and cur then
    -- The token holds every key already (a TOKEN retry): the same grant
    -- keeps its fence (quorum/doc.go, "Fencing").
    c = tonumber(cur)
  elseif cur and tonumber(cur) + 1 > c then
    c = tonumber(cur) + 1
  end
  redis.call('SET', KEYS[n + i], string.format('%d', c), 'PX', keep)
  if c > top then
    top = c
  end
  out[i + 2] = c
end
if top > seq then
  redis.call('SET', KEYS[2 * n + 2], string.format('%d', top))
end
raise(KEYS[2 * n + 3], tonumber(ARGV[2]))
out[2] = top
return out
