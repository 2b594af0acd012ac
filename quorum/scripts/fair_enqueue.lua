-- Queue a fair-lock waiter, or find its place if it is queued already.
-- queue (ids by ticket), deadlines (ids by the master's time in ms), seq
-- the master's fence sequence, which tickets share; id the waiter,
-- proposal the proxy's proposed ticket, stale how long a waiter stays
-- queued without trying again, in ms.
-- The ticket is max(proposal, sequence + 1), or the id's ticket if it is
-- queued; the sequence is raised to it. Waiters whose deadline passed
-- leave the queue first. Returns {ticket, sequence}.
local queue, deadlines, seq = KEYS[1], KEYS[2], KEYS[3]
local id, proposal, stale = ARGV[1], ARGV[2], ARGV[3]

local now = time_ms()
fair_clean(queue, deadlines, now)
local high = tonumber(redis.call('GET', seq) or '0')
local ticket = redis.call('ZSCORE', queue, id)
if ticket then
  ticket = tonumber(ticket)
else
  ticket = math.max(tonumber(proposal), high + 1)
end
if ticket > high then
  high = ticket
  redis.call('SET', seq, string.format('%d', high))
end
fair_place(queue, deadlines, string.format('%d', ticket), id, now, tonumber(stale))
return {ticket, high}
