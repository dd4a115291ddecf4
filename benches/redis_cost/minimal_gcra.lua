-- Minimal GCRA, the baseline of benches/redis_cost/per_call.rs: what a careful hand-written
-- script of the same algorithm costs, nothing more (no multi-limit, no clock-step clamp, no
-- explicit test time).
--
-- KEYS[1]  the TAT in µs
-- ARGV     N, P in µs, cost
-- Reply    { now, allowed, allowed, remaining, reset, retry }, integers
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n, p, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local step = math.ceil(p / n)
local tolerance = n * step
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local next_tat = tat + cost * step
if next_tat - now <= tolerance then
  redis.call('SET', KEYS[1], next_tat, 'PX', math.ceil((next_tat - now) / 1000))
  return { now, 1, 1, math.floor((tolerance - (next_tat - now)) / step), next_tat - now, 0 }
end
return { now, 0, 0, math.floor((tolerance - (tat - now)) / step), tat - now, next_tat - now - tolerance }
