-- Fixed window: N per window of P, windows aligned to the Unix epoch.
-- Twin of src/algorithm/fixed_window.rs.
--
-- KEYS     the limit's key: a string "<window index> <count>", TTL until the window ends.
-- Defines  fixed_window(key, n, p, cost, now), returning what prelude.lua describes; the state
--          is the new count, its TTL -1 (keep) when the key already holds this window (its
--          first write set the TTL until the window ends). A stored window other than the
--          current one (older, or from before a clock step back) counts nothing.

local function fixed_window(key, n, p, cost, now)
  local window = math.floor(now / p)
  local until_end = (window + 1) * p - now
  local used, ttl, same = 0, until_end, nil
  local v = redis.call('GET', key)
  if v then
    local w, c = string.match(v, '^(%d+) (%d+)$')
    if w and tonumber(w) == window then
      used, ttl, same = tonumber(c), -1, w
    end
  end
  local remaining = math.max(0, n - used)
  local reset_before = until_end
  if used == 0 then
    reset_before = 0
  end
  if cost > n then
    return false, remaining, remaining, reset_before, reset_before, -1
  elseif used + cost <= n then
    local reset_after = reset_before
    if used + cost > 0 then
      reset_after = until_end
    end
    -- In the same window its stored text is reused and the count concatenated: Lua writes
    -- numbers below 10^14 (every count: N <= 2^45) as exact integers, at half the price of
    -- string.format.
    local state
    if same then
      state = same .. ' ' .. (used + cost)
    else
      state = string.format('%.0f %.0f', window, used + cost)
    end
    return true, remaining, remaining - cost, reset_before, reset_after, 0, state, ttl
  end
  return false, remaining, remaining, reset_before, reset_before, until_end
end
