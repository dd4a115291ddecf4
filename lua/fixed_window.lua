-- Fixed window: N per window of P, windows aligned to the Unix epoch.
-- Twin of src/algorithm/fixed_window.rs.
--
-- KEYS     the limit's key: a string "<window end, Unix µs> <count>", TTL until the window
--          ends.
-- Defines  fixed_window(v, n, p, cost, now, debt), returning what prelude.lua describes; the
--          state is the new count, its TTL -1 (keep) when the key already holds this window
--          (its first write set the TTL until the window ends). With `debt` (a charge) the
--          cost is counted whatever the count, up to 2N (the debt cap); the window forgets it
--          at its end. A stored window that has not ended
--          counts in the current one: on an unchanged limit it is the current one (or, after a
--          clock step back, one ahead of it); on a changed one (an override, a reloaded policy)
--          its count carries over, so 90 used of 100 leaves 910 of 1000, and the next write
--          moves it to the current window's end.

local function fixed_window(v, n, p, cost, now, debt)
  local window_end = (math.floor(now / p) + 1) * p
  local until_end = window_end - now
  local used, ttl, same = 0, until_end, nil
  if v then
    local e, c = string.match(v, '^(%d+) (%d+)$')
    if e then
      local stored = e + 0
      if stored > now then
        used = c + 0
        if stored == window_end then
          ttl, same = -1, e
        end
      end
    end
  end
  local remaining = math.max(0, n - used)
  local reset_before = until_end
  if used == 0 then
    reset_before = 0
  end
  if cost > n and not debt then
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
      state = string.format('%.0f %.0f', window_end, used + cost)
    end
    return true, remaining, remaining - cost, reset_before, reset_after, 0, state, ttl
  elseif debt then
    local charged = math.max(used, math.min(used + cost, n + n))
    local state
    if same then
      state = same .. ' ' .. charged
    else
      state = string.format('%.0f %.0f', window_end, charged)
    end
    return true, remaining, 0, reset_before, until_end, 0, state, ttl
  end
  return false, remaining, remaining, reset_before, reset_before, until_end
end
