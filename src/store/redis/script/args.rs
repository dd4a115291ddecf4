//! What a script call carries besides the script's name: the state keys it reads (their
//! names), the time and the cost, and the limits' arguments, as every script of a check, a
//! charge, a batch or a peek reads them (`lua/prelude.lua`'s contract).

use std::io::Write as _;

use redis::{Cmd, RedisWrite};

use super::clock::Clock;
use super::penalty::box_key;
use crate::key::Key;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// The state key of the limit at `position`: `{prefix}:{policy}:{{key}}:{code}{position}`
/// (`rl:login:{ip:1.2.3.4}:gc0`). The braces make the key the cluster hash tag; [`Key`] text
/// never contains braces, so every key of one evaluation hashes to one slot. The key names
/// the limit's position and algorithm, not its `N` and period: a changed limit (an override,
/// a reloaded policy) reads the state the old one left, each algorithm's script saying how;
/// a changed algorithm starts fresh. Sliding logs share one key.
///
/// A key with limit keys ([`Key::with_limit_key`]) names each limit's own key after the
/// check's hash tag (the widest key, [`Key::hash_tag`]):
/// `{prefix}:{policy}:{{tag}}:{limit key}:{code}{position}`
/// (`rl:api:{tenant:acme}:#1a2b:gc0`, `rl:api:{tenant:acme}:tenant:acme:fw1`), so a tenant's
/// limit is one key whichever of its clients counts against it. Sliding logs share the key of
/// the first one.
///
/// A key whose limit keys name their states ([`Key::with_named_limit_keys`]) names neither
/// the policy's limits' positions nor the widest key: `{prefix}:{policy}:{{key}}:{limit
/// key}:{code}` (`rl:rls:{rls:envoy}:envoy%00path%00%2Fa:fw`), one state whichever check
/// and position the limit comes in.
pub(in crate::store::redis) fn state_key(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    position: usize,
) -> String {
    let mut text =
        String::with_capacity(prefix.len() + policy.name().len() + 2 * key.as_str().len() + 12);
    state_key_pieces(prefix, policy, key, position, &mut |piece| {
        text.push_str(piece)
    });
    text
}

/// [`state_key`] piece by piece, into `put` (a check writes its keys straight into its
/// command: no `String` per key, no formatting machinery).
fn state_key_pieces(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    position: usize,
    put: &mut impl FnMut(&str),
) {
    let mut digits = itoa::Buffer::new();
    let position_text = digits.format(position);
    let limits = policy.limits();
    let name = policy.name();
    let head = |put: &mut dyn FnMut(&str), tag: &str| {
        for piece in [prefix, ":", name, ":{", tag, "}:"] {
            put(piece);
        }
    };
    let Some(limit) = limits.get(position) else {
        head(&mut *put, key.as_str());
        put("none");
        put(position_text);
        return;
    };
    let algorithm = limit.algorithm();
    let row = algorithm.descriptor();
    let code = row.code;
    // A per-key algorithm's limits (sliding logs; a policy's one concurrency limit) share one
    // state: its key names no position, and with limit keys it is the first such limit's.
    if !key.has_limit_keys() {
        head(&mut *put, key.as_str());
        put(code);
        if !row.per_key {
            put(position_text);
        }
        return;
    }
    head(&mut *put, key.hash_tag());
    let (own, numbered) = if key.names_limit_states() {
        (position, false)
    } else if row.per_key {
        let first = limits
            .iter()
            .position(|l| l.algorithm() == algorithm)
            .unwrap_or(position);
        (first, false)
    } else {
        (position, true)
    };
    put(key.limit_key(own).as_str());
    put(":");
    put(code);
    if numbered {
        put(position_text);
    }
}

/// About the bytes a check's keys and arguments take in a command (what sizes it).
pub(super) fn check_bytes(prefix: &str, policy: &Policy, key: &Key) -> usize {
    policy.limits().len() * (prefix.len() + policy.name().len() + key.as_str().len() + 40)
}

/// Writes a check's state keys, one per limit, then the penalty box's if `boxed`.
pub(super) fn push_keys(command: &mut Cmd, prefix: &str, policy: &Policy, key: &Key, boxed: bool) {
    for position in 0..policy.limits().len() {
        let mut arg = command.writer_for_next_arg();
        state_key_pieces(prefix, policy, key, position, &mut |piece| {
            // Writing into a `Vec` cannot fail.
            let _ = arg.write_all(piece.as_bytes());
        });
    }
    if boxed {
        command.arg(box_key(prefix, policy, key));
    }
}

/// Writes a check's time (`clock`'s) and cost.
pub(super) fn push_time_and_cost(command: &mut Cmd, clock: Clock, cost: u64) {
    clock.push(command);
    command.arg(cost);
}

/// Writes the arguments of `policy`'s limits a check's script reads after its time and cost:
/// each limit's count and period, the logs' TTL (with `clock`'s slack), the penalty, then
/// each limit's cost when it has one of its own (`costs`). Two checks whose policies write the
/// same here, and whose costs are the same, share a batch's run ([`same_limit_args`]).
pub(super) fn push_limit_args(
    command: &mut Cmd,
    policy: &Policy,
    costs: Option<&[u64]>,
    clock: Clock,
) {
    push_counts_and_logs(command, policy, clock);
    let penalty_us = policy.penalty_us();
    if penalty_us > 0 {
        command.arg(penalty_us);
    }
    for cost in costs.unwrap_or_default() {
        command.arg(*cost);
    }
}

/// Writes each limit's count and period, then the logs' TTL if the policy has sliding logs
/// (with `clock`'s slack): [`push_limit_args`] without the penalty and the costs, as a
/// charge's script reads them (`charge.rs`).
pub(super) fn push_counts_and_logs(command: &mut Cmd, policy: &Policy, clock: Clock) {
    let limits = policy.limits();
    for limit in limits {
        push_count_and_period(command, limit, clock);
    }
    let log_span_us = limits
        .iter()
        .filter(|l| l.algorithm() == Algorithm::SlidingLog)
        .map(Limit::period_us)
        .max();
    if let Some(span_us) = log_span_us {
        command.arg(span_us.div_ceil(1000) + clock.ttl_slack_ms());
    }
}

/// Whether [`push_limit_args`] writes the same for `a` and `b` (at times both given or both
/// Redis's).
pub(super) fn same_limit_args(a: &Policy, b: &Policy) -> bool {
    let (x, y) = (a.limits(), b.limits());
    let same_limits = std::ptr::eq(x, y)
        || (x.len() == y.len()
            && x.iter().zip(y).all(|(x, y)| {
                x.algorithm() == y.algorithm()
                    && x.count() == y.count()
                    && x.period_us() == y.period_us()
                    && x.aligned_to() == y.aligned_to()
            }));
    same_limits && a.penalty_us() == b.penalty_us()
}

/// Writes what every script that evaluates a check reads first (`lua/prelude.lua`): the number
/// of keys, each limit's state key (and the penalty box's, if `boxed`), the time (`clock`'s),
/// the cost, and each limit's count and period.
pub(super) fn push_check_args(
    command: &mut Cmd,
    prefix: &str,
    policy: &Policy,
    key: &Key,
    boxed: bool,
    clock: Clock,
    cost: u64,
) {
    let limits = policy.limits();
    command.arg(limits.len() + usize::from(boxed));
    push_keys(command, prefix, policy, key, boxed);
    push_time_and_cost(command, clock, cost);
    for limit in limits {
        push_count_and_period(command, limit, clock);
    }
}

/// Writes a limit's count and period; for a calendar window, instead of the period, the
/// boundaries of its windows around the client's time ([`Clock::client_time_us`]): the
/// previous, current and next windows, of which the script takes the one that holds Redis's
/// time (`lua/calendar_window.lua`).
fn push_count_and_period(command: &mut Cmd, limit: &Limit, clock: Clock) {
    command.arg(limit.count());
    let Some(calendar) = limit.aligned_to() else {
        command.arg(limit.period_us());
        return;
    };
    let at = clock.client_time_us();
    let mut arg = command.writer_for_next_arg();
    // None only outside the years -9999 to 9999: then no boundary, which the script refuses.
    if let Some([a, b, c, d]) = calendar.bounds_around(at) {
        // Writing into a `Vec` cannot fail.
        let _ = write!(arg, "{a} {b} {c} {d}");
    }
}

/// Writes the arguments of an always check's limits after its time and cost: each limit's
/// count and period, the logs' TTL, then each limit's cost (no penalty: a box plays no part).
pub(super) fn push_always_args(command: &mut Cmd, policy: &Policy, costs: &[u64], clock: Clock) {
    push_counts_and_logs(command, policy, clock);
    for i in 0..policy.limits().len() {
        command.arg(crate::store::cost_at(costs, i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_share_a_hash_tag() {
        let l = Limit::gcra(5, Duration::from_secs(1)).unwrap();
        let s = Limit::sliding_log(5, Duration::from_secs(1)).unwrap();
        let login = Policy::new("login", [l, s]).unwrap();
        let ip = Key::new("ip:1.2.3.4");
        assert_eq!(state_key("rl", &login, &ip, 0), "rl:login:{ip:1.2.3.4}:gc0");
        assert_eq!(state_key("rl", &login, &ip, 1), "rl:login:{ip:1.2.3.4}:sl");
    }

    #[test]
    fn limit_keys_follow_the_widest_key_s_tag() {
        let g = Limit::gcra(5, Duration::from_secs(1)).unwrap();
        let s = Limit::sliding_log(5, Duration::from_secs(1)).unwrap();
        let api = Policy::new("api", [g, g, s, s]).unwrap();
        let key = Key::new("k1")
            .with_limit_key(1, Key::new("tenant:t"))
            .with_limit_key(3, Key::new("other"));
        let keys: Vec<String> = (0..4).map(|p| state_key("rl", &api, &key, p)).collect();
        assert_eq!(
            keys,
            [
                "rl:api:{other}:k1:gc0",
                "rl:api:{other}:tenant:t:gc1",
                // Logs share one: the first log's key.
                "rl:api:{other}:k1:sl",
                "rl:api:{other}:k1:sl",
            ]
        );
        // One slot for the whole check.
        let slots: Vec<u16> = keys
            .iter()
            .map(|k| crate::store::redis::slot::slot(k.as_bytes()))
            .collect();
        assert!(slots.windows(2).all(|w| w[0] == w[1]));
    }
}
