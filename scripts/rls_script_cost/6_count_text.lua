-- Accounting: the new state's text as ours makes it in the same window (a number written by
-- Lua's tostring, %.14g, concatenated).
local s = '1795935600000000' .. ' ' .. (ARGV[2] + 12344)
return 1
