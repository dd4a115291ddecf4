-- Sliding-window counter: prev * (P - elapsed) / P (rounded up) + cur, over epoch-aligned
-- windows of P. Twin of src/algorithm/sliding_window.rs (same double operations, same order).
--
-- KEYS     the limit's key: a string "<window end, Unix µs> <current count> <previous
--          count>", TTL until the end of the next window (when the current count stops
--          weighing).
-- Defines  sliding_window(v, n, p, cost, now, debt), returning what prelude.lua describes;
--          the state is the new counts, its TTL -1 (keep) when the key already holds this
--          window (its first write set the TTL until the next window ends). With `debt` (a
--          charge) the cost is counted whatever the weighted count, up to a weighted count of
--          2N (the debt cap); it decays in the next window. A stored window that has
--          not ended counts as the current one: on an unchanged limit it is (or, after a clock
--          step back, is ahead of it); on a changed one (an override, a reloaded policy) both
--          counts carry over, so 90 used of 100 leaves 910 of 1000. One that ended is the
--          previous window only if it ended where the current one began.

local function sliding_window(v, n, p, cost, now, debt)
  local window = math.floor(now / p)
  local start = window * p
  local cur, prev, same, same_prev = 0, 0, nil, nil
  if v then
    local e, c, pr = string.match(v, '^(%d+) (%d+) (%d+)$')
    if e then
      local stored = e + 0
      if stored > now then
        cur, prev = c + 0, pr + 0
        if stored == start + p then
          same, same_prev = e, pr
        end
      elseif stored == start then
        prev = c + 0
      end
    end
  end
  local elapsed = now - start
  local used = math.ceil(prev * (p - elapsed) / p) + cur
  local remaining = math.max(0, n - used)
  -- Until fully free with `c` in the current window: the end of the next window while the
  -- current count weighs, of this one while only the previous does (inline, not a helper: a
  -- closure per call costs).
  local next_end = start + 2 * p - now
  local free_before = 0
  if cur > 0 then
    free_before = next_end
  elseif prev > 0 then
    free_before = start + p - now
  end
  if cost > n and not debt then
    return false, remaining, remaining, free_before, free_before, -1
  elseif used + cost <= n then
    local free_after = free_before
    if cost > 0 then
      free_after = next_end
    end
    -- In the same window the stored text is reused around the new count (Lua writes numbers
    -- below 10^14, every count, as exact integers), and the TTL kept.
    if same then
      return true, remaining, remaining - cost, free_before, free_after, 0,
        same .. ' ' .. (cur + cost) .. ' ' .. same_prev, -1
    end
    return true, remaining, remaining - cost, free_before, free_after, 0,
      string.format('%.0f %.0f %.0f', start + p, cur + cost, prev), next_end
  elseif debt then
    local charged = cur + math.max(0, math.min(cost, n + n - used))
    if same then
      return true, remaining, 0, free_before, next_end, 0, same .. ' ' .. charged .. ' ' .. same_prev, -1
    end
    return true, remaining, 0, free_before, next_end, 0,
      string.format('%.0f %.0f %.0f', start + p, charged, prev), next_end
  end
  -- The least elapsed time in a window at which the weight of a count m is at most k:
  -- m * (P - e) / P <= k  <=>  e >= P - k * P / m.
  local retry
  if cur + cost <= n then
    local k, decayed = n - cur - cost, 0
    if prev > k then
      decayed = math.max(0, p - math.floor(k * p / prev))
    end
    retry = start + decayed - now
  else
    local k, decayed = n - cost, 0
    if cur > k then
      decayed = math.max(0, p - math.floor(k * p / cur))
    end
    retry = start + p + decayed - now
  end
  return false, remaining, remaining, free_before, free_before, retry
end
