-- Set a semaphore's limit (RSEMSET): sem its limit key; limit the new
-- limit, keep how long (ms) a limit so set outlives the semaphore's last
-- grant, version the proxy's proposal (a later RSEMSET proposes a higher
-- one), channel the release channel, id an announcement id.
-- The limit key then holds the limit, and the config key (sem .. ':c')
-- "<span>:<keep>:<version>", span the highest limit the semaphore had
-- while that key lived (slots below it may be held by earlier grants: a
-- grant needs every slot from the limit to the span free, see sem_span).
-- Both live keep ms or more (see sem_live); each grant renews them. A
-- version not above the stored one changes nothing, so that masters that
-- see two RSEMSETs in either order keep the same one. Raising the limit
-- announces the permits it adds, as a release does, so that waiters on
-- every proxy try at once. Returns {1, the limit before} if set, else
-- {0, the stored limit, the stored version}.
local sem = KEYS[1]
local limit, keep, version, channel, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local old = tonumber(redis.call('GET', sem) or '0')
local span, _, stored = sem_span(sem, old)
if tonumber(version) <= stored then
  return {0, old, stored}
end
local n = tonumber(limit)
-- The limit key outlives every held slot: so must both keys now.
local life = math.max(tonumber(keep), redis.call('PTTL', sem))
redis.call('SET', sem .. ':c', string.format('%d:%d:%s', math.max(span, n), tonumber(keep), version), 'PX', life)
redis.call('SET', sem, limit, 'PX', life)
if n > old then
  redis.call('PUBLISH', channel, (n - old) .. ':' .. id)
end
return {1, old}
