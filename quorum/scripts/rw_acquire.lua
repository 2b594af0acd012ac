-- Take a read lock: lock the lock key, readers its readers (a sorted set
-- of tokens by the master's time in ms when each expires), mark the
-- writer-waiting mark, lease the master's lease high-water mark, rnext
-- readers next and rafter readers after (sorted sets of waiting readers'
-- ids by deadline, see quorum/doc.go, "Read-write locks"), owner the
-- resource's drop-in owner key; token, ttl in
-- ms, id the call's id if the reader waits ("" if it does not), life how
-- long a waiting reader's entry lives after its try (ms), and optionally
-- join "1" when the call's previous try found it next on another master.
-- Granted when no writer holds the lock key, and no writer waits or the
-- reader is next (a reader that holds already may renew); or when the
-- writer that holds it is the token itself (a downgrade: the key keeps
-- the token until the writer's release, which leaves it to the readers;
-- see read_hold). The lock key then holds "" (or the writer's token); a
-- waiting reader keeps its place in the sets until its call returns
-- (rw_leave), so that a try rolled back does not lose it. A waiting
-- reader refused by a writer's hold is put in readers next, one refused by
-- a writer mark in readers after (unless it is next, or joins: then it is
-- put in readers next here too, as the masters where it is next already
-- placed it). Returns 2 if granted while a writer waits (the reader is
-- next here), 1 if granted otherwise, else 0.
local lock, readers, mark, lease, rnext, rafter, owner = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, ttl, id, life, join = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local now = time_ms()
-- wait puts the reader in set (out of other), its entry living life ms;
-- entries past their deadline leave.
local function wait(set, other)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  redis.call('ZADD', set, string.format('%d', now + tonumber(life)), id)
  redis.call('PEXPIRE', set, life)
  zleave(other, id)
end
local v = redis.call('GET', lock)
-- (a drop-in lock, which has an owner key, is not downgraded: its
-- release and extension do not know readers)
local writer = v == token and redis.call('EXISTS', owner) == 0
if v and v ~= '' and not writer then
  if id ~= '' then
    wait(rnext, rafter)
  end
  return 0
end
local mine = redis.call('ZSCORE', readers, token)
local asNext = false
if not writer and not (mine and tonumber(mine) > now) and redis.call('EXISTS', mark) == 1 then
  local nx = id ~= '' and redis.call('ZSCORE', rnext, id)
  if not (nx and tonumber(nx) > now) then
    if id == '' then
      return 0
    end
    if join ~= '1' then
      wait(rafter, rnext)
      return 0
    end
    wait(rnext, rafter)
  end
  asNext = true
end
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
read_hold(lock, readers, lease, token, ttl, now, writer)
if asNext then
  return 2
end
return 1
