-- Local-first sync: merges what one instance counted for each key into the fleet's state, and
-- answers the fleet's state. Twin of src/store/local_first/merge.rs.
--
-- KEYS[k]  the state hash of key k: PREFIX:POLICY:{KEY}:lf
-- ARGV[1]  the least TTL (ms) of a hash written to
-- then, per key: FIELD (this instance's entry: INSTANCE.GENERATION), COUNTED (every unit it
--          counted for the key, ever), ACKED (the largest COUNTED Redis acknowledged to it),
--          SINCE (when it counted the first unit not acknowledged, in its estimate of Redis
--          time, µs), OFFERED (every unit it was asked for, admitted or not, ever), L (limits),
--          then per limit: CODE (gc | fw | sw), COUNT, PERIOD_US
-- Reply:   {now_us, then per key: TOTAL, OFFERED, then per limit: A, B, C}, where (A, B, C)
--          is (tat, 0, 0) for gc, (window end, count, 0) for fw, (window end, current,
--          previous) for sw; TOTAL and OFFERED are every unit the fleet counted and was asked
--          for while the hash lived (the others' demand, for extrapolation).
--
-- Idempotent: the hash keeps each entry's last COUNTED and adds only what is new, so a sync
-- that is lost or sent twice never counts twice. A hash that expired forgot the entries:
-- their units up to ACKED belong to state that is moot, so only the rest is added.
-- Numbers are written with %.0f: Lua's default %.14g would round microsecond timestamps.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local min_ttl = tonumber(ARGV[1])
local out = {now}
local a = 1
local function s(x) return string.format('%.0f', x) end
for k = 1, #KEYS do
  local field, counted, acked = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local since, offered = math.min(tonumber(ARGV[a + 4]), now), tonumber(ARGV[a + 5])
  local l = tonumber(ARGV[a + 6])
  a = a + 6
  local names = {field, 't', field .. ':o', 'o'}
  for i = 0, l - 1 do
    names[#names + 1] = 'a' .. i
    names[#names + 1] = 'b' .. i
    names[#names + 1] = 'c' .. i
  end
  local v = redis.call('HMGET', KEYS[k], unpack(names))
  local delta = counted - (tonumber(v[1]) or acked)
  if delta < 0 then delta = 0 end
  local total = (tonumber(v[2]) or 0) + delta
  -- The demand: a first report (or one after expiry) only sets the baseline.
  local offered_last = tonumber(v[3])
  local offered_delta = math.max(offered - (offered_last or offered), 0)
  local offered_total = (tonumber(v[4]) or 0) + offered_delta
  out[#out + 1] = total
  out[#out + 1] = offered_total
  local life = 0
  local writes = {}
  for i = 0, l - 1 do
    local code, n, p = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a = a + 3
    local x = tonumber(v[5 + 3 * i]) or 0
    local y = tonumber(v[6 + 3 * i]) or 0
    local z = tonumber(v[7 + 3 * i]) or 0
    if code == 'gc' then
      -- YARL's leaky bucket: the level never falls below the floor, units raise it by T
      -- each. The floor is when the units were counted, not now: units still in flight
      -- while the bucket looked empty would otherwise be forgiven.
      local period_t = math.max(math.ceil(p / n), 1)
      if delta > 0 then
        if x < since then x = since end
        -- The backlog is capped at a burst plus another burst or 1 s (max_backlog in view.rs):
        -- an overshoot between syncs is paid back, not forgiven.
        local burst = n * period_t
        x = math.min(x + delta * period_t, now + burst + math.max(burst, 1000000))
      end
      y, z = 0, 0
      life = math.max(life, x - now)
    else
      local e = (math.floor(now / p) + 1) * p
      if code == 'fw' then
        if x ~= e then y = 0 end
        z = 0
        life = math.max(life, e - now)
      else
        if x == e - p then
          z, y = y, 0
        elseif x ~= e then
          y, z = 0, 0
        end
        life = math.max(life, e + p - now)
      end
      x, y = e, y + delta
    end
    out[#out + 1] = x
    out[#out + 1] = y
    out[#out + 1] = z
    writes[#writes + 1] = 'a' .. i
    writes[#writes + 1] = s(x)
    writes[#writes + 1] = 'b' .. i
    writes[#writes + 1] = s(y)
    writes[#writes + 1] = 'c' .. i
    writes[#writes + 1] = s(z)
  end
  -- Nothing is created for a key nobody consumed; the demand alone updates a live hash.
  local live = v[2] ~= false
  if delta > 0 or (live and (offered_delta > 0 or not offered_last)) then
    redis.call('HSET', KEYS[k], field, s(counted), 't', s(total),
      field .. ':o', s(offered), 'o', s(offered_total), unpack(writes))
    redis.call('PEXPIRE', KEYS[k], math.max(math.ceil(life / 1000), min_ttl))
  end
end
return out
