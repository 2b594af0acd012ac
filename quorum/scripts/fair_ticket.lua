-- Place a fair-lock waiter at the ticket the proxy chose (the highest that
-- a quorum of masters gave), so that the queue has one order on every
-- master. KEYS and ARGV[1], ARGV[3] as fair_enqueue; ARGV[2] the ticket.
-- Raises the sequence to the ticket. Returns 1.
local stale = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], now + stale, ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * stale)
redis.call('PEXPIRE', KEYS[2], 2 * stale)
if tonumber(ARGV[2]) > tonumber(redis.call('GET', KEYS[3]) or '0') then
  redis.call('SET', KEYS[3], ARGV[2])
end
return 1
