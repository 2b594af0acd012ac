-- Take a read lock. KEYS[1] the lock key, KEYS[2] the readers (a sorted
-- set of tokens by the master's time in ms when each expires), KEYS[3]
-- the writer-waiting mark, KEYS[4] the master's lease high-water mark,
-- KEYS[5] readers next and KEYS[6] readers after (sorted sets of waiting
-- readers' ids by deadline, see quorum/doc.go, "Read-write locks").
-- ARGV[1] token, ARGV[2] ttl in ms, ARGV[3] the call's id if the reader
-- waits ("" if it does not), ARGV[4] how long a waiting reader's entry
-- lives after its try (ms).
-- Granted when no writer holds the lock key, and no writer waits or the
-- reader is next (a reader that holds already may renew). The lock key
-- then holds "" (no token is empty: writers see it as taken) and, like
-- the readers, lives as long as the longest-lived reader; the reader
-- leaves both sets. A waiting reader refused by a writer's hold is put in
-- readers next, one refused by a writer mark in readers after (unless it
-- is next). Returns 1 if granted, else 0.
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[3] or ''
-- wait puts the reader in set (out of other), its entry living ARGV[4]
-- ms; entries past their deadline leave.
local function wait(set, other)
  local life = tonumber(ARGV[4])
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
  redis.call('ZADD', set, string.format('%d', now + life), id)
  redis.call('PEXPIRE', set, life)
  if redis.call('ZREM', other, id) == 1 and redis.call('ZCARD', other) == 0 then
    redis.call('DEL', other)
  end
end
local v = redis.call('GET', KEYS[1])
if v and v ~= '' then
  if id ~= '' then
    wait(KEYS[5], KEYS[6])
  end
  return 0
end
local mine = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not (mine and tonumber(mine) > now) and redis.call('EXISTS', KEYS[3]) == 1 then
  local nx = id ~= '' and redis.call('ZSCORE', KEYS[5], id)
  if not (nx and tonumber(nx) > now) then
    if id ~= '' then
      wait(KEYS[6], KEYS[5])
    end
    return 0
  end
end
if id ~= '' then
  for _, set in ipairs({KEYS[5], KEYS[6]}) do
    if redis.call('ZREM', set, id) == 1 and redis.call('ZCARD', set) == 0 then
      redis.call('DEL', set)
    end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('SET', KEYS[1], '', 'PX', last - now)
redis.call('PEXPIRE', KEYS[2], last - now)
raise(KEYS[4], tonumber(ARGV[2]))
return 1
