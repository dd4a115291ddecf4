-- The tail of the assembled script: evaluate every limit, then commit all or none.
-- Contract: see prelude.lua.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
local count = (#ARGV - 2) / 3

local limits = {}
local max_log = 0
for i = 1, count do
  local l = { code = ARGV[3 * i], n = tonumber(ARGV[3 * i + 1]), p = tonumber(ARGV[3 * i + 2]), key = KEYS[i] }
  if l.code == 'sl' and l.p > max_log then
    max_log = l.p
  end
  limits[i] = l
end

local checks = {
  fw = fixed_window_check,
  sw = sliding_window_check,
  sl = sliding_log_check,
  tb = token_bucket_check,
  gc = gcra_check,
}

local trimmed = {}
local allowed = true
for i = 1, count do
  local l = limits[i]
  if l.code == 'sl' and not trimmed[l.key] then
    sliding_log_trim(l.key, now, max_log)
    trimmed[l.key] = true
  end
  local check = checks[l.code]
  if not check then
    return redis.error_reply('redlimit: unknown algorithm code ' .. tostring(l.code))
  end
  l.e = check(l.key, l.n, l.p, cost, now)
  if not l.e.ok then
    allowed = false
  end
end

if allowed then
  -- The size of each log: the count of its longest span (the trim left nothing older).
  local log_size = {}
  for i = 1, count do
    local l = limits[i]
    if l.code == 'sl' and l.p == max_log then
      log_size[l.key] = l.e.used
    end
  end
  local logged = {}
  for i = 1, count do
    local l = limits[i]
    if l.code == 'fw' then
      fixed_window_commit(l.key, l.e)
    elseif l.code == 'sw' then
      sliding_window_commit(l.key, l.e)
    elseif l.code == 'sl' then
      if not logged[l.key] then
        sliding_log_commit(l.key, cost, now, max_log, log_size[l.key])
        logged[l.key] = true
      end
    elseif l.code == 'tb' then
      token_bucket_commit(l.key, l.e)
    else
      gcra_commit(l.key, l.e, now)
    end
  end
end

local reply = { now, allowed and 1 or 0 }
for i = 1, count do
  local e = limits[i].e
  local remaining, reset = e.rb, e.sb
  if allowed then
    remaining, reset = e.ra, e.sa
  end
  reply[#reply + 1] = e.ok and 1 or 0
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
  reply[#reply + 1] = e.retry
end
return reply
