-- Take n permits of a semaphore of `limit` numbered slots for a token.
-- Each slot is a lock key (the token, with the ttl as expiry); the grant is
-- the set of slots, each held on a quorum (see quorum/doc.go, Semaphores).
-- KEYS[1] the semaphore's limit key, KEYS[2] the token's record (its slot
-- list), KEYS[3] the master's lease high-water mark. The slot keys are KEYS[1] .. ':s:' .. i for i in 0..limit-1:
-- built here rather than passed, as there may be hundreds (the masters are
-- independent Redis servers, never a cluster).
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] limit, ARGV[4] n, ARGV[5] the
-- slot to start the search at, ARGV[6..] (optional) exactly the slots to
-- hold.
-- Without ARGV[6..]: the token keeps up to n of the slots it holds and
-- takes free ones, searching from ARGV[5] on, until it holds n; with them:
-- it holds exactly those. Either way it then holds nothing else, and its
-- record lists its slots. If that is not possible, nothing changes (with
-- ARGV[6..], the token's slots here are released: it must hold exactly the
-- set or nothing).
-- Returns {1, states} or {0, states}, states one character per slot after
-- the script: m (the token's), f (free), x (another token's); or
-- {-1, limit} when the semaphore has another limit here.
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
local limit = tonumber(ARGV[3])
local stored = redis.call('GET', KEYS[1])
if stored and tonumber(stored) ~= limit then
  return {-1, stored}
end
local base = KEYS[1] .. ':s:'
local st = {}
for i = 0, limit - 1 do
  local v = redis.call('GET', base .. i)
  if not v then
    st[i + 1] = 'f'
  elseif v == ARGV[1] then
    st[i + 1] = 'm'
  else
    st[i + 1] = 'x'
  end
end
local want = {}
local ok = true
if #ARGV > 5 then
  for j = 6, #ARGV do
    local i = tonumber(ARGV[j])
    if st[i + 1] == 'x' then
      ok = false
    end
    want[i + 1] = true
  end
  if not ok then
    want = {}
  end
else
  local n = tonumber(ARGV[4])
  local start = tonumber(ARGV[5])
  local got = 0
  for _, kind in ipairs({'m', 'f'}) do
    for k = 0, limit - 1 do
      local i = (start + k) % limit
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
for i = 0, limit - 1 do
  if want[i + 1] then
    redis.call('SET', base .. i, ARGV[1], 'PX', ARGV[2])
    st[i + 1] = 'm'
    slots[#slots + 1] = tostring(i)
  elseif st[i + 1] == 'm' then
    redis.call('DEL', base .. i)
    st[i + 1] = 'f'
  end
end
if not ok then
  redis.call('DEL', KEYS[2])
  return {0, table.concat(st)}
end
redis.call('SET', KEYS[2], table.concat(slots, ','), 'PX', ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
end
raise(KEYS[3], tonumber(ARGV[2]))
return {1, table.concat(st)}
