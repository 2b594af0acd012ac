-- Take a waiter out of a fair lock's queue: it was granted, gave up, or
-- its client left. queue (tokens by ticket), deadlines (tokens by the
-- master's time in ms); id the waiter, channel the release channel, mode
-- when to announce the new head on the channel ("h:<id>", so that it
-- tries at once): "0" never (the waiter was granted and holds the lock),
-- "1" if the waiter was the head, "2" whenever the queue has a head (the
-- waiter gave back a grant). Deletes the queue once it is empty, and
-- the waiter's grant mark if one is named (mark: a semaphore waiter's,
-- see sem_acquire). Returns 1 if the waiter was queued.
local queue, deadlines, mark = KEYS[1], KEYS[2], KEYS[3]
local id, channel, mode = ARGV[1], ARGV[2], ARGV[3]

local head = redis.call('ZRANGE', queue, 0, 0)[1]
local was = redis.call('ZREM', queue, id)
redis.call('ZREM', deadlines, id)
if mark then
  redis.call('DEL', mark)
end
local after = redis.call('ZRANGE', queue, 0, 0)[1]
if not after then
  redis.call('DEL', queue, deadlines)
elseif mode == '2' or (mode == '1' and head == id) then
  redis.call('PUBLISH', channel, 'h:' .. after)
end
return was
