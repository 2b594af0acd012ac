-- Acquire every lock key, all or none, and give each its fence.
-- KEYS[1..n]    lock keys
-- KEYS[n+1..2n] the resources' fence keys, parallel to the lock keys
-- KEYS[2n+1]    the master's lagging bound (expires after ARGV[4] ms)
-- KEYS[2n+2]    the master's fence sequence (high-water mark, no expiry)
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the proxy's proposed fence,
-- ARGV[4] the lag period in ms.
-- A fair lock (one resource) adds KEYS[2n+3] its queue (a sorted set of
-- waiting tokens by ticket) and KEYS[2n+4] the waiters' deadlines (a
-- sorted set of tokens by the master's time in ms), ARGV[5] how long a
-- waiter stays queued without trying again (ms) and ARGV[6] the token's
-- ticket (0: not queued). Waiters whose deadline passed leave the queue
-- first; a queued token is (re)placed at its ticket with a new deadline,
-- whether or not the lock is free; then the lock is refused unless the
-- queue is empty or the token is its head, and the token leaves the queue
-- when it takes the lock. The queue expires 2 * ARGV[5] ms after its last
-- waiter's last try, and is deleted once empty.
-- When every lock key is free or already holds the token: sets them, gives
-- each resource the fence max(proposal, its fence key + 1, lag + 1), keeps
-- it in the fence key for ttl + lag ms, raises the sequence, and returns
-- {1, sequence, fence_1, ..., fence_n}. Else changes nothing and returns
-- {0, sequence}. See quorum/doc.go, "Fencing", for why this is monotonic.
local fair = ARGV[5] ~= nil
local n = (#KEYS - 2) / 2
if fair then
  n = (#KEYS - 4) / 2
end
local seq = tonumber(redis.call('GET', KEYS[2 * n + 2]) or '0')
local q, qd
if fair then
  q, qd = KEYS[2 * n + 3], KEYS[2 * n + 4]
  local stale = tonumber(ARGV[5])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local gone = redis.call('ZRANGEBYSCORE', qd, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', q, unpack(gone))
    redis.call('ZREM', qd, unpack(gone))
  end
  if tonumber(ARGV[6]) > 0 then
    redis.call('ZADD', q, ARGV[6], ARGV[1])
    redis.call('ZADD', qd, now + stale, ARGV[1])
    redis.call('PEXPIRE', q, 2 * stale)
    redis.call('PEXPIRE', qd, 2 * stale)
  end
end
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then
    return {0, seq}
  end
end
if fair then
  local head = redis.call('ZRANGE', q, 0, 0)[1]
  if head and head ~= ARGV[1] then
    return {0, seq}
  end
  if head then
    redis.call('ZREM', q, ARGV[1])
    redis.call('ZREM', qd, ARGV[1])
    if redis.call('ZCARD', q) == 0 then
      redis.call('DEL', q, qd)
    end
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
local keep = tonumber(ARGV[2]) + tonumber(ARGV[4])
local top = seq
local out = {1, 0}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  local c = base
  local cur = redis.call('GET', KEYS[n + i])
  if cur and tonumber(cur) + 1 > c then
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
out[2] = top
return out
