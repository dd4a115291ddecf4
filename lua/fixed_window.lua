-- Fixed window: N per window of P, windows aligned to the Unix epoch.
-- Twin of src/algorithm/fixed_window.rs.
--
-- KEYS     the limit's key: a string "<window index> <count>", TTL until the window ends.
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs.
-- Reply    an eval table; commit writes the new count. A stored window other than the current
--          one (older, or from before a clock step back) counts nothing.

local function fixed_window_check(key, n, p, cost, now)
  local window = math.floor(now / p)
  local used = 0
  local v = redis.call('GET', key)
  if v then
    local w, c = string.match(v, '^(%d+) (%d+)$')
    if w and tonumber(w) == window then
      used = tonumber(c)
    end
  end
  local until_end = (window + 1) * p - now
  local remaining = math.max(0, n - used)
  local reset_before = until_end
  if used == 0 then
    reset_before = 0
  end
  local e
  if cost > n then
    e = never(remaining, reset_before)
  elseif used + cost <= n then
    local sa = reset_before
    if used + cost > 0 then
      sa = until_end
    end
    e = { ok = true, rb = remaining, ra = remaining - cost, sb = reset_before, sa = sa, retry = 0 }
  else
    e = { ok = false, rb = remaining, ra = remaining, sb = reset_before, sa = reset_before, retry = until_end }
  end
  e.state = int(window) .. ' ' .. int(used + cost)
  e.ttl = until_end
  return e
end

local fixed_window_commit = commit_state
