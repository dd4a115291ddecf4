-- Accounting: the clock, the state read (GET), the reply.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('GET', KEYS[1])
return { now, 5 }
