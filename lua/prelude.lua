-- redlimit: check every limit of one policy for one key; commit all of them or none.
--
-- The store runs one script per algorithm mix: this prelude, the file of each algorithm the
-- policy uses (once each), and a tail written for the policy's limits (its contract below;
-- src/store/redis/script/tail.rs writes it). The contract of every such script:
--
-- KEYS[i]  the state key of limit i. All keys share one {hash tag}, so one cluster slot.
--          Sliding-log limits of a policy share one sorted set: their KEYS[i] are equal.
-- ARGV[1]  '' in production: the time is Redis TIME. TEST ONLY: an integer of Unix µs to use
--          as the time instead, so differential tests are deterministic.
-- ARGV[2]  cost (integer >= 0)
-- ARGV[2i+1], ARGV[2i+2]
--          count N and period P in µs of limit i (its algorithm is fixed by the script)
-- ARGV[2k+3]  with k limits, some of them sliding logs: the logs' TTL in ms, the longest log
--          period rounded up (plus the test slack below when ARGV[1] is a time)
-- KEYS[k+1], the last ARGV
--          with a penalty box (src/store/redis/script/penalty.rs): the box's key and the
--          penalty in µs; `allowed` is then 2 for a denial that boxed the key or found it boxed
-- Reply    admitted: { now (Unix µs), then per limit i what of its remaining and reset (µs
--            until fully free) the client cannot derive: a fixed window its remaining (the
--            reset is 0 with nothing used, else the rest of its window), GCRA and the token
--            bucket their reset (the remaining follows from it and T), any other both },
--            every limit admitting with no wait: k to 2k values after `now`;
--          otherwise: { now, allowed (0, or 2 below),
--            then per limit i: allowed (1/0), remaining, reset,
--                              retry (µs until this cost would pass; 0 allowed, -1 never) }:
--            4k values after `now`, so the length tells the two apart
--          (every value of a reply is a cost to Redis and to the client: an admission says
--          only what it must; src/store/redis/script/reply.rs decodes both)
--
-- Batches: several decisions of one signature in one call run a batch variant of the script
-- (the same prelude and algorithms, the tail as a function called once per decision; its
-- contract heads src/store/redis/script/batch.rs). The prelude's `now` and `cost` are then the
-- first decision's; each decision is passed its own (its run's: decisions that share a time, a
-- cost and their limits' arguments are passed them once).
--
-- The algorithms whose state is one string (fixed and sliding window, token bucket, GCRA)
-- define NAME(v, n, p, cost, now, debt), given the limit's state as GET answers it (false for
-- none: the tail reads it, so a batch can read every key of its decisions with one MGET); the
-- concurrency limit defines concurrency(key, n, p, cost, now), which reads its sorted set.
-- A check passes no `debt`. A charge (src/store/redis/script/charge.rs: the same prelude and
-- algorithms, its own tail, no penalty box, no lease) passes true: the function then returns
-- ok whatever the state, its state charged with the cost up to the debt cap (the state holds
-- at most 2N units: N used, N owed), and the charge's tail calls it again on that state for a
-- cost of 1, committing nothing, to reply as a check does (of the state as it stands).
-- They return (the concurrency limit all but the last two)
--   ok, remaining before, remaining after, reset before, reset after, retry, state, ttl
-- where the last two (set when ok) are the value to write and its TTL in µs. If every limit is
-- ok the tail writes `SET key state PX ttl`; for a ttl of -1 `SET key state KEEPTTL` (the key
-- already has the TTL it needs: none to convert or re-index); for 0, DEL. The sliding log's
-- functions are described in sliding_log.lua.
--
-- Text becomes a number by arithmetic (`s + 0`, or `s - 1e15`), not tonumber, where it is
-- known to be one (the arguments, TIME, the digits a pattern captured): tonumber converts it
-- twice. Integers only: times are whole µs; Lua numbers are doubles, exact below 2^53. A number
-- passed to redis.call reaches Redis as its exact integer text (Redis writes 17 digits; Lua's
-- own tostring writes 14, then an exponent), and more cheaply than string.format makes it;
-- but a constant is passed as text ('0', not 0): Redis 7.0 writes every number with snprintf.
-- State that a monotonic clock could not have produced (a step back of the Redis clock: a
-- failover, an NTP step) is clamped on read to the debt cap, so a client is never asked to
-- wait longer than the most debt takes to pay (a period, and one emission interval).
--
-- The floor this code is held to (benches/redis_cost/per_call.rs) is a hand-written script of
-- one algorithm: so no table but the reply and no closure but one per algorithm (each costs
-- Redis a good part of a GET), and no string.format where a number will do.

if not redis.REDIS_VERSION then
  -- Before Redis 7 a server may replicate scripts verbatim (lua-replicate-commands no), which
  -- forbids writes after TIME; this makes it replicate their effects. Redis 7 and later (and
  -- Valkey) always do.
  pcall(redis.replicate_commands)
end

local now, ttl_slack_ms
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now, ttl_slack_ms = t[1] * 1000000 + t[2], 0
else
  -- TEST ONLY: with an explicit time, real time passing during a test must not expire state
  -- that the simulated time still needs, so TTLs get a minute of slack. Expiry never changes
  -- a decision (a key expires only once its state is moot).
  now, ttl_slack_ms = tonumber(ARGV[1]), 60000
end
local cost = ARGV[2] + 0
