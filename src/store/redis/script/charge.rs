//! The charge variant of a policy's script: the same prelude and algorithm files as its check
//! (`lua/prelude.lua`'s contract: the same keys and arguments, without the penalty box and
//! the lease), and a tail of its own. Each limit's algorithm is called with `debt` (its last
//! argument), which counts the cost whatever the state, up to the debt cap (twice the limit;
//! the sliding logs' units are capped alike and recorded once; a concurrency limit is not
//! charged); the state is written; then each limit is evaluated again for a cost of 1 on the
//! state just written, committing nothing: the reply is a check's, the decision after the
//! charge (an admission's short reply of the state as it stands when every limit would admit
//! a cost of 1, else the long one). A check's own path is untouched: its calls pass no `debt`.
//!
//! For `gcra` then `fixed_window`, it reads:
//!
//! ```lua
//! local _, _, _, _, _, _, state1, ttl1 = gcra(redis.call('GET', KEYS[1]), ARGV[3] + 0, ARGV[4] + 0, cost, now, true)
//! if ttl1 > 0 then redis.call('SET', KEYS[1], state1, 'PX', math.ceil(ttl1 / 1000) + ttl_slack_ms) elseif ttl1 < 0 then redis.call('SET', KEYS[1], state1, 'KEEPTTL') else redis.call('DEL', KEYS[1]) end
//! local ok1, rb1, _, sb1, _, retry1 = gcra(state1, ARGV[3] + 0, ARGV[4] + 0, 1, now)
//! local _, _, _, _, _, _, state2, ttl2 = fixed_window(redis.call('GET', KEYS[2]), ARGV[5] + 0, ARGV[6] + 0, cost, now, true)
//! if ttl2 > 0 then redis.call('SET', KEYS[2], state2, 'PX', math.ceil(ttl2 / 1000) + ttl_slack_ms) elseif ttl2 < 0 then redis.call('SET', KEYS[2], state2, 'KEEPTTL') else redis.call('DEL', KEYS[2]) end
//! local ok2, rb2, _, sb2, _, retry2 = fixed_window(state2, ARGV[5] + 0, ARGV[6] + 0, 1, now)
//! if ok1 and ok2 then return { now, sb1, rb2 } end
//! return { now, 0, ok1 and 1 or 0, rb1, sb1, retry1, ok2 and 1 or 0, rb2, sb2, retry2 }
//! ```

use std::fmt::Write as _;

use super::head::head;
use super::reply::Admitted;
use super::signature::Signature;
use super::tail::{Frame, open_log};
use crate::limit::Algorithm;

/// The charge script for `signature` (its penalty box, if any, plays no part).
pub(super) fn charge_source(signature: Signature) -> String {
    let mut lua = head(signature);
    lua.push_str(&charge_tail(signature));
    lua
}

/// Every limit charged, then evaluated for a cost of 1.
fn charge_tail(signature: Signature) -> String {
    let algorithms: Vec<Algorithm> = signature.algorithms().collect();
    let limits = || (1..).zip(algorithms.iter().copied());
    let logs: Vec<usize> = limits()
        .filter(|(_, a)| *a == Algorithm::SlidingLog)
        .map(|(i, _)| i)
        .collect();
    let mut lua = String::from(
        "-- The charge: every limit charged whatever its state, then the state after.\n",
    );
    let w = &mut lua;
    if !logs.is_empty() {
        open_logs(w, &logs, Frame::Single);
        charge_logs(w, &logs, algorithms.len(), "cost", Frame::Single);
    }
    for (i, algorithm) in limits() {
        let (count, period) = (
            format!("ARGV[{}] + 0", 2 * i + 1),
            super::tail::period(algorithm, &format!("ARGV[{}]", 2 * i + 2)),
        );
        let function = algorithm.descriptor().lua_fn;
        match algorithm {
            Algorithm::SlidingLog => {
                let _ = writeln!(
                    w,
                    "local ok{i}, rb{i}, _, sb{i}, _, retry{i} = sliding_log(KEYS[{i}], n{i}, p{i}, 1, log_at, log_newest, log_total, before{i})"
                );
            }
            Algorithm::Concurrency => {
                let _ = writeln!(
                    w,
                    "local ok{i}, rb{i}, _, sb{i}, _, retry{i} = concurrency(KEYS[{i}], {count}, {period}, 1, now)"
                );
            }
            _ => {
                let _ = writeln!(
                    w,
                    "local _, _, _, _, _, _, state{i}, ttl{i} = {function}(redis.call('GET', KEYS[{i}]), {count}, {period}, cost, now, true)"
                );
                let _ = writeln!(
                    w,
                    "if ttl{i} > 0 then redis.call('SET', KEYS[{i}], state{i}, 'PX', math.ceil(ttl{i} / 1000) + ttl_slack_ms) elseif ttl{i} < 0 then redis.call('SET', KEYS[{i}], state{i}, 'KEEPTTL') else redis.call('DEL', KEYS[{i}]) end"
                );
                let _ = writeln!(
                    w,
                    "local ok{i}, rb{i}, _, sb{i}, _, retry{i} = {function}(state{i}, {count}, {period}, 1, now)"
                );
            }
        }
    }
    // Every limit would admit a cost of 1: an admission's short reply of the state as it
    // stands (`reply.rs`), else the long one.
    let all_ok: Vec<String> = limits().map(|(i, _)| format!("ok{i}")).collect();
    let mut admitted = vec!["now".to_owned()];
    for (i, algorithm) in limits() {
        admitted.extend(Admitted::of(algorithm).items(format!("rb{i}"), format!("sb{i}")));
    }
    let _ = writeln!(
        w,
        "if {} then return {{ {} }} end",
        all_ok.join(" and "),
        admitted.join(", ")
    );
    let states: Vec<String> = limits()
        .map(|(i, _)| format!("ok{i} and 1 or 0, rb{i}, sb{i}, retry{i}"))
        .collect();
    let _ = writeln!(w, "return {{ now, 0, {} }}", states.join(", "));
    lua
}

/// Opens the sliding logs at `logs` (positions, from 1: they share one sorted set, the first
/// one's key) where `frame` finds them: each one's period `p{i}`, count `n{i}` and start
/// `before{i}`, the log's `log_at`, `log_newest`, `log_total` (`sliding_log_open.lua`).
pub(super) fn open_logs(w: &mut String, logs: &[usize], frame: Frame) {
    let Some(&log) = logs.first() else {
        return;
    };
    for i in logs {
        let _ = writeln!(w, "local p{i} = {} + 0", frame.arg(2 * i + 2));
    }
    let periods: Vec<String> = logs.iter().map(|i| format!("p{i}")).collect();
    let _ = writeln!(w, "local log_span = math.max({}, 0)", periods.join(", "));
    w.push_str(&open_log(&frame.key(log)));
    // As the check's tail: the longest log starts at the base, a shorter one at the newest
    // member at or before its own start.
    for i in logs {
        let _ = writeln!(
            w,
            "local before{i} = p{i} == log_span and log_base or (tonumber(redis.call('ZREVRANGEBYSCORE', {}, log_at - p{i}, '-inf', 'LIMIT', '0', '1')[1]) or 1e15 + log_base) - 1e15\nlocal n{i} = {} + 0",
            frame.key(*i),
            frame.arg(2 * i + 1)
        );
    }
}

/// Charges `cost` (a Lua expression) to the opened logs at `logs` of a script of `k` limits
/// (where `frame` finds them): the units the fullest span has room for up to twice its count,
/// recorded once, and the log's TTL (the argument after the counts and periods) renewed.
pub(super) fn charge_logs(w: &mut String, logs: &[usize], k: usize, cost: &str, frame: Frame) {
    let Some(&log) = logs.first() else {
        return;
    };
    let key = frame.key(log);
    let room: Vec<String> = logs
        .iter()
        .map(|i| format!("2 * n{i} - log_total + before{i}"))
        .collect();
    let _ = writeln!(
        w,
        "local log_units = math.min({cost}, math.max(0, {}))",
        room.join(", ")
    );
    let _ = writeln!(
        w,
        "if log_units > 0 and log_total == 0 then redis.call('ZADD', {key}, log_at, '1000000000000000', log_at, 1e15 + log_units) elseif log_units > 0 then redis.call('ZADD', {key}, log_at, 1e15 + log_total + log_units) end"
    );
    let _ = writeln!(w, "redis.call('PEXPIRE', {key}, {})", frame.arg(2 * k + 3));
    let _ = writeln!(
        w,
        "if log_units > 0 then log_newest, log_total = log_at, log_total + log_units end"
    );
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
    fn reads_as_the_module_documentation_shows() {
        let lua = charge_tail(signature(&[Algorithm::Gcra, Algorithm::FixedWindow]));
        let documented: String = include_str!("charge.rs")
            .lines()
            .skip_while(|l| *l != "//! ```lua")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or("")))
            .collect();
        assert_eq!(
            lua.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
            documented
        );
    }

    #[test]
    fn records_a_shared_log_once_and_takes_no_lease() {
        let lua = charge_tail(signature(&[
            Algorithm::SlidingLog,
            Algorithm::Concurrency,
            Algorithm::SlidingLog,
        ]));
        assert_eq!(lua.matches("local log_key = KEYS[1]\n").count(), 1);
        assert!(lua.contains("local log_units = math.min(cost, math.max(0, 2 * n1 - log_total + before1, 2 * n3 - log_total + before3))"));
        assert_eq!(
            lua.matches("'ZADD'").count(),
            2,
            "into an empty log, or not"
        );
        assert!(lua.contains("redis.call('PEXPIRE', KEYS[1], ARGV[9])"));
        assert!(lua.contains("= concurrency(KEYS[2], ARGV[5] + 0, ARGV[6] + 0, 1, now)"));
        assert!(!lua.contains("'SET'"));
    }
}
