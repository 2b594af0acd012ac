-- Reset the ttl of each lock key that holds the token: lock the lock
-- keys, fence their fence keys (a re-entrant lock's holds keep their
-- fence there), readers their readers (a writer that downgraded keeps its
-- lock key as long as its read lock: see extend), holds their re-entrant
-- holds (which live as long as their lock key, with their fence), lease
-- the master's lease high-water mark; token, ttl in ms, lagms unused.
-- Returns how many lock keys it extended.
local n = (#KEYS - 1) / 4
local lock, fence, readers, holds = 0, n, 2 * n, 3 * n
local lease = KEYS[4 * n + 1]
local token, ttl, lagms = ARGV[1], ARGV[2], ARGV[3]

return extend(lock, fence, nil, readers, holds, n, lease, token, ttl, lagms)
