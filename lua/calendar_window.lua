-- Calendar window: N per window of a calendar in a time zone (days, weeks, months, years from
-- an anchor). Twin of src/algorithm/calendar_window.rs; the rules are the fixed window's
-- (fixed_window.lua), only where the window ends differs.
--
-- KEYS     the limit's key, as a fixed window's: "<window end, Unix µs> <count>", TTL until
--          the window ends.
-- Period   the limit's period argument is text, not a number: the boundaries the client
--          computed around its own clock (it has the time zone database; Lua has not),
--          space-separated, ascending: the start of the previous window, then the ends of the
--          previous, current and next windows. The window is the one of them that holds
--          `now` (Redis TIME): a client clock off by up to a window picks right.
-- Defines  calendar_window(v, n, bounds, cost, now, debt), returning what prelude.lua
--          describes. If no window holds `now` (the client's clock is more than a window
--          away from Redis's), it raises CLOCKSKEW: the call fails with that error, nothing
--          is written, and the store reports a clock skew.

local function calendar_window(v, n, bounds, cost, now, debt)
  local window_end, first
  for b in string.gmatch(bounds, '%d+') do
    b = b + 0
    if not first then
      first = b
    elseif b > now then
      window_end = b
      break
    end
  end
  if not window_end or now < first then
    error({ err = 'CLOCKSKEW redlimit: Redis time ' .. string.format('%.0f', now)
      .. ' is outside the calendar windows ' .. bounds })
  end
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
