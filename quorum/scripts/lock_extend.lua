-- Reset the ttl of each lock key that holds the token, and of its fence
-- key (to the ttl plus the lag period): lock the lock keys, fence their
-- fence keys, lease the master's lease high-water mark; token, ttl in ms,
-- lagms the lag period in ms. Returns how many lock keys it extended.
local n = (#KEYS - 1) / 2
local lock, fence = 0, n
local lease = KEYS[2 * n + 1]
local token, ttl, lagms = ARGV[1], ARGV[2], ARGV[3]

return extend(lock, fence, nil, n, lease, token, ttl, lagms)
