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

local algorithms = {
  fw = { check = fixed_window_check, commit = fixed_window_commit },
  sw = { check = sliding_window_check, commit = sliding_window_commit },
  sl = { check = sliding_log_check, commit = sliding_log_commit },
  tb = { check = token_bucket_check, commit = token_bucket_commit },
  gc = { check = gcra_check, commit = gcra_commit },
}

local limits = {}
-- The longest period among the limits on each key (only sliding logs share a key).
local span = {}
for i = 1, count do
  local l = { code = ARGV[3 * i], n = tonumber(ARGV[3 * i + 1]), p = tonumber(ARGV[3 * i + 2]), key = KEYS[i] }
  l.algorithm = algorithms[l.code]
  if not l.algorithm then
    return redis.error_reply('redlimit: unknown algorithm code ' .. tostring(l.code))
  end
  span[l.key] = math.max(span[l.key] or 0, l.p)
  limits[i] = l
end

local allowed = true
for i = 1, count do
  local l = limits[i]
  l.e = l.algorithm.check(l.key, l.n, l.p, cost, now, span[l.key])
  if not l.e.ok then
    allowed = false
  end
end

if allowed then
  for i = 1, count do
    local l = limits[i]
    l.algorithm.commit(l.key, l.e, cost, now)
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
