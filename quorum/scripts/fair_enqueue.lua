-- Queue a fair-lock waiter, or find its place if it is queued already.
-- KEYS[1] the queue (tokens by ticket), KEYS[2] the deadlines (tokens by
-- the master's time in ms), KEYS[3] the master's fence sequence, which
-- tickets share. ARGV[1] token, ARGV[2] the proxy's proposed ticket,
-- ARGV[3] how long a waiter stays queued without trying again, in ms.
-- The ticket is max(proposal, sequence + 1), or the token's ticket if it
-- is queued; the sequence is raised to it. Waiters whose deadline passed
-- leave the queue first. Returns {ticket, sequence}.
local stale = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('ZREM', KEYS[2], unpack(gone))
end
local seq = tonumber(redis.call('GET', KEYS[3]) or '0')
local ticket = redis.call('ZSCORE', KEYS[1], ARGV[1])
if ticket then
  ticket = tonumber(ticket)
else
  ticket = tonumber(ARGV[2])
  if seq + 1 > ticket then
    ticket = seq + 1
  end
end
if ticket > seq then
  seq = ticket
  redis.call('SET', KEYS[3], string.format('%d', seq))
end
redis.call('ZADD', KEYS[1], string.format('%d', ticket), ARGV[1])
redis.call('ZADD', KEYS[2], now + stale, ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * stale)
redis.call('PEXPIRE', KEYS[2], 2 * stale)
return {ticket, seq}
