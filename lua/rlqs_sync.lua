-- RLQS: one instance's demand for one bucket, and the fleet's read back (src/rlqs/fleet.rs).
-- One call per bucket per instance per sync interval, one key: cluster-safe.
--
-- KEYS[1]  the bucket's hash: a field per server instance, "EXPIRES_MS DEMAND ADMITTED"
-- ARGV[1]  this instance's id (its field)
-- ARGV[2]  its demand, requests per second (a decimal)
-- ARGV[3]  the requests per second its clients admit (a decimal): the fleet's sum against
--          the limit corrects the shares (src/rlqs/expect.rs)
-- ARGV[4]  how long its entry lives (ms): an instance that stops calling leaves the split then
-- Reply:   {now_ms, then per live instance: ID, DEMAND, ADMITTED} (strings: Lua would
--          truncate a demand to an integer), expired entries deleted on the way.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1],
  string.format('%.0f', now + ttl) .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
local out = {tostring(now)}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local expires, demand, admitted = string.match(all[i + 1], '^(%d+) (%S+) (%S+)$')
  if expires == nil or tonumber(expires) < now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = demand
    out[#out + 1] = admitted
  end
end
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return out
