-- Re-enrol a reader whose entry is gone from this master (quorum/doc.go,
-- "Leases re-enrol masters"): lock the lock key, readers its readers,
-- lease the master's lease high-water mark, broken the resource's break
-- mark; token, ttl in ms. Nothing is taken where the break mark lists the
-- token (RLOCKBREAK broke it).
-- Adds the reader, as rw_acquire would, wherever no other writer holds
-- the lock key: a waiting writer's mark does not refuse it, as it is not a new
-- reader (it holds a quorum, so no writer can be granted meanwhile).
-- Returns 1 if it holds, else 0.
local lock, readers, lease, broken = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl = ARGV[1], ARGV[2]

local v = redis.call('GET', lock)
if v and v ~= '' and v ~= token then
  return 0
end
if redis.call('SISMEMBER', broken, token) == 1 then
  return 0
end
local now = time_ms()
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
read_hold(lock, readers, lease, token, ttl, now, v == token)
return 1
