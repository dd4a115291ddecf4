-- A reset, told to every replica (src/store/redis/resets.rs): appended to the resets log
-- after the key's state was deleted, so a replica that reads the entry and asks again finds
-- the state gone.
-- KEYS[1]  the resets counter, PREFIX:{overrides}:resets:n (never expires: a replica compares
--          it with the last one it read)
-- KEYS[2]  the log, PREFIX:{overrides}:resets, a sorted set: score the counter's value,
--          member `N\nORIGIN\nPOLICY\nKEY` (N keeps members unique)
-- ARGV[1]  ORIGIN\nPOLICY\nKEY; ARGV[2] entries kept; ARGV[3] the log's TTL (ms) from the
--          last reset
-- Reply:   the counter's new value
local n = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], n, n .. '\n' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return n
