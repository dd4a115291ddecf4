-- Minimal fixed window, the baseline of benches/redis_cost/per_call.rs (same state as
-- lua/fixed_window.lua, none of its edge cases).
--
-- KEYS[1]  "<window index> <count>"
-- ARGV     N, P in µs, cost
-- Reply    { now, allowed, allowed, remaining, reset, retry }, integers
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n, p, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local window = math.floor(now / p)
local used = 0
local v = redis.call('GET', KEYS[1])
if v then
  local w, c = string.match(v, '^(%d+) (%d+)$')
  if tonumber(w) == window then
    used = tonumber(c)
  end
end
local until_end = (window + 1) * p - now
if used + cost <= n then
  redis.call('SET', KEYS[1], string.format('%.0f %.0f', window, used + cost), 'PX', math.ceil(until_end / 1000))
  return { now, 1, 1, n - used - cost, until_end, 0 }
end
return { now, 0, 0, math.max(0, n - used), until_end, until_end }
