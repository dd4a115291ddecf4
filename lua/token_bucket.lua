-- Token bucket: N tokens, one more every T = ceil(P / N) µs. Twin of
-- src/algorithm/token_bucket.rs.
--
-- KEYS     the limit's key: a string "<tokens> <last>", where last is when the latest token
--          arrived (or the bucket filled); TTL until the bucket is full again.
-- ARGV     (passed by check.lua) n = N, p = P in µs, cost, now in µs.
-- Reply    an eval table; commit writes tokens and last (or deletes a full bucket). A `last`
--          in the future (a clock step back) is clamped to now, so refilling resumes at once.

local function token_bucket_check(key, n, p, cost, now)
  local t = math.ceil(p / n)
  local tokens, last = n, now
  local v = redis.call('GET', key)
  if v then
    local a, b = string.match(v, '^(%d+) (%d+)$')
    if a then
      a, b = math.min(tonumber(a), n), math.min(tonumber(b), now)
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
  local function until_full(k)
    if k >= n then
      return 0
    end
    return math.max(0, last + (n - k) * t - now)
  end
  local e
  if cost > n then
    e = never(tokens, until_full(tokens))
  elseif tokens >= cost then
    e = { ok = true, rb = tokens, ra = tokens - cost, sb = until_full(tokens), sa = until_full(tokens - cost), retry = 0 }
  else
    local retry = math.max(0, last + (cost - tokens) * t - now)
    e = { ok = false, rb = tokens, ra = tokens, sb = until_full(tokens), sa = until_full(tokens), retry = retry }
  end
  e.state = int(e.ra) .. ' ' .. int(last)
  e.ttl = e.sa
  return e
end

local token_bucket_commit = commit_state
