-- wrk script for benches/local_first_fleet.rs: sweeps a key space through the `x-api-key`
-- header and counts the answers by status, and (with `report`) what each key was admitted.
--
--   wrk -t8 -c8 -d300s -s sweep.lua URL -- KEYS OFFSET REPEAT THREADS [report]
--
-- Thread `id` (of THREADS, one connection each) takes keys id, id + THREADS, ... below KEYS,
-- sends REPEAT requests for each in a row (key number shifted by OFFSET, modulo KEYS) and
-- stops after its last answer, printing FINISHED. One connection per thread, so each answer is to the request
-- this thread made last: that is how an answer is tied to its key. The position in the sweep
-- is the number of answers, not of `request` calls: wrk calls thread 0's `request` once more,
-- before the run, to inspect the request.
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  keys = tonumber(args[1]); offset = tonumber(args[2]); rep = tonumber(args[3])
  nthreads = tonumber(args[4]); report = args[5] == "report"
  current = nil; cached_for = nil; cached = nil
  ok = 0; limited = 0; fivexx = 0; other = 0; extra = 0; admitted = {}
  total = 0
  for k = id, keys - 1, nthreads do total = total + rep end
end

function request()
  local answered = ok + limited + fivexx + other
  local k = id + math.floor(answered / rep) * nthreads
  if k >= keys then
    -- Written after the last answer, before the thread stopped: not part of the sweep.
    current = nil
    return wrk.format("GET", "/", { ["x-api-key"] = "after-the-sweep" })
  end
  current = (k + offset) % keys
  if cached_for ~= current then
    cached_for = current
    cached = wrk.format("GET", "/", { ["x-api-key"] = "k" .. current })
  end
  return cached
end

function response(status, headers, body)
  if current == nil then extra = extra + 1; return end
  if status == 200 then
    ok = ok + 1
    if report then admitted[current] = (admitted[current] or 0) + 1 end
  elseif status == 429 then limited = limited + 1
  elseif status >= 500 then fivexx = fivexx + 1
  else other = other + 1 end
  if ok + limited + fivexx + other == total then
    -- wrk itself runs for its whole -d; the harness sends it SIGINT once every thread said so.
    io.write("FINISHED\n"); io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local o, l, f, x = 0, 0, 0, 0
  local sums = {}
  for _, t in ipairs(threads) do
    o = o + t:get("ok"); l = l + t:get("limited"); f = f + t:get("fivexx"); x = x + t:get("other")
    for k, n in pairs(t:get("admitted")) do sums[k] = (sums[k] or 0) + n end
  end
  io.write(string.format("STATUS ok=%d 429=%d 5xx=%d other=%d\n", o, l, f, x))
  for k, n in pairs(sums) do io.write(string.format("ADMITTED %d %d\n", k, n)) end
end
