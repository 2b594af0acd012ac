-- Place a fair-lock waiter at the ticket the proxy chose (the highest that
-- a quorum of masters gave), so that the queue has one order on every
-- master. Keys, id and stale as fair_enqueue's. Raises the sequence to
-- the ticket. Returns 1.
local queue, deadlines, seq = KEYS[1], KEYS[2], KEYS[3]
local id, ticket, stale = ARGV[1], ARGV[2], ARGV[3]

fair_place(queue, deadlines, ticket, id, time_ms(), tonumber(stale))
if tonumber(ticket) > tonumber(redis.call('GET', seq) or '0') then
  redis.call('SET', seq, ticket)
end
return 1
