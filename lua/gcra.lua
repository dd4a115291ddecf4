-- GCRA: one theoretical arrival time (TAT) per key. With T = ceil(P / N), a request of cost c
-- is admitted iff max(tat, now) + c*T - now <= N*T. Twin of src/algorithm/gcra.rs.
--
-- KEYS     the limit's key: the TAT in µs, TTL until the TAT (then the state is moot).
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs.
-- Reply    an eval table; commit writes the new TAT. A TAT beyond now + N*T cannot be reached
--          on a monotonic clock (a clock step back): it is clamped to now + N*T, so the wait
--          asked for is never longer than the period.

local function gcra_check(key, n, p, cost, now)
  local t = math.ceil(p / n)
  local tolerance = n * t
  local start = now
  local v = redis.call('GET', key)
  if v then
    local tat = tonumber(string.match(v, '^(%d+)$'))
    if tat and tat > now then
      start = math.min(tat, now + tolerance)
    end
  end
  local backlog = start - now
  local remaining = math.floor(math.max(0, tolerance - backlog) / t)
  local e
  if cost > n then
    e = never(remaining, backlog)
    e.tat = start
  else
    local next_tat = start + cost * t
    if next_tat - now <= tolerance then
      e = { ok = true, rb = remaining, ra = math.floor((tolerance - (next_tat - now)) / t), sb = backlog, sa = next_tat - now, retry = 0 }
    else
      e = { ok = false, rb = remaining, ra = remaining, sb = backlog, sa = backlog, retry = next_tat - now - tolerance }
    end
    e.tat = next_tat
  end
  e.state = int(e.tat)
  e.ttl = e.tat - now
  return e
end

local gcra_commit = commit_state
