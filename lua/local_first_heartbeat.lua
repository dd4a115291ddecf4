-- Local-first heartbeat: records that an instance is alive and counts the live ones, so each
-- instance knows its share of every limit when Redis is unreachable.
--
-- KEYS[1]  the set of instances: PREFIX:lf:instances (a sorted set, scored by expiry in ms)
-- ARGV[1]  this instance's id
-- ARGV[2]  how long the heartbeat holds (ms)
-- Reply:   the number of live instances, this one included.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + ttl), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms))
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
return redis.call('ZCARD', KEYS[1])
