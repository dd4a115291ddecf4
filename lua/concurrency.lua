-- In-flight (concurrency) limit: at most N leases held per key. Twin of
-- src/algorithm/concurrency.rs.
--
-- KEYS     one sorted set per policy and key: one member per lease held, named by its lease id
--          (unique per request, made by the store), scored by the time it was taken in µs. A
--          lease lapses P (the lease timeout) after it was taken; lapsed ones are trimmed here.
--          TTL: P after the newest lease (the tail's PEXPIRE).
-- ARGV     the lease id of this request: the script's last argument (the tail reads it).
-- Defines  concurrency(key, n, p, cost, now)
--            -> ok, remaining before, remaining after, reset before, reset after, retry
--          (as prelude.lua describes, without a state: if every limit is ok and cost > 0, the
--          tail commits with ZADD key now lease and PEXPIRE). A request holds one slot whatever
--          its cost (cost 0 holds none). Reset: until the newest lease lapses. Retry (a denial):
--          until the oldest lease lapses, at most 1 s, since a slot usually comes back sooner,
--          when a response ends. The release of a lease is one ZREM (never twice: a member
--          removed or trimmed is gone).

local function concurrency(key, n, p, cost, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - p)
  local used = redis.call('ZCARD', key)
  local units = math.min(cost, 1)
  local remaining = math.max(0, n - used)
  local reset = 0
  if used > 0 then
    local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2] + 0
    reset = math.min(p, math.max(0, newest + p - now))
  end
  if used + units <= n then
    local reset_after = reset
    if units > 0 then
      reset_after = p
    end
    return true, remaining, remaining - units, reset, reset_after, 0
  end
  local oldest = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')[2] + 0
  local lapse = math.min(p, math.max(0, oldest + p - now))
  return false, remaining, remaining, reset, reset, math.min(1000000, math.max(1, lapse))
end
