-- Delete each lock key that holds the token, announcing each deletion when
-- a channel is given for it (releases do; rollbacks of a failed try do not,
-- so that they do not wake every waiter at once, over and over).
-- KEYS[1..n] lock keys; ARGV[1] token; ARGV[2..n+1] channels (optional).
-- Returns how many keys it deleted.
local c = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    if ARGV[i + 1] then
      redis.call('PUBLISH', ARGV[i + 1], '1')
    end
    c = c + 1
  end
end
return c
