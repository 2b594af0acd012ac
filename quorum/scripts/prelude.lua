-- The functions several scripts share. A script is assembled as the
-- functions of this file that it calls (and those they call), in this
-- file's order, then the script (see the package doc). None reads KEYS or
-- ARGV but at the offsets its caller passes (KEYS[lock + i]: the caller's
-- header bound lock to its group of keys).

-- time_ms is the master's time in ms.
local function time_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- num is the number a value read by MGET holds, nil for a missing key
-- (which MGET gives a script as false).
local function num(x)
  if x then
    return tonumber(x)
  end
  return nil
end

-- raise keeps the master's lease high-water mark, key, alive at least
-- ttl ms from now: the key's own expiry is when the longest-lived grant
-- the master holds expires (quorum/doc.go, "Restarted masters"). It is
-- read (PTTL) at every grant, and written only when it would expire
-- earlier than this grant, then with an eighth of ttl to spare: a stream
-- of grants writes it about once per eighth of their ttl, and the mark
-- outlasts the longest grant by at most that much. Its value is its expiry on the master's
-- clock in ms, which is what earlier versions of the proxy compare
-- against: proxies of both versions may serve the same masters.
local function raise(key, ttl)
  if redis.call('PTTL', key) < ttl then
    local px = ttl + math.floor(ttl / 8)
    redis.call('SET', key, string.format('%d', time_ms() + px), 'PX', px)
  end
end

-- readers_left is how long the longest-lived reader in readers still
-- lives after now (ms), or nil when none does: a writer that downgraded
-- (its token also a reader, see read_hold) leaves the lock key to its
-- readers when it releases, and keeps it at least that long when it
-- extends.
local function readers_left(readers)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')[2]
  if not last then
    return nil
  end
  local left = tonumber(last) - time_ms()
  if left <= 0 then
    return nil
  end
  return left
end

-- sem_span reads a semaphore's config key (its limit key sem .. ':c',
-- written by RSEMSET: "<span>:<keep>:<version>") and returns the span (the
-- highest limit the semaphore had while it lived, size when none is
-- higher), keep (ms, 0 without a config key) and the version (0 without).
-- Slots from size up to the span may still be held by grants made under a
-- higher limit (quorum/doc.go, Semaphores: Resizing).
local function sem_span(sem, size)
  local c = redis.call('GET', sem .. ':c')
  if not c then
    return size, 0, 0
  end
  local span, keep, version = string.match(c, '^(%d+):(%d+):(%d+)$')
  return math.max(size, tonumber(span)), tonumber(keep), tonumber(version)
end

-- slots_read reads the n slot keys base .. 0 to base .. (n - 1) of a
-- semaphore with MGET, a call per 1000 slots rather than one per slot:
-- out[i + 1] is the token slot i holds, or false.
local function slots_read(base, n)
  local out = {}
  local i = 0
  while i < n do
    local keys = {}
    for k = i, math.min(n, i + 1000) - 1 do
      keys[#keys + 1] = base .. k
    end
    local v = redis.call('MGET', unpack(keys))
    for k = 1, #keys do
      out[i + k] = v[k]
    end
    i = i + #keys
  end
  return out
end

-- sem_live keeps a semaphore's limit key sem, and its config key when it
-- has one (keep > 0), alive at least ttl ms, and a configured limit at
-- least keep ms: the config key always outlives the limit key's slots.
local function sem_live(sem, limit, ttl, keep)
  local life = math.max(tonumber(ttl), keep)
  if redis.call('PTTL', sem) < life then
    redis.call('SET', sem, limit, 'PX', life)
  end
  if keep > 0 and redis.call('PTTL', sem .. ':c') < life then
    redis.call('PEXPIRE', sem .. ':c', life)
  end
end

-- free_or_mine reads the lock keys KEYS[lock + i] (i = 1..n): nil when
-- another token holds one of them, else whether token holds them all (a
-- TOKEN retry of the same grant).
local function free_or_mine(lock, n, token)
  local mine = true
  for i = 1, n do
    local v = redis.call('GET', KEYS[lock + i])
    if v ~= token then
      if v then
        return nil
      end
      mine = false
    end
  end
  return mine
end

-- grant sets the lock keys KEYS[lock + i] (i = 1..n) to token for ttl ms
-- (or what a key the token held already had left, if longer; set: the
-- caller set the one lock key already, SET NX PX ttl) and gives the try
-- its fence, one for every resource: c = max(sequence + 1, proposal),
-- which becomes the master's sequence (seqkey: INCR, and a SET only when
-- the proposal is higher). Nothing is kept per resource: see
-- docs/design/fencing.md for why this is monotonic, and for the
-- write-back (lock_fence) that makes a quorum hold the grant's fence. The
-- lease high-water mark (leasekey) is raised with the grant. fence,
-- lagkey, lagms and high are unused (the callers' key and argument
-- layout names them). Returns {1, sequence, c, ..., c}.
local function grant(lock, fence, n, lagkey, seqkey, leasekey, high, token, ttl, proposal, lagms, mine, set)
  local out = {1, 0}
  for i = 1, n do
    -- A key the token holds already (every key is free or the token's
    -- here) never gets a shorter life: it may be kept for the token's own
    -- read lock (a downgrade, read_hold). One key that is not mine is
    -- free: no read for a plain lock's grant.
    local px = tonumber(ttl)
    if not set then
      if mine or n > 1 then
        px = math.max(px, redis.call('PTTL', KEYS[lock + i]))
      end
      redis.call('SET', KEYS[lock + i], token, 'PX', px)
    end
  end
  local c = redis.call('INCR', seqkey)
  local p = tonumber(proposal)
  if c < p then
    redis.call('SET', seqkey, string.format('%d', p))
    c = p
  end
  for i = 1, n do
    out[i + 2] = c
  end
  raise(leasekey, tonumber(ttl))
  out[2] = c
  return out
end

-- wait_check reads the lock keys KEYS[lock + i] (i = 1..n) for a writer:
-- it is refused where a key holds another token and, when it waits
-- (markttl > 0), where a free key's resource has a live reader next
-- (KEYS[rnext + i], waiting readers' ids by deadline); a refused writer
-- that waits marks that resource (KEYS[mark + i] := markid for markttl
-- ms), so that new readers queue behind it (quorum/doc.go, "Read-write
-- locks"). Returns whether it was refused, and whether every key before
-- the refusal held the token already.
local function wait_check(lock, mark, rnext, n, token, markid, markttl)
  local mine, now = true, nil
  for i = 1, n do
    local v = redis.call('GET', KEYS[lock + i])
    if v ~= token then
      mine = false
    end
    local taken = v and v ~= token
    -- (readers next is read only where it exists: one call when, as
    -- mostly, no reader waits)
    if not v and markttl > 0 and redis.call('EXISTS', KEYS[rnext + i]) == 1 then
      now = now or time_ms()
      taken = redis.call('ZCOUNT', KEYS[rnext + i], '(' .. now, '+inf') > 0
    end
    if taken then
      if markttl > 0 then
        redis.call('SET', KEYS[mark + i], markid, 'PX', markttl)
      end
      return true, mine
    end
  end
  return false, mine
end

-- promote ends a granted writer's wait: it deletes the call's own marks
-- (KEYS[mark + i] holding markid) and, when it waited (markttl > 0),
-- moves each resource's readers after (KEYS[rafter + i]) into its readers
-- next (KEYS[rnext + i]), so that they go before the next writer.
local function promote(mark, rnext, rafter, n, markid, markttl)
  for i = 1, n do
    local m = KEYS[mark + i]
    -- One EXISTS skips both steps where neither a mark nor readers after
    -- exist (a writer that did not have to wait).
    local some = (markid ~= '' or markttl > 0) and redis.call('EXISTS', m, KEYS[rafter + i]) > 0
    if some and markid ~= '' and redis.call('GET', m) == markid then
      redis.call('DEL', m)
    end
    if some and markttl > 0 then
      local nx, af = KEYS[rnext + i], KEYS[rafter + i]
      local keep = redis.call('PTTL', af)
      if keep > 0 then
        keep = math.max(keep, redis.call('PTTL', nx))
        redis.call('ZUNIONSTORE', nx, 2, nx, af, 'AGGREGATE', 'MAX')
        redis.call('DEL', af)
        redis.call('PEXPIRE', nx, keep)
      end
    end
  end
end

-- drop deletes a lock key, and the fence key an older proxy may have
-- left beside it (one DEL: it costs nothing more). lagkey is unused.
local function drop(lockkey, fencekey, lagkey)
  redis.call('DEL', lockkey, fencekey)
end

-- extend resets the ttl of each lock key KEYS[lock + i] (i = 1..n) that
-- holds token to ttl ms (given readers, never to less than its readers
-- KEYS[readers + i] still live: a writer that downgraded keeps the key for
-- its read lock, see read_hold), given owner, of its owner key KEYS[owner + i] to ttl ms and,
-- given holds, of its re-entrant holds KEYS[holds + i] and their fence
-- key KEYS[fence + i] with the lock key;
-- then raises the lease high-water mark (leasekey) if it extended any.
-- Returns how many lock keys it extended.
local function extend(lock, fence, owner, readers, holds, n, leasekey, token, ttl, lagms)
  local c = 0
  for i = 1, n do
    if redis.call('GET', KEYS[lock + i]) == token then
      local keep = tonumber(ttl)
      if readers then
        keep = math.max(keep, readers_left(KEYS[readers + i]) or 0)
      end
      redis.call('PEXPIRE', KEYS[lock + i], keep)
      if holds and redis.call('PEXPIRE', KEYS[holds + i], keep) == 1 then
        -- The holds' fence lives as long as they do (lock_hold).
        redis.call('PEXPIRE', KEYS[fence + i], keep)
      end
      if owner then
        redis.call('PEXPIRE', KEYS[owner + i], ttl)
      end
      c = c + 1
    end
  end
  if c > 0 then
    raise(leasekey, tonumber(ttl))
  end
  return c
end

-- fair_clean takes out of a fair lock's queue (queue: tokens by ticket)
-- the waiters whose deadline (in deadlines, by the master's time in ms)
-- passed before now, at most 100 at a time.
local function fair_clean(queue, deadlines, now)
  local gone = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', queue, unpack(gone))
    redis.call('ZREM', deadlines, unpack(gone))
  end
end

-- fair_place (re)places id in a fair lock's queue at ticket, with the
-- deadline now + stale ms; the queue expires 2 * stale ms after its last
-- waiter's last try.
local function fair_place(queue, deadlines, ticket, id, now, stale)
  redis.call('ZADD', queue, ticket, id)
  redis.call('ZADD', deadlines, now + stale, id)
  redis.call('PEXPIRE', queue, 2 * stale)
  redis.call('PEXPIRE', deadlines, 2 * stale)
end

-- zleave takes member out of the sorted set key, deleting the set once it
-- is empty. Returns 1 if member was in it, else 0.
local function zleave(key, member)
  if redis.call('ZREM', key, member) == 0 then
    return 0
  end
  if redis.call('ZCARD', key) == 0 then
    redis.call('DEL', key)
  end
  return 1
end

-- read_hold gives the reader token of the read lock (its lock key lockkey,
-- its readers: tokens by the master's time in ms when each expires) ttl
-- ms from now; the lock key (holding "", which no token is: writers see it
-- as taken) and the readers then live as long as the longest-lived
-- reader, and the lease high-water mark (leasekey) is raised with it.
-- When writer (the lock key holds the reader's own token as a writer: a
-- downgrade, quorum/doc.go "Read-write locks") the key keeps that token
-- and lives at least as long as the readers; the writer's release turns
-- it into "" (see readers_left).
local function read_hold(lockkey, readers, leasekey, token, ttl, now, writer)
  redis.call('ZADD', readers, string.format('%d', now + tonumber(ttl)), token)
  local last = tonumber(redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')[2])
  if writer then
    if redis.call('PTTL', lockkey) < last - now then
      redis.call('PEXPIRE', lockkey, last - now)
    end
  else
    redis.call('SET', lockkey, '', 'PX', last - now)
  end
  redis.call('PEXPIRE', readers, last - now)
  raise(leasekey, tonumber(ttl))
end
