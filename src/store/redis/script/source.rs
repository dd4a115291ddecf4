//! The Lua text of one script: `lua/prelude.lua` (the contract), the file of each algorithm
//! the signature uses, once, in the order of the algorithms' table, then the tail written for
//! the signature's limits.

use super::signature::Signature;
use super::tail::{tail, tail_in, Frame};
use crate::algorithm::TABLE;
use crate::limit::Algorithm;

/// The head of every script: its contract, the time, the cost.
pub(super) const PRELUDE: &str = include_str!("../../../../lua/prelude.lua");

/// The whole script for `signature`.
pub(super) fn source(signature: Signature) -> String {
    let mut lua = head(signature);
    lua.push_str(&tail(signature));
    lua
}

/// The batch script for `signature`: the same head, the tail as a function of one decision,
/// and the loop that runs it for each decision of the batch (its contract heads
/// `src/store/redis/script/batch.rs`).
pub(super) fn batch_source(signature: Signature) -> String {
    let limits = signature.algorithms().count();
    let logs = signature.uses(Algorithm::SlidingLog);
    let penalty = usize::from(signature.penalty());
    let leases = signature.uses(Algorithm::Concurrency);
    let mut lua = head(signature);
    lua.push_str("local function decide(out, len, o, a, now, cost, ttl_slack_ms)\n");
    lua.push_str(&tail_in(signature, Frame::Batch));
    lua.push_str("end\n");
    lua.push_str(
        &BATCH_LOOP
            .replace("{KEYS}", &(limits + penalty).to_string())
            .replace(
                "{ARGS}",
                &(2 * limits + 2 + usize::from(logs) + penalty + usize::from(leases)).to_string(),
            ),
    );
    lua
}

/// The loop of a batch script. Each decision reads the time it was given, or Redis `TIME`
/// (read once per batch: the prelude read it if the first decision asked for it). A decision
/// that raises an error (a key of the wrong type) answers with the error's text alone and
/// leaves the others be, as if each had been its own call.
const BATCH_LOOP: &str = "-- The batch: each decision in turn, committed on its own.
local keys_each, args_each = {KEYS}, {ARGS}
local clock = ttl_slack_ms == 0 and now or nil
local out, len = {}, 0
for j = 0, #KEYS / keys_each - 1 do
  local a = j * args_each
  local at, slack = clock, 0
  if ARGV[a + 1] ~= '' then
    at, slack = tonumber(ARGV[a + 1]), 60000
  elseif not clock then
    local t = redis.call('TIME')
    clock = t[1] * 1000000 + t[2]
    at = clock
  end
  -- What decide returns: the number of values it wrote, or the error it raised.
  local ok, answer = pcall(decide, out, len, j * keys_each, a, at, ARGV[a + 2] + 0, slack)
  if ok then
    len = len + answer
  else
    len = len + 1
    out[len] = type(answer) == 'table' and answer.err or tostring(answer)
  end
end
return out
";

/// The prelude and the file of each algorithm `signature` uses: the head of a check, a batch
/// and a peek script alike.
pub(super) fn head(signature: Signature) -> String {
    let mut lua = String::from(PRELUDE);
    for row in &TABLE {
        if signature.uses(row.algorithm) {
            lua.push('\n');
            lua.push_str(row.lua_file);
        }
    }
    lua.push('\n');
    lua
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert!(lua.contains("local function decide(out, len, o, a, now, cost, ttl_slack_ms)"));
        assert!(lua.contains("gcra(KEYS[o + 1], ARGV[a + 3] + 0, ARGV[a + 4] + 0"));
        // Two keys and seven arguments (time, cost, two limits, the log's TTL) per decision;
        // each reply is 2 + 2 * 2 integers when it admits, 2 + 4 * 2 otherwise.
        assert!(lua.contains("local keys_each, args_each = 2, 7\n"));
        assert!(lua.contains("  return 6\n"));
        assert!(lua.contains("return 10\n"));
        assert!(lua.contains("pcall(decide, "));
        assert!(!lua.contains("return {"), "answers go into `out`");
    }

    #[test]
    fn a_batch_passes_each_decision_its_lease() {
        let lua = batch_source(signature(&[Algorithm::Concurrency, Algorithm::Gcra]));
        assert!(lua.contains(algorithm_file(Algorithm::Concurrency)));
        // Time, cost, two limits and the lease id per decision; the lease is the last.
        assert!(lua.contains("local keys_each, args_each = 2, 7\n"));
        assert!(lua.contains("redis.call('ZADD', KEYS[o + 1], now, ARGV[a + 7])"));
    }
}
