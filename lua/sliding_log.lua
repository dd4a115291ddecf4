-- Sliding-window log: exactly N in any span of P. Twin of src/algorithm/sliding_log.rs.
--
-- KEYS     one sorted set per policy and key, shared by all the policy's sliding-log limits:
--          one member per admitted unit, scored by its time in µs. check.lua trims members
--          older than the longest log period before any check; TTL is that period.
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs.
-- Reply    an eval table (with `used`, the units in the span); commit (once per key, whatever
--          the number of log limits) adds `cost` members.

local function sliding_log_trim(key, now, max_p)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - max_p))
end

local function sliding_log_check(key, n, p, cost, now)
  local from = '(' .. int(now - p)
  local used = redis.call('ZCOUNT', key, from, '+inf')
  local reset_before = 0
  if used > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset_before = math.max(0, tonumber(newest[2]) + p - now)
  end
  local remaining = math.max(0, n - used)
  if cost > n then
    local e = never(remaining, reset_before)
    e.used = used
    return e
  end
  if used + cost <= n then
    local sa = reset_before
    if cost > 0 then
      sa = p
    end
    return { ok = true, rb = remaining, ra = remaining - cost, sb = reset_before, sa = sa, retry = 0, used = used }
  end
  -- The k-th oldest unit in the span must leave it for `cost` more to fit.
  local k = used + cost - n
  local kth = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
  local retry = math.max(0, tonumber(kth[2]) + p - now)
  return { ok = false, rb = remaining, ra = remaining, sb = reset_before, sa = reset_before, retry = retry, used = used }
end

-- `size` is the set's size: after the trim, the longest span's count is every member.
local function sliding_log_commit(key, cost, now, max_p, size)
  if cost > 0 then
    -- Member names only need to be unique: the set's size grows with every add at one `now`.
    local base = size
    local score = int(now)
    local i = 0
    while i < cost do
      local args = {}
      local upto = math.min(cost, i + 500)
      while i < upto do
        i = i + 1
        args[#args + 1] = score
        args[#args + 1] = score .. '-' .. int(base + i)
      end
      redis.call('ZADD', key, unpack(args))
    end
  end
  redis.call('PEXPIRE', key, ttl_ms(max_p))
end
