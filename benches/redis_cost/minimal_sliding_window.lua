-- Minimal sliding-window counter, the baseline of benches/redis_cost/per_call.rs (same state
-- as lua/sliding_window.lua, none of its edge cases; the retry is approximate).
--
-- KEYS[1]  "<window index> <current count> <previous count>"
-- ARGV     N, P in µs, cost
-- Reply    { now, allowed, allowed, remaining, reset, retry }, integers
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n, p, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local window = math.floor(now / p)
local cur, prev = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local w, c, pr = string.match(v, '^(%d+) (%d+) (%d+)$')
  w = tonumber(w)
  if w == window then
    cur, prev = tonumber(c), tonumber(pr)
  elseif w == window - 1 then
    prev = tonumber(c)
  end
end
local elapsed = now - window * p
local used = math.ceil(prev * (p - elapsed) / p) + cur
if used + cost <= n then
  redis.call('SET', KEYS[1], string.format('%.0f %.0f %.0f', window, cur + cost, prev), 'PX', math.ceil((2 * p - elapsed) / 1000))
  return { now, 1, 1, n - used - cost, 2 * p - elapsed, 0 }
end
return { now, 0, 0, math.max(0, n - used), 2 * p - elapsed, p - elapsed }
