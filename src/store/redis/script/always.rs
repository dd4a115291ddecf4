//! The always variant of a policy's script ([`Commit::Always`](crate::store::Commit)): the
//! same prelude and algorithm files as its check, and a tail of its own that charges each
//! limit its own cost whatever the others say. A limit whose cost fits commits it as a check
//! does (its state written, its remaining and reset as an admission reports them); one whose
//! cost does not fit is charged anyway, as a charge is (`debt`: past the limit, up to the debt
//! cap), and evaluated again for a cost of 0 on the state just written for its reset and
//! retry (when the debt is paid), reporting nothing left. The sliding logs are charged once,
//! as a charge charges them (the same units as a commit when they fit). No penalty box, no
//! lease: [`validate`](crate::store::validate_costs) refuses a concurrency limit.
//!
//! Keys and arguments: a charge's (`charge.rs`: the state keys, time, cost, counts and
//! periods, the logs' TTL), then each limit's cost. The reply is a check's: an admission's
//! when every cost fitted (`{ now, then per limit: its remaining or reset or both }`,
//! `reply.rs`), else the long one
//! (`{ now, 0, then per limit: ok, remaining, reset, retry }`). The signature's batch script
//! (`batch.rs`, its contract) runs this tail once per decision, with the same keys and
//! arguments per decision (no penalty, no lease) and the same replies.
//!
//! For `gcra` then `fixed_window`, it reads:
//!
//! ```lua
//! local c1 = ARGV[7] + 0
//! local c2 = ARGV[8] + 0
//! local v1 = redis.call('GET', KEYS[1])
//! local ok1, _, rem1, _, reset1, _, state1, ttl1 = gcra(v1, ARGV[3] + 0, ARGV[4] + 0, c1, now)
//! if not ok1 then _, _, _, _, _, _, state1, ttl1 = gcra(v1, ARGV[3] + 0, ARGV[4] + 0, c1, now, true) end
//! if ttl1 > 0 then redis.call('SET', KEYS[1], state1, 'PX', math.ceil(ttl1 / 1000) + ttl_slack_ms) elseif ttl1 < 0 then redis.call('SET', KEYS[1], state1, 'KEEPTTL') else redis.call('DEL', KEYS[1]) end
//! local retry1 = 0
//! if not ok1 then local _, _, _, sb, _, r = gcra(state1, ARGV[3] + 0, ARGV[4] + 0, 0, now) rem1, reset1, retry1 = 0, sb, math.max(r, 1) end
//! local v2 = redis.call('GET', KEYS[2])
//! local ok2, _, rem2, _, reset2, _, state2, ttl2 = fixed_window(v2, ARGV[5] + 0, ARGV[6] + 0, c2, now)
//! if not ok2 then _, _, _, _, _, _, state2, ttl2 = fixed_window(v2, ARGV[5] + 0, ARGV[6] + 0, c2, now, true) end
//! if ttl2 > 0 then redis.call('SET', KEYS[2], state2, 'PX', math.ceil(ttl2 / 1000) + ttl_slack_ms) elseif ttl2 < 0 then redis.call('SET', KEYS[2], state2, 'KEEPTTL') else redis.call('DEL', KEYS[2]) end
//! local retry2 = 0
//! if not ok2 then local _, _, _, sb, _, r = fixed_window(state2, ARGV[5] + 0, ARGV[6] + 0, 0, now) rem2, reset2, retry2 = 0, sb, math.max(r, 1) end
//! if ok1 and ok2 then
//!   return { now, reset1, rem2 }
//! end
//! return { now, 0, ok1 and 1 or 0, rem1, reset1, retry1, ok2 and 1 or 0, rem2, reset2, retry2 }
//! ```

use std::fmt::Write as _;

use super::charge::{charge_logs, open_logs};
use super::head::head;
use super::reply::Admitted;
use super::signature::Signature;
use super::tail::Frame;
use crate::limit::Algorithm;

/// The always script for `signature`.
pub(super) fn always_source(signature: Signature) -> String {
    let mut lua = head(signature);
    lua.push_str(&always_tail_in(signature, Frame::Single));
    lua
}

/// Each limit charged its own cost: committed where it fits, charged past the limit where not;
/// its keys and arguments where `frame` finds them (a batch runs it once per decision).
pub(super) fn always_tail_in(signature: Signature, frame: Frame) -> String {
    let algorithms: Vec<Algorithm> = signature.algorithms().collect();
    let k = algorithms.len();
    let limits = || (1..).zip(algorithms.iter().copied());
    let logs: Vec<usize> = limits()
        .filter(|(_, a)| *a == Algorithm::SlidingLog)
        .map(|(i, _)| i)
        .collect();
    let mut lua = String::from(
        "-- Always: each limit charged its own cost, past its limit if it does not fit.\n",
    );
    let w = &mut lua;
    // The costs follow the counts and periods, and the logs' TTL if any.
    let params = 2 * k + usize::from(!logs.is_empty());
    for (i, _) in limits() {
        let _ = writeln!(w, "local c{i} = {} + 0", frame.arg(params + 2 + i));
    }
    if let Some(&log) = logs.first() {
        open_logs(w, &logs, frame);
        // Each log limit's verdict and figures on the log before the charge (an admission's,
        // as the check's tail reports them), then the units charged once.
        for i in &logs {
            let _ = writeln!(
                w,
                "local used{i} = log_total - before{i}\nlocal ok{i} = used{i} + c{i} <= n{i}\nlocal rem{i}, reset{i} = n{i} - used{i} - c{i}, c{i} > 0 and p{i} or (used{i} > 0 and math.max(0, log_newest + p{i} - log_at) or 0)"
            );
        }
        charge_logs(w, &logs, k, &format!("c{log}"), frame);
    }
    for (i, algorithm) in limits() {
        if algorithm == Algorithm::SlidingLog {
            let _ = writeln!(
                w,
                "local retry{i} = 0\nif not ok{i} then local _, _, _, sb, _, r = sliding_log({}, n{i}, p{i}, 0, log_at, log_newest, log_total, before{i}) rem{i}, reset{i}, retry{i} = 0, sb, math.max(r, 1) end",
                frame.key(i)
            );
            continue;
        }
        let (count, period) = (
            format!("{} + 0", frame.arg(2 * i + 1)),
            super::tail::period(algorithm, &frame.arg(2 * i + 2)),
        );
        let function = algorithm.descriptor().lua_fn;
        // The key's value as `v{i}`: read here, or by the batch's `MGET`.
        let (read, value) = frame.value(i);
        w.push_str(&read);
        if value != format!("v{i}") {
            let _ = writeln!(w, "local v{i} = {value}");
        }
        let _ = writeln!(
            w,
            "local ok{i}, _, rem{i}, _, reset{i}, _, state{i}, ttl{i} = {function}(v{i}, {count}, {period}, c{i}, now)"
        );
        let _ = writeln!(
            w,
            "if not ok{i} then _, _, _, _, _, _, state{i}, ttl{i} = {function}(v{i}, {count}, {period}, c{i}, now, true) end"
        );
        let key = frame.key(i);
        let (make, ms) = frame.ttl_ms(&format!("math.ceil(ttl{i} / 1000) + ttl_slack_ms"));
        let _ = writeln!(
            w,
            "if ttl{i} > 0 then {make}redis.call('SET', {key}, state{i}, 'PX', {ms}) elseif ttl{i} < 0 then redis.call('SET', {key}, state{i}, 'KEEPTTL') else redis.call('DEL', {key}) end"
        );
        let _ = writeln!(
            w,
            "local retry{i} = 0\nif not ok{i} then local _, _, _, sb, _, r = {function}(state{i}, {count}, {period}, 0, now) rem{i}, reset{i}, retry{i} = 0, sb, math.max(r, 1) end"
        );
    }
    // Every limit's cost fitted: an admission's reply (of each limit's remaining and reset,
    // what the decoder cannot derive, `reply.rs`; no wait), which a batch writes short at its
    // own time.
    let all_ok: Vec<String> = limits().map(|(i, _)| format!("ok{i}")).collect();
    let _ = writeln!(w, "if {} then", all_ok.join(" and "));
    let mut allowed = vec!["now".to_owned()];
    for (i, algorithm) in limits() {
        allowed.extend(Admitted::of(algorithm).items(format!("rem{i}"), format!("reset{i}")));
    }
    w.push_str(&frame.admission("  ", &allowed));
    let _ = writeln!(w, "end");
    let mut denied = vec!["now".to_owned(), "0".to_owned()];
    for (i, _) in limits() {
        denied.extend([
            format!("ok{i} and 1 or 0"),
            format!("rem{i}"),
            format!("reset{i}"),
            format!("retry{i}"),
        ]);
    }
    w.push_str(&frame.reply("", &denied));
    lua
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
        Signature::of(&limits).with_always(true)
    }

    #[test]
    fn reads_as_the_module_documentation_shows() {
        let lua = always_tail_in(
            signature(&[Algorithm::Gcra, Algorithm::FixedWindow]),
            Frame::Single,
        );
        let documented: String = include_str!("always.rs")
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
    fn charges_a_shared_log_once_with_its_cost() {
        let lua = always_tail_in(
            signature(&[
                Algorithm::SlidingLog,
                Algorithm::Gcra,
                Algorithm::SlidingLog,
            ]),
            Frame::Single,
        );
        assert_eq!(lua.matches("local log_key = KEYS[1]\n").count(), 1);
        // Three limits and the logs' TTL: the costs from ARGV[10].
        assert!(lua.contains("local c1 = ARGV[10] + 0\nlocal c2 = ARGV[11] + 0"));
        assert!(lua.contains("local log_units = math.min(c1, math.max(0,"));
        assert_eq!(lua.matches("'ZADD'").count(), 2);
        assert!(lua.contains("sliding_log(KEYS[3], n3, p3, 0,"));
    }
}
