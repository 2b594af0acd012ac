-- lock_acquire for a writer that waits (quorum/doc.go, "Read-write
-- locks"): it is also refused where a free lock key has a live reader
-- next, and a refused writer marks the resource that refused it, so that
-- new readers queue behind it; its grant deletes the call's own marks and
-- moves each resource's readers after into its readers next (see
-- wait_check and promote).
-- Keys and arguments as lock_acquire's, then per resource mark its
-- writer-waiting mark, rnext its readers next and rafter its readers after
-- (sorted sets of waiting readers' ids by deadline); markttl how long a
-- mark lives (ms), markid the call's mark.
local n = (#KEYS - 3) / 5
local lock, fence, mark, rnext, rafter = 0, n, 2 * n + 3, 3 * n + 3, 4 * n + 3
local lag, seq, lease = KEYS[2 * n + 1], KEYS[2 * n + 2], KEYS[2 * n + 3]
local token, ttl, proposal, lagms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local markttl, markid = ARGV[5], ARGV[6]

local high = tonumber(redis.call('GET', seq) or '0')
local refused, mine = wait_check(lock, mark, rnext, n, token, markid, tonumber(markttl))
if refused then
  return {0, high}
end
promote(mark, rnext, rafter, n, markid, tonumber(markttl))
return grant(lock, fence, n, lag, seq, lease, high, token, ttl, proposal, lagms, mine)
