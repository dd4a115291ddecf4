-- A store's poll of what other replicas changed (src/store/redis/poll.rs): the overrides and
-- the resets, in one call.
-- KEYS[1]  the overrides version, KEYS[2] the overrides hash,
-- KEYS[3]  the resets counter, KEYS[4] the resets log (lua/reset_log.lua)
-- ARGV[1]  the overrides version last read (-1: none yet)
-- ARGV[2]  the resets counter last read (-1: none yet)
-- Reply:   {version, counter, {log entries after the counter last read}, then, if the
--          version is not the one last read, {every override field and value}}
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
local counter = tonumber(redis.call('GET', KEYS[3]) or '0')
local seen = tonumber(ARGV[2])
local log = {}
if seen >= 0 and counter > seen then
  log = redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. seen, counter)
end
if version == tonumber(ARGV[1]) then
  return {version, counter, log}
end
return {version, counter, log, redis.call('HGETALL', KEYS[2])}
