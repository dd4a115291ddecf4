-- Sliding-window log: exactly N in any span of P. Twin of src/algorithm/sliding_log.rs.
--
-- KEYS     one sorted set per policy and key, shared by all the policy's sliding-log limits:
--          one member per admission, scored by its time in µs and named by 10^15 plus the
--          running total of units admitted up to and including it (so a decision of any cost
--          writes one member, and a span's count is a subtraction). Names are numbers of 16
--          digits for any total below 8 * 10^15, so members of one time sort by them (and
--          Redis writes a number more cheaply than Lua pads a string). The newest member at or
--          before now - span (the longest log period), the base, stays for its total; older
--          ones are trimmed. TTL: span (ARGV, written by the store).
-- Opened   inline, once per call, by the tail (sliding_log_open.lua: read and trimmed),
--          leaving log_at, log_newest, log_total, log_base: the time of the decision, the
--          newest member's time and total, the base's total.
-- Defines  sliding_log(key, n, p, cost, at, newest, total, before)
--            -> ok, remaining before, remaining after, reset before, reset after, retry
--            where `before` is the total before the span of p: the base's for the longest log
--            limit; for a shorter one the tail reads the newest member at or before at - p, else
--            takes the base's. The tail admits inline (ok = used + cost <= n, with used =
--            total - before) and calls this for a denial's figures and for an inspection.
--          The tail commits once per key: ZADD at, named 10^15 + total + cost (when cost > 0;
--          into an empty log, with the marker 10^15 at the same time); PEXPIRE.

local function sliding_log(key, n, p, cost, at, newest, total, before)
  local used = total - before
  local reset_before = 0
  if used > 0 then
    reset_before = math.max(0, newest + p - at)
  end
  local remaining = math.max(0, n - used)
  if cost > n then
    return false, remaining, remaining, reset_before, reset_before, -1
  elseif used + cost <= n then
    local reset_after = reset_before
    if cost > 0 then
      reset_after = p
    end
    return true, remaining, remaining - cost, reset_before, reset_after, 0
  end
  -- The unit that must leave the span for `cost` more to fit: the first member whose total
  -- reaches `target` (totals grow with rank: binary search, O(log² n), denials only).
  local target = total + cost - n
  local lo, hi = 0, redis.call('ZCARD', key) - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if redis.call('ZRANGE', key, mid, mid)[1] - 1e15 < target then
      lo = mid + 1
    else
      hi = mid
    end
  end
  local leaves = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')[2] + 0
  return false, remaining, remaining, reset_before, reset_before, math.max(0, leaves + p - at)
end
