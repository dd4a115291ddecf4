-- Prototype: the window chosen by the client (its key would name the window); Redis's clock
-- not read; INCRBY, a PEXPIRE on the window's first hit, one integer answered (remaining).
local cost = ARGV[2] + 0
local used = redis.call('INCRBY', KEYS[1], cost)
if used == cost then redis.call('PEXPIRE', KEYS[1], '60000') end
return ARGV[3] - used
