-- Accounting: what a fixed window kept as a bare counter would cost (not ours: its state would
-- no longer name its window; see docs/bench/redis_cost.md): the clock, INCRBY, a PEXPIRE
-- on a window's first hit, the same reply.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local n, p, cost = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local window_end = (math.floor(now / p) + 1) * p
local used = redis.call('INCRBY', KEYS[1], cost)
if used == cost then redis.call('PEXPIRE', KEYS[1], math.ceil((window_end - now) / 1000)) end
return { now, n - used }
