-- Accounting: the stored state parsed with ours' pattern.
local e, c = string.match('1795935600000000 12345', '^(%d+) (%d+)$')
return 1
