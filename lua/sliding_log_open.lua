-- Sliding-window log, opened: not a script of its own. The tail (src/store/redis/script/tail.rs,
-- and the peek's) splices this in once, where the policy's log opens, after defining
-- `log_key` (the log's sorted set) and `log_span` (the longest log period); it reads `now`.
-- Inline rather than a function: a Lua call with its arguments and results costs Redis a good
-- part of a sorted-set read. It leaves
--   log_at      the time of the decision: now, or the newest member's time if that is later
--               (a clock step back), so no wait exceeds the period
--   log_newest  the newest member's time, log_total its running total (0 and 0: an empty log)
--   log_base    the base's total
-- reading the log once and trimming it.
local log_at, log_newest, log_total, log_base = now, 0, 0, 0
do
  local last = redis.call('ZRANGE', log_key, '-1', '-1', 'WITHSCORES')
  if last[1] then
    log_total, log_newest = last[1] - 1e15, last[2] + 0
    if log_newest > now then
      log_at = log_newest
    end
    -- Members at or before at - span are outside every span: the newest of them stays for its
    -- total, older ones go. The oldest member left is the base: its total is what came before
    -- every member that counts (a log starts with a marker of total 0, so a log never trimmed
    -- has one too). The base, not 0, also starts a span longer than the log was trimmed for (a
    -- limit whose period grew: an override, a reloaded policy), as the memory store's does.
    -- Reading the oldest member first makes a young log (none outside) cost one ZRANGE.
    local oldest = redis.call('ZRANGE', log_key, '0', '0', 'WITHSCORES')
    log_base = oldest[1] - 1e15
    if oldest[2] + 0 <= log_at - log_span then
      local outside = redis.call('ZCOUNT', log_key, '-inf', log_at - log_span)
      if outside > 1 then
        redis.call('ZREMRANGEBYRANK', log_key, '0', outside - 2)
        log_base = redis.call('ZRANGE', log_key, '0', '0')[1] - 1e15
      end
    end
  end
end
