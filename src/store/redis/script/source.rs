//! The Lua text of one script: `lua/prelude.lua` (the contract), the file of each algorithm
//! the signature uses, once, in the order of the algorithms' table, then the tail written for
//! the signature's limits.

use super::always::always_tail_in;
#[cfg(test)]
use super::head::PRELUDE;
use super::head::head;
use super::signature::{BatchShape, Signature};
use super::tail::{Frame, tail, tail_in};

/// The whole script for `signature`.
pub(super) fn source(signature: Signature) -> String {
    let mut lua = head(signature);
    lua.push_str(&tail(signature));
    lua
}

/// The batch script for `signature`: the same head, the tail (a check's, or the always
/// variant's) as a function of one decision, and the loop that runs it for each decision of
/// the batch (its contract heads `src/store/redis/script/batch.rs`).
pub(super) fn batch_source(signature: Signature) -> String {
    let shape = BatchShape::of(signature);
    let mut lua = head(signature);
    lua.push_str("local batch_now, nums, pxs = now, {}, {}\n");
    if shape.mget {
        lua.push_str("local values, reread\n");
    }
    lua.push_str("local function decide(out, len, o, a, q, now, cost, ttl_slack_ms)\n");
    let frame = Frame::Batch {
        params: shape.params,
        numbers: shape.numbers,
        mget: shape.mget,
    };
    // The always variant's decision, or a check's.
    lua.push_str(&if signature.always() {
        always_tail_in(signature, frame)
    } else {
        tail_in(signature, frame)
    });
    lua.push_str("end\n");
    lua.push_str(
        &BATCH_LOOP
            .replace("{KEYS}", &shape.keys.to_string())
            .replace("{ARGS}", &shape.own.to_string())
            .replace("{AGAIN}", if shape.mget { " - 1" } else { "" })
            .replace("{PARAMS}", &shape.params.to_string())
            .replace("{NUMBERS}", &shape.numbers.to_string())
            .replace(
                "{NUMBER}",
                // A calendar window's period is text (its windows' boundaries), kept as such.
                if signature.uses(crate::limit::Algorithm::Calendar) {
                    "tonumber(ARGV[x]) or ARGV[x]"
                } else {
                    "ARGV[x] + 0"
                },
            )
            .replace("{READS}", if shape.mget { BATCH_READS } else { "" }),
    );
    lua
}

/// The loop of a batch script. Each decision reads the time its run was given, or Redis `TIME`
/// (read once per batch: the prelude read it if the first run asked for it). A decision that
/// raises an error (a key of the wrong type) answers with the error's text alone and leaves
/// the others be, as if each had been its own call.
const BATCH_LOOP: &str = "-- The batch: each decision in turn, committed on its own.
local keys_each, args_each, params_each = {KEYS}, {ARGS}, {PARAMS}
local decisions = #KEYS / keys_each
local clock = ttl_slack_ms == 0 and now or nil
{READS}local out, len = { batch_now }, 1
-- The runs of decisions that share a time, a cost and the limits' arguments: each is its time,
-- cost and length (in decisions), then the arguments (the counts and periods made numbers
-- once). The decisions' own arguments follow the runs.
local own = #ARGV - decisions * args_each{AGAIN}
local q, run_end, at, slack = -params_each, 0, now, 0
for j = 0, decisions - 1 do
  if j == run_end then
    q = q + params_each + 3
    run_end = run_end + ARGV[q]
    cost = ARGV[q - 1] + 0
    if ARGV[q - 2] ~= '' then
      at, slack = tonumber(ARGV[q - 2]), 60000
    else
      if not clock then
        local t = redis.call('TIME')
        clock = t[1] * 1000000 + t[2]
      end
      at, slack = clock, 0
    end
    for x = q + 1, q + {NUMBERS} do nums[x] = {NUMBER} end
  end
  -- What decide returns: the number of values it wrote, or the error it raised.
  local ok, answer = pcall(decide, out, len, j * keys_each, own + j * args_each, q, at, cost, slack)
  if ok then
    len = len + answer
  else
    len = len + 1
    out[len] = type(answer) == 'table' and answer.err or tostring(answer)
  end
end
return out
";

/// The reads of a batch whose keys all hold strings: every key with one `MGET` (in chunks
/// that `unpack` can take), and the positions to read again with `GET` when their decision
/// runs. Those are the keys met earlier in the batch (an earlier decision may have written
/// them; the store lists them in the last argument), and, if some key exists that `MGET`
/// did not find (it holds another type, which `MGET` reads as none), every key it did not
/// find: their `GET` raises `WRONGTYPE` in that key's decision alone, as its own call would.
const BATCH_READS: &str = "reread = {}
if ARGV[#ARGV] ~= '' then
  for x in string.gmatch(ARGV[#ARGV], '%d+') do reread[x + 0] = true end
end
if #KEYS <= 1000 then
  values = redis.call('MGET', unpack(KEYS))
else
  values = {}
  for s = 1, #KEYS, 1000 do
    local part = redis.call('MGET', unpack(KEYS, s, math.min(s + 999, #KEYS)))
    for x = 1, #part do values[s + x - 1] = part[x] end
  end
end
local found = 0
for x = 1, #KEYS do
  if values[x] then found = found + 1 end
end
if found < #KEYS then
  local present = 0
  for s = 1, #KEYS, 1000 do
    present = present + redis.call('EXISTS', unpack(KEYS, s, math.min(s + 999, #KEYS)))
  end
  if present > found then
    for x = 1, #KEYS do
      if not values[x] then reread[x] = true end
    end
  end
end
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Algorithm;
    use crate::limit::Limit;
    use std::time::Duration;

    fn algorithm_file(algorithm: Algorithm) -> &'static str {
        algorithm.descriptor().lua_file
    }

    fn signature(algorithms: &[Algorithm]) -> Signature {
        let limits: Vec<Limit> = algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect();
        Signature::of(&limits)
    }

    #[test]
    fn holds_the_prelude_and_only_the_algorithms_used() {
        let lua = source(signature(&[Algorithm::Gcra]));
        assert!(lua.starts_with(PRELUDE));
        assert!(lua.contains(algorithm_file(Algorithm::Gcra)));
        for other in &Algorithm::ALL[..4] {
            assert!(!lua.contains(algorithm_file(*other)), "{other}");
        }
    }

    #[test]
    fn each_algorithm_once_whatever_the_number_of_its_limits() {
        let lua = source(signature(&[
            Algorithm::SlidingLog,
            Algorithm::Gcra,
            Algorithm::SlidingLog,
            Algorithm::Gcra,
        ]));
        for algorithm in [Algorithm::SlidingLog, Algorithm::Gcra] {
            assert_eq!(lua.matches(algorithm_file(algorithm)).count(), 1);
        }
    }

    #[test]
    fn a_batch_runs_the_same_tail_once_per_decision() {
        let signature = signature(&[Algorithm::Gcra, Algorithm::SlidingLog]);
        let lua = batch_source(signature);
        assert!(lua.starts_with(PRELUDE));
        assert_eq!(lua.matches(algorithm_file(Algorithm::Gcra)).count(), 1);
        assert!(lua.contains("local function decide(out, len, o, a, q, now, cost, ttl_slack_ms)"));
        // A sliding log keeps a sorted set: each decision reads its string keys itself.
        assert!(
            lua.contains("gcra(redis.call('GET', KEYS[o + 1]), nums[q + 1] + 0, nums[q + 2] + 0")
        );
        assert!(!lua.contains("'MGET'"));
        // Two keys per decision and no argument of its own; five per run of limits (two
        // counts and periods, the log's TTL); a reply of 1 + 2 integers when it admits at the
        // batch's time (GCRA's backlog, the log's remaining and reset), else its time and 1
        // before them when it admits, 2 + 4 * 2 otherwise.
        assert!(lua.contains("local keys_each, args_each, params_each = 2, 0, 5\n"));
        assert!(lua.contains("redis.call('PEXPIRE', KEYS[o + 2], ARGV[q + 5])"));
        assert!(lua.contains("    return 3\n"));
        assert!(lua.contains("  return 5\n"));
        assert!(lua.contains("return 10\n"));
        assert!(lua.contains("pcall(decide, "));
        assert!(!lua.contains("return {"), "answers go into `out`");
    }

    #[test]
    fn a_batch_of_string_keys_reads_them_with_one_mget() {
        let lua = batch_source(signature(&[Algorithm::TokenBucket, Algorithm::FixedWindow]));
        assert_eq!(lua.matches("redis.call('MGET', unpack(KEYS))").count(), 1);
        assert!(lua.contains("local v2 = values[o + 2]\nif reread[o + 2] then v2 = redis.call('GET', KEYS[o + 2]) end\n"));
        assert!(lua.contains("fixed_window(v2, nums[q + 3] + 0, nums[q + 4] + 0, cost, now)"));
        // The positions to read again: the last argument.
        assert!(
            lua.contains("if ARGV[#ARGV] ~= '' then\n  for x in string.gmatch(ARGV[#ARGV], '%d+')")
        );
        assert!(lua.contains("local own = #ARGV - decisions * args_each - 1\n"));
        // Its TTL as text, made once per batch.
        assert!(lua.contains("redis.call('SET', KEYS[o + 1], state1, 'PX', px)"));
    }

    #[test]
    fn a_calendar_window_s_boundaries_stay_text() {
        let day = crate::calendar::Calendar::day().utc().unwrap();
        let limits = [
            Limit::calendar(5, day).unwrap(),
            Limit::gcra(10, Duration::from_secs(1)).unwrap(),
        ];
        let signature = Signature::of(&limits);
        let single = source(signature);
        assert!(single.contains(
            "calendar_window(redis.call('GET', KEYS[1]), ARGV[3] + 0, ARGV[4], cost, now)"
        ));
        assert!(
            single
                .contains("gcra(redis.call('GET', KEYS[2]), ARGV[5] + 0, ARGV[6] + 0, cost, now)")
        );
        let batch = batch_source(signature);
        assert!(batch.contains("do nums[x] = tonumber(ARGV[x]) or ARGV[x] end"));
        assert!(batch.contains("calendar_window(v1, nums[q + 1] + 0, nums[q + 2], cost, now)"));
        // Without a calendar window, every argument is made a number the cheap way.
        let plain = batch_source(Signature::of(&limits[1..]));
        assert!(plain.contains("do nums[x] = ARGV[x] + 0 end"));
    }

    #[test]
    fn an_always_batch_runs_the_always_tail_once_per_decision() {
        let string_keys = signature(&[Algorithm::Gcra, Algorithm::FixedWindow]).with_always(true);
        let lua = batch_source(string_keys);
        assert!(lua.contains("-- Always: each limit charged its own cost"));
        assert!(!lua.contains("-- The tail: every limit"));
        // Two keys per decision, no box; two counts and periods and two costs per run.
        assert!(lua.contains("local keys_each, args_each, params_each = 2, 0, 6\n"));
        assert!(lua.contains("local c2 = ARGV[q + 6] + 0\n"));
        assert_eq!(lua.matches("redis.call('MGET', unpack(KEYS))").count(), 1);
        assert!(lua.contains("local v1 = values[o + 1]\nif reread[o + 1]"));
        assert!(!lua.contains("local v1 = v1"));
        assert!(lua.contains("gcra(v1, nums[q + 1] + 0, nums[q + 2] + 0, c1, now)"));
        assert!(lua.contains("redis.call('SET', KEYS[o + 2], state2, 'PX', px)"));
        // An admission short at the batch's time (GCRA's backlog, the window's remaining),
        // else marked by its time and 1; a denial a single call's long reply.
        assert!(lua.contains("    return 2\n"));
        assert!(lua.contains("  return 4\n"));
        assert!(lua.contains("return 10\n"));
        // A sliding log: its own reads, its TTL after the counts and periods.
        let logs =
            batch_source(signature(&[Algorithm::SlidingLog, Algorithm::Gcra]).with_always(true));
        assert!(!logs.contains("'MGET'"));
        assert!(logs.contains("local keys_each, args_each, params_each = 2, 0, 7\n"));
        assert!(logs.contains("redis.call('PEXPIRE', KEYS[o + 1], ARGV[q + 5])"));
        assert!(logs.contains("local c1 = ARGV[q + 6] + 0\n"));
    }

    #[test]
    fn a_batch_passes_each_decision_its_lease() {
        let lua = batch_source(signature(&[Algorithm::Concurrency, Algorithm::Gcra]));
        assert!(lua.contains(algorithm_file(Algorithm::Concurrency)));
        // The lease id is a decision's own argument; two counts and periods per run.
        assert!(lua.contains("local keys_each, args_each, params_each = 2, 1, 4\n"));
        assert!(lua.contains("redis.call('ZADD', KEYS[o + 1], now, ARGV[a + 1])"));
        assert!(lua.contains("local own = #ARGV - decisions * args_each\n"));
    }
}
