-- Publish a pub/sub message for the other proxies (relay.Bus): channel
-- (under the meta prefix), message (id, time and payload). Returns the
-- number of subscribers on this master (proxies).
local channel, message = ARGV[1], ARGV[2]

return redis.call('PUBLISH', channel, message)
