-- Sliding-window counter: prev * (P - elapsed) / P (rounded up) + cur, over epoch-aligned
-- windows of P. Twin of src/algorithm/sliding_window.rs (same double operations, same order).
--
-- KEYS     the limit's key: a string "<window index> <current count> <previous count>",
--          TTL until the end of the next window (when the current count stops weighing).
-- Defines  sliding_window(key, n, p, cost, now), returning what prelude.lua describes; the
--          state is the new counts, its TTL -1 (keep) when the key already holds this window
--          (its first write set the TTL until the next window ends). A stored window later
--          than the current one (from before a clock step back) counts nothing.

local function sliding_window(key, n, p, cost, now)
  local window = math.floor(now / p)
  local cur, prev, same, same_prev = 0, 0, nil, nil
  local v = redis.call('GET', key)
  if v then
    local w, c, pr = string.match(v, '^(%d+) (%d+) (%d+)$')
    if w then
      local stored = tonumber(w)
      if stored == window then
        cur, prev, same, same_prev = tonumber(c), tonumber(pr), w, pr
      elseif stored + 1 == window then
        prev = tonumber(c)
      end
    end
  end
  local start = window * p
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
  if cost > n then
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
      string.format('%.0f %.0f %.0f', window, cur + cost, prev), next_end
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
