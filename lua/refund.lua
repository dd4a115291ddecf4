-- redlimit: give back what one admitted request consumed (Store::refund), at most once.
-- Twin of src/algorithm/refund.rs (and Log::refund in src/algorithm/sliding_log.rs).
--
-- KEYS[i]    the state key of limit i, as the check's (sliding-log limits share one)
-- KEYS[k+1]  the refund's marker, beside the state (same hash tag): written once, so a refund
--            repeated (a retry, another replica) finds it and gives nothing
-- ARGV[1]    '' in production: the time is Redis TIME. TEST ONLY: Unix µs to use instead.
-- ARGV[2]    the store's time of the admission (Unix µs: its reply's `now`)
-- ARGV[3]    the cost to give back (> 0)
-- ARGV[4]    twice the policy's longest period in ms (a sliding window's count weighs until
--            the end of the window after its own): the marker's TTL, and the age past which a
--            refund gives nothing (every state the admission touched is moot by then)
-- ARGV[3i+2], ARGV[3i+3], ARGV[3i+4]
--            the algorithm code (fw, sw, sl, tb, gc, cc, cw), count N and period P in µs of
--            limit i; for a calendar window (cw), instead of P, the end of the window that
--            holds the admission's time
-- Reply      1 if something was given back, else 0
--
-- Per algorithm, never below the state before the admission: a fixed window (and a calendar
-- window) takes the cost off the count of the window the admission was counted in, while it
-- lasts; a sliding window
-- the same, or off the previous count while that still weighs; a token bucket puts the tokens
-- back (a bucket is never fuller than full: the missing count stops at 0); GCRA moves the TAT
-- back by cost emission intervals of its state, never before now; the sliding log takes the
-- cost off the members of the admission's time (all members at one time are one entry, as in
-- the memory store), renumbering the later members' running totals.

if not redis.REDIS_VERSION then
  pcall(redis.replicate_commands)
end

local now, slack = tonumber(ARGV[1]), 60000
if not now then
  local t = redis.call('TIME')
  now, slack = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
end
local at, cost, longest_ms = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local k = #KEYS - 1
if cost <= 0 or at + longest_ms * 1000 <= now then
  return 0
end
if not redis.call('SET', KEYS[k + 1], 1, 'NX', 'PX', longest_ms + slack) then
  return 0
end

local function log_refund(key, span)
  if at + span <= now then
    return false
  end
  local group = redis.call('ZRANGEBYSCORE', key, at, at)
  if not group[1] then
    return false
  end
  -- The oldest member is the base (a total, not an entry): never part of the group.
  local first, skip = redis.call('ZRANK', key, group[1]), 0
  if first == 0 then
    first, skip = 1, 1
  end
  if #group <= skip then
    return false
  end
  local before = tonumber(redis.call('ZRANGE', key, first - 1, first - 1)[1]) - 1e15
  local units = tonumber(group[#group]) - 1e15 - before
  local back = math.min(units, cost)
  if back <= 0 then
    return false
  end
  local rest = redis.call('ZRANGE', key, first, -1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', key, first, -1)
  if units > back then
    redis.call('ZADD', key, at, 1e15 + before + units - back)
  end
  for j = 2 * (#group - skip) + 1, #rest, 2 do
    redis.call('ZADD', key, tonumber(rest[j + 1]), tonumber(rest[j]) - back)
  end
  return true
end

local given, span = false, 0
for i = 1, k do
  if ARGV[3 * i + 2] == 'sl' then
    span = math.max(span, tonumber(ARGV[3 * i + 4]))
  end
end
if span > 0 then
  for i = 1, k do
    if ARGV[3 * i + 2] == 'sl' then
      given = log_refund(KEYS[i], span)
      break
    end
  end
end
for i = 1, k do
  local key, code, n, p = KEYS[i], ARGV[3 * i + 2], tonumber(ARGV[3 * i + 3]), tonumber(ARGV[3 * i + 4])
  -- A concurrency limit's leases (cc) go back by their release, not by a refund.
  local v = code ~= 'sl' and code ~= 'cc' and redis.call('GET', key)
  if v and (code == 'fw' or code == 'cw') then
    -- A calendar window's "period" is the end of the admission's window (the client computed
    -- it from `at`, the store's time of the admission: no clock of its own involved).
    local window_end = p
    if code == 'fw' then
      window_end = (math.floor(at / p) + 1) * p
    end
    local e, c = string.match(v, '^(%d+) (%d+)$')
    if e and tonumber(e) == window_end and tonumber(e) > now and tonumber(c) > 0 then
      redis.call('SET', key, e .. ' ' .. math.max(0, tonumber(c) - cost), 'KEEPTTL')
      given = true
    end
  elseif v and code == 'sw' then
    local e, c, pr = string.match(v, '^(%d+) (%d+) (%d+)$')
    if e then
      local stored, mine = tonumber(e), (math.floor(at / p) + 1) * p
      if stored == mine and now < stored + p and tonumber(c) > 0 then
        redis.call('SET', key, e .. ' ' .. math.max(0, tonumber(c) - cost) .. ' ' .. pr, 'KEEPTTL')
        given = true
      elseif stored == mine + p and now < stored and tonumber(pr) > 0 then
        redis.call('SET', key, e .. ' ' .. c .. ' ' .. math.max(0, tonumber(pr) - cost), 'KEEPTTL')
        given = true
      end
    end
  elseif v and code == 'tb' then
    local u, l = string.match(v, '^(%d+) (%d+)$')
    -- A bucket already full again has nothing to take back; one in debt (reservations,
    -- reserve.lua) is full again only once the whole debt is paid.
    if u and tonumber(u) > 0
        and math.floor((now - math.min(tonumber(l), now)) / math.ceil(p / n)) < tonumber(u) then
      local used = math.max(0, tonumber(u) - cost)
      if used == 0 then
        redis.call('DEL', key)
      else
        redis.call('SET', key, used .. ' ' .. l, 'KEEPTTL')
      end
      given = true
    end
  elseif v and code == 'gc' then
    local a, b = string.match(v, '^(%d+) (%d+)$')
    if a and tonumber(a) > now then
      local tat = math.max(now, tonumber(a) - cost * tonumber(b))
      if tat > now then
        redis.call('SET', key, string.format('%.0f %s', tat, b), 'PX', math.ceil((tat - now) / 1000) + slack)
      else
        redis.call('DEL', key)
      end
      given = true
    end
  end
end
if given then
  return 1
end
return 0
