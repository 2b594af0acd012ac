-- Delete the lock key only if it still holds the grant that a quorum was
-- seen holding: its value, and an owner nonce among those seen with it
-- ("" for a key with no owner key). A delete that reaches this master late,
-- after the lock was released and taken again, even with the same value
-- (SET lock 1 NX + DEL), finds another owner nonce and changes nothing.
-- KEYS[1] the lock key, KEYS[2] its fence key, KEYS[3] the master's
-- lagging bound, KEYS[4] its owner key. ARGV[1] the value, ARGV[2] the
-- release channel ("" for none), ARGV[3..] the owner nonces seen.
-- As lock_release: the fence is folded into the lagging bound, the release
-- announced. Returns 1 if it deleted the key, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local o = redis.call('GET', KEYS[4]) or ''
local seen = false
for i = 3, #ARGV do
  if ARGV[i] == o then
    seen = true
  end
end
if not seen then
  return 0
end
redis.call('DEL', KEYS[1])
if o ~= '' then
  redis.call('DEL', KEYS[4])
end
local f = redis.call('GET', KEYS[2])
if f then
  local lag = redis.call('GET', KEYS[3])
  if lag and tonumber(f) > tonumber(lag) then
    redis.call('SET', KEYS[3], f, 'KEEPTTL')
  end
  redis.call('DEL', KEYS[2])
end
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], '1')
end
return 1
