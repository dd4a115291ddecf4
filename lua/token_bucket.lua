-- Token bucket: N tokens, one more every T = ceil(P / N) µs. Twin of
-- src/algorithm/token_bucket.rs.
--
-- KEYS     the limit's key: a string "<used> <last>", the tokens missing from the bucket
--          and when the latest token arrived (or the bucket filled); TTL until the bucket is
--          full again. Missing tokens, not tokens left, so that a changed limit (an override, a
--          reloaded policy) keeps the units used: 90 missing of 100 leaves 910 of 1000, none
--          of 50; refilling continues from `last` at the new rate.
-- Defines  token_bucket(v, n, p, cost, now, debt), returning what prelude.lua describes; the
--          state is the tokens missing and `last` (a full bucket has a TTL of 0: it is
--          deleted). A `last` in the future (a clock step back) is clamped to now, so
--          refilling resumes at once. With `debt` (a charge) the tokens are taken whatever is
--          left: below zero the bucket is in debt, checks refused until it refills; it never
--          goes more than N below zero (the debt cap: at most 2N missing, also on read).

local function token_bucket(v, n, p, cost, now, debt)
  local t = math.ceil(p / n)
  local tokens, last = n, now
  if v then
    local a, b = string.match(v, '^(%d+) (%d+)$')
    if a then
      a, b = n - math.min(a + 0, n + n), math.min(b + 0, now)
      if a < n then
        local gained = math.floor((now - b) / t)
        if gained >= n - a then
          tokens, last = n, now
        else
          tokens, last = a + gained, b + gained * t
        end
      end
    end
  end
  -- Until the bucket is full again (inline, not a helper: a closure per call costs).
  local full_before = 0
  if tokens < n then
    full_before = math.max(0, last + (n - tokens) * t - now)
  end
  if cost > n and not debt then
    -- Tokens below zero (a debt) report none left (inline: a denial's path is measured too).
    local left_now = tokens > 0 and tokens or 0
    return false, left_now, left_now, full_before, full_before, -1
  elseif tokens >= cost then
    local left = tokens - cost
    local full_after = 0
    if left < n then
      full_after = math.max(0, last + (n - left) * t - now)
    end
    return true, tokens, left, full_before, full_after, 0,
      string.format('%.0f %.0f', n - left, last), full_after
  end
  local left_now = tokens > 0 and tokens or 0
  if debt then
    local left = math.max(tokens - cost, -n)
    local full_after = last + (n - left) * t - now
    return true, left_now, 0, full_before, full_after, 0,
      string.format('%.0f %.0f', n - left, last), full_after
  end
  return false, left_now, left_now, full_before, full_before,
    math.max(0, last + (cost - tokens) * t - now)
end
