-- Local-first sync: merges what one instance counted for each key into the key's exact state
-- (the very keys the exact scripts check: gcra.lua, token_bucket.lua, fixed_window.lua,
-- sliding_window.lua), and answers that state. Twin of src/store/local_first/merge.rs.
--
-- Per key k, 1 + L keys: the bookkeeping hash PREFIX:POLICY:{KEY}:lf, then the state key of
--          each of its L limits (PREFIX:POLICY:{KEY}:gc0, ...), all of one hash tag.
-- ARGV[1]  the least TTL (ms) of a bookkeeping hash, or a GCRA or token-bucket state, written to
-- then, per key: FIELD (this instance's entry: INSTANCE.GENERATION), COUNTED (every unit it
--          counted for the key, ever, alone while cut off from Redis included), ACKED (what
--          to take as counted already if the hash has no FIELD: the largest COUNTED Redis
--          acknowledged to it, plus the units it counted alone since),
--          SINCE (when it counted the first unit not acknowledged, in its estimate of Redis
--          time, µs), OFFERED (every unit it was asked for, admitted or not, ever), L (limits),
--          then per limit: CODE (gc | tb | fw | sw), COUNT, PERIOD_US
-- Reply:   {now_us, then per key: TOTAL, OFFERED, then per limit: A, B, C}, where (A, B, C)
--          is (tat, 0, 0) for gc and tb (a token bucket as its GCRA twin: the time it is full
--          again; 0 when it is), (window end, count, 0) for fw, (window end, current,
--          previous) for sw; TOTAL and OFFERED are every unit the instances counted and were
--          asked for while the hash lived (the others' demand, for extrapolation).
--
-- Idempotent: the hash keeps each entry's last COUNTED and adds only what is new, so a sync
-- that is lost or sent twice never counts twice. What an instance admitted alone (its syncs
-- failing) reaches the state with its first sync after, from when it was counted: the fleet
-- takes no second budget. A hash that expired (or a restart) forgot the entries: their units
-- up to ACKED are in the state already, or with it gone, so only the rest is added.
--
-- New units are forced into the state, never refused: GCRA's TAT moves by units x T from
-- max(TAT, SINCE), a token bucket's missing tokens likewise (as its twin TAT, at most two
-- buckets: its state holds a full bucket and as much again owed, the debt of a charge), a
-- window's count grows. The state is read as the exact
-- scripts read it (a changed T rescales a GCRA backlog, a window that has not ended carries
-- its counts), so a key decided exactly on one instance and locally on another is counted
-- once. Numbers are written with %.0f: Lua's default %.14g would round microsecond
-- timestamps.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local min_ttl = tonumber(ARGV[1])
local out = {now}
local a, key = 1, 0
local function s(x) return string.format('%.0f', x) end
while a < #ARGV do
  key = key + 1
  local hash = KEYS[key]
  local field, counted, acked = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local since, offered = math.min(tonumber(ARGV[a + 4]), now), tonumber(ARGV[a + 5])
  local l = tonumber(ARGV[a + 6])
  a = a + 6
  local v = redis.call('HMGET', hash, field, 't', field .. ':o', 'o')
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
  for i = 1, l do
    local code, n, p = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a = a + 3
    key = key + 1
    local state = redis.call('GET', KEYS[key])
    local x, y, z = 0, 0, 0
    if code == 'gc' or code == 'tb' then
      local period_t = math.max(math.ceil(p / n), 1)
      local tat = 0
      if state then
        local e, f = string.match(state, '^(%d+) (%d+)$')
        if e then
          e, f = tonumber(e), tonumber(f)
          if code == 'gc' then
            tat = e
            if e > now then
              local backlog = e - now
              if f ~= period_t and f > 0 then backlog = math.ceil(backlog * period_t / f) end
              tat = now + backlog
            end
          else
            -- Missing tokens as of `last`: the bucket is full again at last + used x T.
            -- At most twice the bucket missing: one used, one owed (token_bucket.lua's debt).
            tat = math.min(f, now) + math.min(e, n + n) * period_t
          end
        end
      end
      if delta > 0 then
        -- The floor is when the units were counted, not now: units still in flight while
        -- the bucket looked empty would otherwise be forgiven. A GCRA backlog is capped at a
        -- burst plus another burst or 1 s (max_backlog in view.rs), a token bucket at two
        -- buckets (its debt cap): an overshoot between syncs is paid back, not forgiven.
        local burst = n * period_t
        local cap = now + burst
        if code == 'gc' then cap = cap + math.max(burst, 1000000) else cap = cap + burst end
        tat = math.min(math.max(tat, since) + delta * period_t, cap)
        -- Written even when already drained (the TAT in the past): a sync of units counted
        -- before it floors at it, not at its own SINCE, so the fleet's units add up. The
        -- exact scripts read such a state as empty, as it is.
        local ttl = math.max(math.ceil((tat - now) / 1000), min_ttl)
        if code == 'gc' then
          redis.call('SET', KEYS[key], s(tat) .. ' ' .. s(period_t), 'PX', ttl)
        else
          local used = math.max(math.ceil((tat - now) / period_t), 0)
          redis.call('SET', KEYS[key], s(used) .. ' ' .. s(tat - used * period_t), 'PX', ttl)
        end
      end
      if tat > now then x = tat end
      life = math.max(life, x - now)
    else
      local start = math.floor(now / p) * p
      local e = start + p
      local stored, c, pr
      if state then stored, c, pr = string.match(state, '^(%d+) (%d+) ?(%d*)$') end
      stored = tonumber(stored)
      if code == 'fw' then
        if stored and pr == '' and stored > now then y = tonumber(c) end
        if delta > 0 then
          y = y + delta
          redis.call('SET', KEYS[key], s(e) .. ' ' .. s(y), 'PX', math.ceil((e - now) / 1000))
        end
        life = math.max(life, e - now)
      else
        if stored and pr ~= '' then
          if stored > now then
            y, z = tonumber(c), tonumber(pr)
          elseif stored == start then
            z = tonumber(c)
          end
        end
        if delta > 0 then
          y = y + delta
          redis.call('SET', KEYS[key], s(e) .. ' ' .. s(y) .. ' ' .. s(z), 'PX', math.ceil((e + p - now) / 1000))
        end
        life = math.max(life, e + p - now)
      end
      x = e
    end
    out[#out + 1] = x
    out[#out + 1] = y
    out[#out + 1] = z
  end
  -- Nothing is written for a key nobody consumed; the demand alone updates a live hash.
  local live = v[2] ~= false
  if delta > 0 or (live and (offered_delta > 0 or not offered_last)) then
    redis.call('HSET', hash, field, s(counted), 't', s(total),
      field .. ':o', s(offered), 'o', s(offered_total))
    redis.call('PEXPIRE', hash, math.max(math.ceil(life / 1000), min_ttl))
  end
end
return out
