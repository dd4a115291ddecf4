-- wrk script for scripts/flood.sh: counts answers by status across threads.
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0; limited = 0; fivexx = 0; other = 0 end
function response(status, headers, body)
  if status == 200 then ok = ok + 1
  elseif status == 429 then limited = limited + 1
  elseif status >= 500 then fivexx = fivexx + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local o, l, f, x = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok"); l = l + t:get("limited"); f = f + t:get("fivexx"); x = x + t:get("other")
  end
  io.write(string.format("STATUS ok=%d 429=%d 5xx=%d other=%d\n", o, l, f, x))
end
