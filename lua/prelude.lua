-- redlimit: check every limit of one policy for one key; commit all of them or none.
--
-- This file is the head of one script assembled from prelude.lua, the five algorithm files
-- and check.lua (see src/store/script.rs). The contract of the assembled script:
--
-- KEYS[i]  the state key of limit i. All keys share one {hash tag}, so one cluster slot.
--          Sliding-log limits of a policy share one sorted set: their KEYS[i] are equal.
-- ARGV[1]  '' in production: the time is Redis TIME. TEST ONLY: an integer of Unix µs to use
--          as the time instead, so differential tests are deterministic.
-- ARGV[2]  cost (integer >= 0)
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2] for limit i:
--          algorithm code (fw, sw, sl, tb, gc), count N, period P in µs
-- Reply    { now (Unix µs), allowed (1/0),
--            then per limit i: allowed (1/0), remaining, reset (µs until fully free),
--                              retry (µs until this cost would pass; 0 allowed, -1 never) }
--
-- Every algorithm defines NAME_check(key, n, p, cost, now, span), which reads state and returns
-- an eval table { ok, rb, ra, sb, sa, retry, state, ttl } (remaining and reset before/after this
-- request; the state string to write and its TTL in µs), and NAME_commit(key, e, cost, now),
-- which writes it. `span` is the longest period among the policy's limits on the same key (only
-- sliding logs share a key). Integers only: times are whole µs; Lua numbers are doubles, exact
-- below 2^53. State that a monotonic clock could not have produced (a step back of the Redis
-- clock: a failover, an NTP step) is clamped on read, so a client is never asked to wait longer
-- than a limit's period.

if redis.replicate_commands then
  -- Redis < 5 replicates scripts verbatim, which forbids writes after TIME; later versions
  -- replicate effects and ignore this call.
  pcall(redis.replicate_commands)
end

-- Integers as Redis arguments, without the exponent tostring() would use.
local function int(x)
  return string.format('%.0f', x)
end

-- TEST ONLY: with an explicit time (ARGV[1]), real time passing during a test must not expire
-- state that the simulated time still needs, so TTLs get a minute of slack. Expiry never
-- changes a decision (a key expires only once its state is moot), so this changes none.
local ttl_slack_ms = 0
if ARGV[1] ~= '' then
  ttl_slack_ms = 60000
end

-- µs to the millisecond TTL that outlives them.
local function ttl_ms(us)
  return math.max(1, math.ceil(us / 1000)) + ttl_slack_ms
end

-- The eval table of a cost larger than the limit's capacity: denied, nothing consumed.
local function never(remaining, reset)
  return { ok = false, rb = remaining, ra = remaining, sb = reset, sa = reset, retry = -1 }
end

-- The commit of an algorithm whose state is one string: write it with its TTL, or delete it
-- once it is moot.
local function commit_state(key, e)
  if e.ttl > 0 then
    redis.call('SET', key, e.state, 'PX', ttl_ms(e.ttl))
  else
    redis.call('DEL', key)
  end
end
