-- GCRA: one theoretical arrival time (TAT) per key. With T = ceil(P / N), a request of cost c
-- is admitted iff max(tat, now) + c*T - now <= N*T. Twin of src/algorithm/gcra.rs.
--
-- KEYS     the limit's key: the TAT in µs, TTL until the TAT (then the state is moot).
-- Defines  gcra(key, n, p, cost, now), returning what prelude.lua describes; the state is the
--          new TAT, a number (Redis writes it as an exact integer). Anything but a number
--          reads as no state; a TAT beyond now + N*T cannot be reached on a monotonic clock (a
--          clock step back): it is clamped to now + N*T, so the wait asked for is never longer
--          than the period.

local function gcra(key, n, p, cost, now)
  local t = math.ceil(p / n)
  local tolerance = n * t
  local start = now
  -- tonumber, not a pattern: half the price, and floor() makes any number a whole µs.
  local tat = tonumber(redis.call('GET', key))
  if tat and tat > now then
    start = math.min(math.floor(tat), now + tolerance)
  end
  local backlog = start - now
  local remaining = math.floor(math.max(0, tolerance - backlog) / t)
  if cost > n then
    return false, remaining, remaining, backlog, backlog, -1
  end
  local after = backlog + cost * t
  if after <= tolerance then
    return true, remaining, math.floor((tolerance - after) / t), backlog, after, 0, now + after, after
  end
  return false, remaining, remaining, backlog, backlog, after - tolerance
end
