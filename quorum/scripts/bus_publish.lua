-- Publish a pub/sub message for the other proxies (quorum.Bus): ARGV[1]
-- the channel (under the meta prefix), ARGV[2] the message (id, time and
-- payload). Returns the number of subscribers on this master (proxies).
return redis.call('PUBLISH', ARGV[1], ARGV[2])
