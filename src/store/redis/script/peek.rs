//! Inspect and reset, for support tools: a peek script that evaluates every limit of a policy
//! as a check would and commits nothing, and the `DEL` of a key's state.
//!
//! The peek script is the check script's own parts, the prelude and the algorithm files of
//! `lua/`, with an end of its own: every limit evaluated for the cost given (1), nothing
//! written, and the reply of a check that committed nothing, which the check's decoder reads.
//! So an inspection and the next check can never disagree on the algorithms. Like a check, it
//! trims a sliding log of members no span counts any more; that changes no decision.

use std::fmt::Write as _;

use redis::Cmd;

use super::args::{push_check_args, state_key};
use super::clock::Clock;
use super::head::head;
use super::signature::Signature;
use super::tail::open_log;
use crate::key::Key;
use crate::limit::Algorithm;
use crate::policy::Policy;

/// Deletes every state key of one evaluation (they share one hash slot: one call in a Cluster).
const RESET: &str = "return { redis.call('DEL', unpack(KEYS)) }";

/// The peek script for `signature`.
fn peek_source(signature: Signature) -> String {
    let mut lua = head(signature);
    lua.push_str(&peek_tail(signature));
    lua
}

/// Every limit evaluated (with the arguments and keys of a check), none committed; the reply
/// is a check's, with each limit's state before the request.
fn peek_tail(signature: Signature) -> String {
    let algorithms: Vec<Algorithm> = signature.algorithms().collect();
    let limits = || (1..).zip(algorithms.iter().copied());
    let logs: Vec<usize> = limits()
        .filter(|(_, a)| *a == Algorithm::SlidingLog)
        .map(|(i, _)| i)
        .collect();
    let mut lua = String::from("-- The peek: every limit evaluated, nothing committed.\n");
    let w = &mut lua;
    if let Some(&log) = logs.first() {
        for i in &logs {
            let _ = writeln!(w, "local p{i} = tonumber(ARGV[{}])", 2 * i + 2);
        }
        let periods: Vec<String> = logs.iter().map(|i| format!("p{i}")).collect();
        let _ = writeln!(w, "local log_span = math.max({}, 0)", periods.join(", "));
        w.push_str(&open_log(&format!("KEYS[{log}]")));
    }
    for (i, algorithm) in limits() {
        let count = format!("tonumber(ARGV[{}])", 2 * i + 1);
        if algorithm == Algorithm::SlidingLog {
            // As the check's tail: the longest log starts at the base, a shorter one at the
            // newest member at or before its own start.
            let _ = writeln!(
                w,
                "local before{i} = p{i} == log_span and log_base or (tonumber(redis.call('ZREVRANGEBYSCORE', KEYS[{i}], log_at - p{i}, '-inf', 'LIMIT', 0, 1)[1]) or 1e15 + log_base) - 1e15"
            );
            let _ = writeln!(
                w,
                "local ok{i}, rb{i}, ra{i}, sb{i}, sa{i}, retry{i} = sliding_log(KEYS[{i}], {count}, p{i}, cost, log_at, log_newest, log_total, before{i})"
            );
        } else {
            let _ = writeln!(
                w,
                "local ok{i}, rb{i}, ra{i}, sb{i}, sa{i}, retry{i} = {}({}, {count}, {}, cost, now)",
                algorithm.descriptor().lua_fn,
                if algorithm == Algorithm::Concurrency {
                    format!("KEYS[{i}]")
                } else {
                    format!("redis.call('GET', KEYS[{i}])")
                },
                super::tail::period(algorithm, &format!("ARGV[{}]", 2 * i + 2))
            );
        }
    }
    let all_ok: Vec<String> = limits().map(|(i, _)| format!("ok{i}")).collect();
    let states: Vec<String> = limits()
        .map(|(i, _)| format!("ok{i} and 1 or 0, rb{i}, sb{i}, retry{i}"))
        .collect();
    let _ = writeln!(
        w,
        "return {{ now, ({}) and 1 or 0, {} }}",
        all_ok.join(" and "),
        states.join(", ")
    );
    lua
}

/// The keys of one evaluation of `policy` for `key`, as a check names them.
fn keys(prefix: &str, policy: &Policy, key: &Key) -> Vec<String> {
    policy
        .limits()
        .iter()
        .enumerate()
        .map(|(position, _)| state_key(prefix, policy, key, position))
        .collect()
}

/// The `EVAL` of the peek script for a request of cost 1, with a check's keys and arguments;
/// at `clock`'s time. Support tools call it rarely: the script is
/// sent whole (Redis caches it by hash), never registered for the checks' `EVALSHA`.
pub(crate) fn peek_command(prefix: &str, policy: &Policy, key: &Key, clock: Clock) -> Cmd {
    let mut command = redis::cmd("EVAL");
    command.arg(peek_source(Signature::of(policy.limits())));
    push_check_args(&mut command, prefix, policy, key, false, clock, 1);
    command
}

/// The `EVAL` that deletes `key`'s state under `policy` (every limit's key, once).
pub(crate) fn reset_command(prefix: &str, policy: &Policy, key: &Key) -> Cmd {
    let mut keys = keys(prefix, policy, key);
    if policy.penalty_box().is_some() {
        keys.push(super::box_key(prefix, policy, key));
    }
    // Sliding logs share one key.
    keys.sort_unstable();
    keys.dedup();
    let mut command = redis::cmd("EVAL");
    command.arg(RESET).arg(keys.len()).arg(keys);
    command
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    fn signature(algorithms: &[Algorithm]) -> Signature {
        let limits: Vec<Limit> = algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect();
        Signature::of(&limits)
    }

    #[test]
    fn writes_nothing_but_a_log_trim() {
        let lua = peek_source(signature(&Algorithm::ALL));
        let tail = &lua[lua.find("-- The peek").unwrap()..];
        for write in ["'SET'", "'ZADD'", "'PEXPIRE'", "'DEL'"] {
            assert!(!tail.contains(write), "{write} in {tail}");
        }
        assert_eq!(
            tail.matches("local log_key = KEYS[").count(),
            1,
            "the log opened once"
        );
        assert!(tail.contains("return { now, (ok1 and ok2 and ok3 and ok4 and ok5) and 1 or 0"));
    }

    #[test]
    fn shorter_logs_start_at_their_own_span() {
        let lua = peek_tail(signature(&[Algorithm::SlidingLog, Algorithm::SlidingLog]));
        assert!(lua.contains("local log_span = math.max(p1, p2, 0)"));
        assert!(lua.contains("local before2 = p2 == log_span and log_base or"));
    }

    #[test]
    fn reset_names_each_key_once() {
        let policy = Policy::new(
            "p",
            [
                Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
                Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
                Limit::gcra(20, Duration::from_secs(60)).unwrap(),
            ],
        )
        .unwrap();
        let command = reset_command("rl", &policy, &Key::new("k"));
        let args: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(args[2..], ["2", "rl:p:{k}:gc2", "rl:p:{k}:sl"]);
    }
}
