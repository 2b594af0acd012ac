-- Take a waiter out of a fair lock's queue: it was granted, gave up, or
-- its client left. KEYS[1] the queue, KEYS[2] the deadlines. ARGV[1]
-- token, ARGV[2] the release channel, ARGV[3] when to announce the new
-- head on the channel ("h:<token>", so that it tries at once): "0" never
-- (the waiter was granted and holds the lock), "1" if the waiter was the
-- head, "2" whenever the queue has a head (the waiter gave back a grant).
-- Deletes the queue once it is empty. Returns 1 if the waiter was queued.
local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
local was = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local next = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if not next then
  redis.call('DEL', KEYS[1], KEYS[2])
elseif ARGV[3] == '2' or (ARGV[3] == '1' and head == ARGV[1]) then
  redis.call('PUBLISH', ARGV[2], 'h:' .. next)
end
return was
