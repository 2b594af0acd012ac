-- Release each lock key that holds the token, with its fence key.
-- KEYS[1..n] lock keys, KEYS[n+1..2n] fence keys, KEYS[2n+1] the master's
-- lagging bound, and for one resource optionally KEYS[2n+2] its fair
-- queue. ARGV[1] token, ARGV[2..n+1] channels (optional: releases
-- announce themselves so that waiters on any proxy wake up; rollbacks of a
-- failed try do not, so that they do not wake every waiter, over and over).
-- The announcement is "1", or "h:<token>" when the resource has fair
-- waiters: the head of the queue is the one fair waiter to wake.
-- A deleted fence key's value is folded into the lagging bound first, so
-- that the next grant of the resource still gets a greater fence.
-- Returns how many lock keys it deleted.
local n = math.floor((#KEYS - 1) / 2)
local lag = redis.call('GET', KEYS[2 * n + 1])
local c = 0
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    local f = redis.call('GET', KEYS[n + i])
    if f then
      if lag and tonumber(f) > tonumber(lag) then
        lag = f
        redis.call('SET', KEYS[2 * n + 1], f, 'KEEPTTL')
      end
      redis.call('DEL', KEYS[n + i])
    end
    if ARGV[i + 1] then
      local msg = '1'
      if KEYS[2 * n + 2] then
        local head = redis.call('ZRANGE', KEYS[2 * n + 2], 0, 0)[1]
        if head then
          msg = 'h:' .. head
        end
      end
      redis.call('PUBLISH', ARGV[i + 1], msg)
    end
    c = c + 1
  end
end
return c
