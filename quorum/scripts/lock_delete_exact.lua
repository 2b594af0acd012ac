-- Delete the lock key only if it still holds the grant that a quorum was
-- seen holding: its value, and an owner nonce among those seen with it
-- ("" for a key with no owner key). A delete that reaches this master late,
-- after the lock was released and taken again, even with the same value
-- (SET lock 1 NX + DEL), finds another owner nonce and changes nothing.
-- lock the lock key, fence its fence key, lag the master's lagging bound,
-- owner its owner key, holds its re-entrant holds (deleted with it);
-- value, channel the release channel ("" for none), then the owner
-- nonces seen.
-- As lock_release: the fence is folded into the lagging bound (see drop),
-- the release announced. Returns 1 if it deleted the key, else 0.
local lock, fence, lag, owner, holds = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local value, channel, nonce = ARGV[1], ARGV[2], 2

if redis.call('GET', lock) ~= value then
  return 0
end
local o = redis.call('GET', owner) or ''
local seen = false
for j = 1, #ARGV - nonce do
  if ARGV[nonce + j] == o then
    seen = true
  end
end
if not seen then
  return 0
end
if o ~= '' then
  redis.call('DEL', owner)
end
drop(lock, fence, lag)
redis.call('DEL', holds)
if channel ~= '' then
  redis.call('PUBLISH', channel, '1')
end
return 1
