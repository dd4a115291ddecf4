-- GCRA: one theoretical arrival time (TAT) per key. With T = ceil(P / N), a request of cost c
-- is admitted iff max(tat, now) + c*T - now <= N*T. Twin of src/algorithm/gcra.rs.
--
-- KEYS     the limit's key: a string "<TAT in µs> <T in µs>", TTL until the TAT (then the
--          state is moot).
-- Defines  gcra(v, n, p, cost, now, debt), returning what prelude.lua describes; the state
--          is the new TAT and this limit's T. Anything else reads as no state. A T other than
--          this limit's (the limit changed: an override, a reloaded policy) rescales the
--          backlog, ceil(backlog * T / T_old), so the units used are kept (90 used of 100
--          leaves 910 of 1000). With `debt` (a charge) the cost lands whatever the backlog:
--          past N*T the key is in debt, checks refused until time pays it; the backlog stops
--          at 2*N*T (the debt cap). A TAT beyond now + 2*N*T cannot be reached (a clock step
--          back): it is clamped there, so the wait asked for is never longer than the time
--          the most debt takes to pay.

local function gcra(v, n, p, cost, now, debt)
  local t = math.ceil(p / n)
  local tolerance = n * t
  local start = now
  if v then
    local a, b = string.match(v, '^(%d+) (%d+)$')
    if a then
      local backlog, told = a - now, b + 0
      if backlog > 0 then
        if told ~= t and told > 0 then
          backlog = math.ceil(backlog * t / told)
        end
        start = now + math.min(backlog, tolerance + tolerance)
      end
    end
  end
  local backlog = start - now
  local remaining = math.floor(math.max(0, tolerance - backlog) / t)
  if cost > n and not debt then
    return false, remaining, remaining, backlog, backlog, -1
  end
  local after = backlog + cost * t
  if after <= tolerance then
    local tat = now + after
    local high = math.floor(tat / 1e9)
    local state
    if high > 0 and high < 4000000 and t < 2147483648 then
      -- Integers below 2^31 (what %d takes on every platform) cost Redis half what %.0f does:
      -- the TAT as its digits above and below 10^9 (an exact split below 4 * 10^15).
      state = string.format('%d%09d %d', high, tat - high * 1e9, t)
    else
      state = string.format('%.0f %.0f', tat, t)
    end
    return true, remaining, math.floor((tolerance - after) / t), backlog, after, 0, state, after
  elseif debt then
    after = math.min(after, tolerance + tolerance)
    return true, remaining, 0, backlog, after, 0, string.format('%.0f %.0f', now + after, t), after
  end
  return false, remaining, remaining, backlog, backlog, after - tolerance
end
