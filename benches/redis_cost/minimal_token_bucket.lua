-- Minimal token bucket, the baseline of benches/redis_cost/per_call.rs (same state as
-- lua/token_bucket.lua, none of its edge cases).
--
-- KEYS[1]  "<tokens> <last refill µs>"
-- ARGV     N, P in µs, cost
-- Reply    { now, allowed, allowed, remaining, reset, retry }, integers
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n, p, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local step = math.ceil(p / n)
local tokens, last = n, now
local v = redis.call('GET', KEYS[1])
if v then
  local a, b = string.match(v, '^(%d+) (%d+)$')
  if a then
    local gained = math.floor((now - b) / step)
    if a + gained < n then
      tokens, last = a + gained, b + gained * step
    end
  end
end
if tokens >= cost then
  local full = last + (n - tokens + cost) * step - now
  redis.call('SET', KEYS[1], string.format('%.0f %.0f', tokens - cost, last), 'PX', math.ceil(full / 1000))
  return { now, 1, 1, tokens - cost, full, 0 }
end
return { now, 0, 0, tokens, last + (n - tokens) * step - now, last + (cost - tokens) * step - now }
