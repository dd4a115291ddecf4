-- Accounting: Redis's clock read as ours reads it, and the reply.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
return { now, 5 }
