-- Reset the ttl of each lock key that holds the token, and of its fence
-- key (to the ttl plus the lag period): lock the lock keys, fence their
-- fence keys, lease the master's lease high-water mark, seq its fence
-- sequence, gone the token's release tombstones (one per lock key, see
-- tombstone); token, ttl in ms, lagms the lag period in ms, live "1" when
-- the lease is known to be live, then optionally value the lease's fences
-- (one per lock key). A live lease also takes its keys again where they
-- are all free or the token's (see retake). Returns how many lock keys
-- hold the token after it.
local n = (#KEYS - 2) / 3
local lock, fence, gone = 0, n, 2 * n + 2
local lease, seq = KEYS[2 * n + 1], KEYS[2 * n + 2]
local token, ttl, lagms, live = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local value = 4

if live == '1' then
  return retake(lock, fence, nil, gone, n, lease, seq, token, ttl, lagms, nil, value)
end
return extend(lock, fence, nil, n, lease, token, ttl, lagms)
