-- Take count permits of a semaphore of `limit` numbered slots for a token.
-- Each slot is a lock key (the token, with the ttl as expiry); the grant is
-- the set of slots, each held on a quorum (see quorum/doc.go, Semaphores).
-- sem the semaphore's limit key, record the token's record (its slot
-- list), lease the master's lease high-water mark. The slot keys are
-- sem .. ':s:' .. i for i in 0..limit-1: built here rather than passed, as
-- there may be hundreds (the masters are independent Redis servers, never
-- a cluster). queue and deadlines are the semaphore's waiters ("<count>:<id>"
-- by ticket, and by the master's time after which each is gone). token,
-- ttl in ms, limit, count, start the slot to start the search at, stale
-- how long a queued waiter stays without trying again (ms), ticket its
-- place (0: not queued) and id its member ("" when not queued), then
-- (optionally) exactly the slots to hold.
-- Without the exact slots: the token keeps up to count of the slots it
-- holds and takes free ones, searching from start on, until it holds
-- count; with them: it holds exactly those. Either way it then holds
-- nothing else, and its record lists its slots. If that is not possible,
-- nothing changes (with exact slots, the token's slots here are released:
-- it must hold exactly the set or nothing).
-- Waiters first (quorum/doc.go, Semaphores), when searching: gone waiters
-- leave the queue, a queued call is re-placed at its ticket, and a token
-- that does not hold count slots here already is refused unless the slots
-- it holds or finds free, less the permits asked by the waiters queued
-- ahead of it (every waiter, if it is not queued), are at least count. A
-- grant leaves id queued: the call takes it out (fair_dequeue) once a
-- quorum granted it, so that a grant it rolls back (answered too late)
-- keeps the waiter's place; the queue is deleted when empty
-- (fair_dequeue) and expires 2 * stale ms after its last placement.
-- Until it leaves, a granted waiter is not waiting for permits here: the
-- grant writes its mark (queue .. ':g:' .. id, KEYS[6] for the caller's
-- own id: the token's record key, expiring with the grant), and a queued
-- waiter whose record still exists here does not count as ahead. A
-- rollback deletes the record (sem_release), so a grant rolled back
-- counts as ahead again: it keeps its place. Without that, a release
-- landing between a grant and its waiter's departure would wake the next
-- waiter only to refuse it, and the permit would wait for a retry timer.
-- fair_dequeue deletes the mark.
-- A semaphore whose limit RSEMSET lowered grants nothing while a slot
-- between the limit and the span is held (see sem_span); a grant renews a
-- limit RSEMSET set (see sem_live).
-- Returns {1, states} or {0, states}, states one character per slot after
-- the script: m (the token's), f (free), x (another token's); or
-- {-1, limit} when the semaphore has another limit here.
local sem, record, lease, queue, deadlines, mark = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, ttl, limit, count, start = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local stale, ticket, id = ARGV[6], ARGV[7], ARGV[8]
local exact = 8

local size = tonumber(limit)
local stored = redis.call('GET', sem)
if stored and tonumber(stored) ~= size then
  return {-1, stored}
end
local base = sem .. ':s:'
-- Slots above a lowered limit that earlier grants still hold block every
-- grant until they are free (sem_span).
local span, keep, version = sem_span(sem, size)
local blocked = false
for i = size, span - 1 do
  blocked = blocked or redis.call('EXISTS', base .. i) == 1
end
if span > size and not blocked and stored then
  -- Nothing is held above the limit here, and nothing can be again
  -- unless the limit rises (a try with a higher one is refused here;
  -- exact slots above it are never taken): stop reading those slots.
  redis.call('SET', sem .. ':c', string.format('%d:%d:%d', size, keep, version), 'KEEPTTL')
end
local st = {}
local slot = slots_read(base, size)
for i = 0, size - 1 do
  local v = slot[i + 1]
  if not v then
    st[i + 1] = 'f'
  elseif v == token then
    st[i + 1] = 'm'
  else
    st[i + 1] = 'x'
  end
end
local want = {}
local ok = true
if #ARGV - exact > 0 then
  for j = 1, #ARGV - exact do
    local i = tonumber(ARGV[exact + j])
    if i >= size or st[i + 1] == 'x' then
      -- a slot above the limit (a permit granted before RSEMSET lowered
      -- it) is never taken again
      ok = false
    end
    want[i + 1] = true
  end
  if blocked or not ok then
    ok = false
    want = {}
  end
else
  local n, first = tonumber(count), tonumber(start)
  local now = time_ms()
  local gone = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'LIMIT', 0, 100)
  if #gone > 0 then
    redis.call('ZREM', queue, unpack(gone))
    redis.call('ZREM', deadlines, unpack(gone))
  end
  if id ~= '' then
    local life = tonumber(stale)
    redis.call('ZADD', queue, ticket, id)
    redis.call('ZADD', deadlines, now + life, id)
    redis.call('PEXPIRE', queue, 2 * life)
    redis.call('PEXPIRE', deadlines, 2 * life)
  elseif #gone > 0 and redis.call('ZCARD', queue) == 0 then
    redis.call('DEL', queue, deadlines)
  end
  if blocked then
    return {0, table.concat(st)}
  end
  local held, free = 0, 0
  for i = 1, size do
    if st[i] == 'm' then
      held = held + 1
    elseif st[i] == 'f' then
      free = free + 1
    end
  end
  if held < n and held + free >= n then
    -- Each waiter asks at least one permit: held + free - n + 1 waiters
    -- ahead that still wait refuse the try. Read the queue a page of
    -- held + free at a time: granted waiters (their record lives here)
    -- are skipped, and each holds a slot, so there are few of them.
    local room = held + free - n
    local ahead, from, page = 0, 0, held + free
    local reached = false
    while not reached do
      local ws = redis.call('ZRANGE', queue, from, from + page - 1)
      for _, w in ipairs(ws) do
        if w == id then
          reached = true
          break
        end
        local rec = redis.call('GET', queue .. ':g:' .. w)
        if not (rec and redis.call('EXISTS', rec) == 1) then
          ahead = ahead + (tonumber(string.match(w, '^(%d+):')) or 1)
          if ahead > room then
            return {0, table.concat(st)}
          end
        end
      end
      if #ws < page then
        break
      end
      from = from + page
    end
  end
  local got = 0
  for _, kind in ipairs({'m', 'f'}) do
    for k = 0, size - 1 do
      local i = (first + k) % size
      if got < n and st[i + 1] == kind then
        want[i + 1] = true
        got = got + 1
      end
    end
  end
  if got < n then
    return {0, table.concat(st)}
  end
end
local slots = {}
for i = 0, size - 1 do
  if want[i + 1] then
    redis.call('SET', base .. i, token, 'PX', ttl)
    st[i + 1] = 'm'
    slots[#slots + 1] = tostring(i)
  elseif st[i + 1] == 'm' then
    redis.call('DEL', base .. i)
    st[i + 1] = 'f'
  end
end
if not ok then
  redis.call('DEL', record)
  return {0, table.concat(st)}
end
redis.call('SET', record, table.concat(slots, ','), 'PX', ttl)
if id ~= '' and mark then
  redis.call('SET', mark, record, 'PX', ttl)
end
sem_live(sem, limit, ttl, keep)
raise(lease, tonumber(ttl))
return {1, table.concat(st)}
