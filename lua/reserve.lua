-- redlimit: reserve the earliest slot for a request under every limit of one policy for one
-- key (Reservations::reserve), charge units at once (a settle above the estimate), or give a
-- reservation back (a waiter cancelled before its slot, a settle below the estimate). Twin of
-- src/algorithm/reserve.rs. GCRA and token bucket limits only (the store refuses others).
--
-- KEYS[i]  the state key of limit i, as the check scripts name it (same state, same format:
--          GCRA "<TAT µs> <T µs>", token bucket "<tokens missing> <last µs>")
-- ARGV[1]  '' in production: the time is Redis TIME. TEST ONLY: Unix µs to use instead.
-- ARGV[2]  the longest wait to accept, in µs (>= 0): reserve; -1: charge (commit the costs
--          now, however long the backlog and whatever the counts: never refused, but never
--          beyond the debt cap, twice the limit, unless reservations already hold more);
--          -2: give back (undo a reservation of these costs)
-- ARGV[4i-1], ARGV[4i], ARGV[4i+1], ARGV[4i+2]
--          the algorithm code (gc, tb), count N, period P in µs and cost of limit i (a limit
--          of cost 0 is left as it is)
-- Reply    { now, wait }      reserved (the slot is now + wait, µs), charged or given back
--          { now, 0, wait }   the slot is further than the longest wait: nothing taken
--          { now, -1, 0 }     some limit never admits its cost (cost > N): nothing taken
--          (the common answer says no more than it must: its length tells it apart)
--
-- Reserve, pass one: each limit says when its cost would conform (GCRA: max(tat, now) +
-- cost*T - N*T; token bucket: when the tokens missing, refilled to now, leave room for the
-- cost, and no earlier than a slot the state already holds). The slot is the latest of them.
-- Pass two: each limit commits its cost at the slot (a GCRA TAT moves from max(tat, slot); a
-- bucket refills up to the slot, then owes the cost). Unlike a check, nothing is clamped to
-- the period: the state holds the backlog of reservations. A check of the same key clamps it
-- on read and sees no room while reservations wait (a token bucket reserved beside a slower
-- limit excepted: a key is meant for checks or for reservations, not both).
--
-- Give back: as a refund does (lua/refund.lua): a GCRA TAT moves back by cost intervals of
-- its own T, never before now; a bucket gets its tokens back, never fuller than full. Every
-- reservation made behind a cancelled one before its slot waited behind it (the backlog
-- never drained meanwhile), so for the limit that set the slot that is the TAT the state
-- would hold had the cancelled one never been made (src/store/reserve.rs says more).

if not redis.REDIS_VERSION then
  pcall(redis.replicate_commands)
end

local now, slack = tonumber(ARGV[1]), 60000
if not now then
  local t = redis.call('TIME')
  now, slack = tonumber(t[1]) * 1000000 + tonumber(t[2]), 0
end
local mode = tonumber(ARGV[2])
local k = #KEYS

local function save(key, state, ttl)
  if ttl > 0 then
    redis.call('SET', key, state, 'PX', math.ceil(ttl / 1000) + slack)
  else
    redis.call('DEL', key)
  end
end

if mode == -2 then
  for i = 1, k do
    local code, n, p, cost = ARGV[4 * i - 1], tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 1]), tonumber(ARGV[4 * i + 2])
    local v = cost > 0 and redis.call('GET', KEYS[i])
    local x, y
    if v then
      x, y = string.match(v, '^(%d+) (%d+)$')
    end
    if x and code == 'gc' and tonumber(x) > now then
      local tat = math.max(now, tonumber(x) - cost * tonumber(y))
      save(KEYS[i], string.format('%.0f %s', tat, y), tat - now)
    elseif x and code == 'tb' and tonumber(x) > 0
        and math.floor((now - math.min(tonumber(y), now)) / math.ceil(p / n)) < tonumber(x) then
      local used = math.max(0, tonumber(x) - cost)
      if used == 0 then
        redis.call('DEL', KEYS[i])
      else
        redis.call('SET', KEYS[i], string.format('%.0f %s', used, y), 'KEEPTTL')
      end
    end
  end
  return { now, 0 }
end

-- Per limit: N, T, cost, and the state refilled to now (GCRA: a = start; bucket: a = used,
-- b = last).
local code, n, t, c, a, b = {}, {}, {}, {}, {}, {}
local slot = now
for i = 1, k do
  code[i], n[i], c[i] = ARGV[4 * i - 1], tonumber(ARGV[4 * i]), tonumber(ARGV[4 * i + 2])
  t[i] = math.ceil(tonumber(ARGV[4 * i + 1]) / n[i])
  if c[i] > n[i] and mode >= 0 then
    return { now, -1, 0 }
  end
  local v = c[i] > 0 and redis.call('GET', KEYS[i])
  local x, y
  if v then
    x, y = string.match(v, '^(%d+) (%d+)$')
  end
  if code[i] == 'gc' then
    local start = now
    if x and tonumber(x) > now then
      local backlog, told = tonumber(x) - now, tonumber(y)
      if told ~= t[i] and told > 0 then
        backlog = math.ceil(backlog * t[i] / told)
      end
      start = now + backlog
    end
    a[i] = start
    slot = math.max(slot, start + c[i] * t[i] - n[i] * t[i])
  else
    local used, last = 0, now
    if x and tonumber(x) > 0 then
      used, last = tonumber(x), tonumber(y)
      if last < now then
        local gained = math.floor((now - last) / t[i])
        if gained >= used then
          used, last = 0, now
        else
          used, last = used - gained, last + gained * t[i]
        end
      end
    end
    a[i], b[i] = used, last
    if used + c[i] <= n[i] then
      slot = math.max(slot, last)
    else
      slot = math.max(slot, last + (used + c[i] - n[i]) * t[i])
    end
  end
end
if mode < 0 then
  slot = now
elseif slot - now > mode then
  return { now, 0, slot - now }
end

for i = 1, k do
  if c[i] > 0 then
    if code[i] == 'gc' then
      local tat = math.max(a[i], slot) + c[i] * t[i]
      if mode < 0 then
        tat = math.min(tat, math.max(a[i], now + 2 * n[i] * t[i]))
      end
      save(KEYS[i], string.format('%.0f %.0f', tat, t[i]), tat - now)
    else
      local used, last = a[i], b[i]
      if slot > last then
        local gained = math.floor((slot - last) / t[i])
        if gained >= used then
          used, last = 0, slot
        else
          used, last = used - gained, last + gained * t[i]
        end
      end
      used = used + c[i]
      if mode < 0 then
        -- Full again no later than now + 2N*T, or when reservations had it full if later.
        used = math.min(used, math.max(a[i], math.floor((now + 2 * n[i] * t[i] - last) / t[i])))
      end
      save(KEYS[i], string.format('%.0f %.0f', used, last), last + used * t[i] - now)
    end
  end
end
return { now, slot - now }
