-- Sliding-window counter: prev * (P - elapsed) / P (rounded up) + cur, over epoch-aligned
-- windows of P. Twin of src/algorithm/sliding_window.rs (same double operations, same order).
--
-- KEYS     the limit's key: a string "<window index> <current count> <previous count>",
--          TTL until the end of the next window (when the current count stops weighing).
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs.
-- Reply    an eval table; commit writes the counts. A stored window later than the current one
--          (from before a clock step back) counts nothing.

local function sliding_window_weighted(prev, p, elapsed)
  return math.ceil(prev * (p - elapsed) / p)
end

-- The least elapsed time in a window at which the weight of `prev` is at most k:
-- prev * (P - e) / P <= k  <=>  e >= P - k * P / prev.
local function sliding_window_decayed_at(prev, p, k)
  if prev <= k then
    return 0
  end
  return math.max(0, p - math.floor(k * p / prev))
end

local function sliding_window_check(key, n, p, cost, now)
  local window = math.floor(now / p)
  local cur, prev = 0, 0
  local v = redis.call('GET', key)
  if v then
    local w, c, pr = string.match(v, '^(%d+) (%d+) (%d+)$')
    if w then
      w = tonumber(w)
      if w == window then
        cur, prev = tonumber(c), tonumber(pr)
      elseif w + 1 == window then
        prev = tonumber(c)
      end
    end
  end
  local start = window * p
  local elapsed = now - start
  local used = sliding_window_weighted(prev, p, elapsed) + cur
  local remaining = math.max(0, n - used)
  local function until_free(c)
    if c > 0 then
      return start + 2 * p - now
    elseif prev > 0 then
      return start + p - now
    end
    return 0
  end
  local e
  if cost > n then
    e = never(remaining, until_free(cur))
  elseif used + cost <= n then
    e = { ok = true, rb = remaining, ra = remaining - cost, sb = until_free(cur), sa = until_free(cur + cost), retry = 0 }
  else
    local retry
    if cur + cost <= n then
      retry = start + sliding_window_decayed_at(prev, p, n - cur - cost) - now
    else
      retry = start + p + sliding_window_decayed_at(cur, p, n - cost) - now
    end
    e = { ok = false, rb = remaining, ra = remaining, sb = until_free(cur), sa = until_free(cur), retry = retry }
  end
  e.state = int(window) .. ' ' .. int(cur + cost) .. ' ' .. int(prev)
  e.ttl = start + 2 * p - now
  return e
end

local sliding_window_commit = commit_state
