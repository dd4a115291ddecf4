-- Minimal sliding-window log, the baseline of benches/redis_cost/per_call.rs: the textbook
-- sorted set of one member per request (so it counts requests, not cost units, and two
-- requests in the same µs share a member), trimmed by score.
--
-- KEYS[1]  a sorted set: one member per admission, scored by its time in µs
-- ARGV     N, P in µs, cost (1)
-- Reply    { now, allowed, allowed, remaining, reset, retry }, integers
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n, p, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - p)
local used = redis.call('ZCARD', KEYS[1])
if used + cost <= n then
  redis.call('ZADD', KEYS[1], now, now)
  redis.call('PEXPIRE', KEYS[1], math.ceil(p / 1000))
  return { now, 1, 1, n - used - cost, p, 0 }
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return { now, 0, 0, math.max(0, n - used), p, tonumber(oldest[2]) + p - now }
