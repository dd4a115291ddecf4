-- Prototype: as c_window_key.lua, with Redis's TIME read (the window chosen in the script)
local t = redis.call('TIME')
local cost = ARGV[2] + 0
local used = redis.call('INCRBY', KEYS[1], cost)
if used == cost then redis.call('PEXPIRE', KEYS[1], '60000') end
return { t[1] * 1000000 + t[2], ARGV[3] - used }
