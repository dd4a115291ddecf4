-- Sliding-window log: exactly N in any span of P. Twin of src/algorithm/sliding_log.rs.
--
-- KEYS     one sorted set per policy and key, shared by all the policy's sliding-log limits:
--          one member per admission, scored by its time in µs and named by the running total
--          of units admitted up to and including it, zero-padded to 16 digits so that members
--          of one time sort by it (so a decision of any cost writes one member, and a span's
--          count is a subtraction). The newest member at or before
--          now - span (the longest log period) stays as the base of the totals; older ones are
--          trimmed. TTL: the longest log period.
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs, span.
-- Reply    an eval table; commit (once per key, whatever the number of log limits) adds one
--          member. A newest member later than now (a clock step back) makes the log read
--          "now" as that member's time, so no wait asked for exceeds the period.

-- Per key, within this call: the log's newest time and total, read once.
local sliding_log_seen = {}

-- The running total named by the member at `rank`.
local function sliding_log_total_at(key, rank)
  return tonumber(redis.call('ZRANGE', key, rank, rank)[1])
end

-- Trims what no span can count (keeping the base) and reads the newest member, once per key.
local function sliding_log_open(key, now, span)
  local log = sliding_log_seen[key]
  if log then
    return log
  end
  log = { newest = 0, total = 0 }
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #newest == 2 then
    log.total, log.newest = tonumber(newest[1]), tonumber(newest[2])
  end
  local at = math.max(now, log.newest)
  local outside = redis.call('ZCOUNT', key, '-inf', int(at - span))
  if outside > 1 then
    redis.call('ZREMRANGEBYRANK', key, 0, outside - 2)
  end
  sliding_log_seen[key] = log
  return log
end

local function sliding_log_check(key, n, p, cost, now, span)
  local log = sliding_log_open(key, now, span)
  now = math.max(now, log.newest)
  -- Members at or before now - p are outside this span; the newest of them holds the total
  -- before it.
  local first = redis.call('ZCOUNT', key, '-inf', int(now - p))
  local before = 0
  if first > 0 then
    before = sliding_log_total_at(key, first - 1)
  end
  local used = log.total - before
  local reset_before = 0
  if used > 0 then
    reset_before = math.max(0, log.newest + p - now)
  end
  local remaining = math.max(0, n - used)
  local e
  if cost > n then
    e = never(remaining, reset_before)
  elseif used + cost <= n then
    local sa = reset_before
    if cost > 0 then
      sa = p
    end
    e = { ok = true, rb = remaining, ra = remaining - cost, sb = reset_before, sa = sa, retry = 0 }
  else
    -- The unit that must leave the span for `cost` more to fit: the first member whose total
    -- reaches `target` (totals grow with rank: binary search, O(log² n), denials only).
    local target = before + used + cost - n
    local lo, hi = first, redis.call('ZCARD', key) - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if sliding_log_total_at(key, mid) < target then
        lo = mid + 1
      else
        hi = mid
      end
    end
    local at = tonumber(redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')[2])
    e = { ok = false, rb = remaining, ra = remaining, sb = reset_before, sa = reset_before, retry = math.max(0, at + p - now) }
  end
  e.at = now
  e.ttl = span
  return e
end

local sliding_log_committed = {}

local function sliding_log_commit(key, e, cost, now)
  if sliding_log_committed[key] then
    return
  end
  sliding_log_committed[key] = true
  if cost > 0 then
    local log = sliding_log_seen[key]
    redis.call('ZADD', key, int(e.at), string.format('%016.0f', log.total + cost))
  end
  redis.call('PEXPIRE', key, ttl_ms(e.ttl))
end
