-- Accounting: the eight texts ours makes numbers (ARGV cost twice, count, period; the
-- stored window and count; TIME's two fields), nothing else.
local a = ARGV[3] + 0
local b = ARGV[4] + 0
local c = ARGV[5] + 0
local d = ARGV[2] + 0
local e = ('1795935600000000') + 0
local f = ('1795935600000000') + 0
local g = ('1795935') + 0
local h = ('849614') + 0
return 1
