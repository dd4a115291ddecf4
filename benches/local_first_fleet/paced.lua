-- wrk script for benches/local_first_fleet.rs: scripts/flood_count.lua's counting, each
-- connection waiting 10 ms after each answer before its next request, so the offered rate is
-- set by the number of connections (at most 100 per second each) rather than by how fast the
-- machine answers. Run from the repository's root.
dofile("scripts/flood_count.lua")

function delay() return 10 end
