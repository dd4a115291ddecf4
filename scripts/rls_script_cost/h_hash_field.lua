-- Prototype: the window a hash field named by its end (Redis's clock read), HINCRBY, a PEXPIRE
-- on the window's first hit; { now, remaining } answered.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local n, p, cost = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local e = (math.floor(now / p) + 1) * p
local used = redis.call('HINCRBY', KEYS[1], e, cost)
if used == cost then redis.call('PEXPIRE', KEYS[1], math.ceil((e - now) / 1000)) end
return { now, n - used }
