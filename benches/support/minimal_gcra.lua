-- The least a Redis-backed GCRA check can be: the baseline middleware of benches/http.rs and
-- benches/layer_service.rs (`support/minimal.rs`). One TAT per key, Redis's clock, no
-- multi-limit, no cost, no state besides the TAT, and a reply of one integer (no headers can be
-- made from it).
--
-- KEYS[1]  the TAT in µs
-- ARGV     T (the emission interval) and the tolerance N*T, both in µs
-- Reply    1 admitted, 0 denied
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then
  tat = now
end
local next_tat = tat + ARGV[1]
if next_tat - now > tonumber(ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[1], next_tat, 'PX', math.ceil((next_tat - now) / 1000))
return 1
