//! One call of a script: the state keys it reads, the `EVALSHA` that names the policy's script,
//! and the one reload a `NOSCRIPT` answer allows.

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::penalty::box_key;
use super::registry::{by_hash, script_for_policy};
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
    let limits = policy.limits();
    let Some(limit) = limits.get(position) else {
        return format!(
            "{prefix}:{}:{{{}}}:none{position}",
            policy.name(),
            key.as_str()
        );
    };
    let name = policy.name();
    let algorithm = limit.algorithm();
    let row = algorithm.descriptor();
    let code = row.code;
    // A per-key algorithm's limits (sliding logs; a policy's one concurrency limit) share one
    // state: its key names no position, and with limit keys it is the first such limit's.
    if !key.has_limit_keys() {
        let key = key.as_str();
        return if row.per_key {
            format!("{prefix}:{name}:{{{key}}}:{code}")
        } else {
            format!("{prefix}:{name}:{{{key}}}:{code}{position}")
        };
    }
    let tag = key.hash_tag();
    if key.names_limit_states() {
        let own = key.limit_key(position).as_str();
        return format!("{prefix}:{name}:{{{tag}}}:{own}:{code}");
    }
    if row.per_key {
        let first = limits
            .iter()
            .position(|l| l.algorithm() == algorithm)
            .unwrap_or(position);
        let own = key.limit_key(first).as_str();
        format!("{prefix}:{name}:{{{tag}}}:{own}:{code}")
    } else {
        let own = key.limit_key(position).as_str();
        format!("{prefix}:{name}:{{{tag}}}:{own}:{code}{position}")
    }
}

/// The `EVALSHA` of one check, built once, arguments written straight into it. `now_us`
/// replaces Redis `TIME` (tests only).
pub(crate) fn script_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    cost: u64,
    now_us: Option<u64>,
) -> Cmd {
    let limits = policy.limits();
    let penalty_us = policy.penalty_us();
    let mut command = redis::cmd("EVALSHA");
    command.arg(script_for_policy(policy).script.get_hash());
    push_check_args(
        &mut command,
        prefix,
        policy,
        key,
        penalty_us > 0,
        now_us,
        cost,
    );
    let log_span_us = limits
        .iter()
        .filter(|l| l.algorithm() == Algorithm::SlidingLog)
        .map(Limit::period_us)
        .max();
    if let Some(span_us) = log_span_us {
        let slack_ms = if now_us.is_some() {
            TEST_TTL_SLACK_MS
        } else {
            0
        };
        command.arg(span_us.div_ceil(1000) + slack_ms);
    }
    if penalty_us > 0 {
        command.arg(penalty_us);
    }
    command
}

/// Writes what every script that evaluates a check reads first (`lua/prelude.lua`): the number
/// of keys, each limit's state key (and the penalty box's, if `boxed`), the time (`now_us`
/// replaces Redis `TIME`, tests only), the cost, and each limit's count and period.
pub(super) fn push_check_args(
    command: &mut Cmd,
    prefix: &str,
    policy: &Policy,
    key: &Key,
    boxed: bool,
    now_us: Option<u64>,
    cost: u64,
) {
    let limits = policy.limits();
    command.arg(limits.len() + usize::from(boxed));
    for position in 0..limits.len() {
        command.arg(state_key(prefix, policy, key, position));
    }
    if boxed {
        command.arg(box_key(prefix, policy, key));
    }
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command.arg(cost);
    for limit in limits {
        command.arg(limit.count()).arg(limit.period_us());
    }
}

/// TEST ONLY: the TTL slack of state written at an explicit time (`ttl_slack_ms` in
/// `lua/prelude.lua`), so real time passing during a test does not expire simulated state.
const TEST_TTL_SLACK_MS: u64 = 60_000;

/// Sends the `EVALSHA`; on `NOSCRIPT` (the script never ran) loads the script it names and
/// sends it once more, as `redis::Script::invoke_async` does, without copying the arguments
/// again. Any other failure is returned as is: after a timeout or an I/O error the call may
/// have run, and sending it again could count it twice.
pub(crate) async fn evalsha<T: FromRedisValue>(
    command: &Cmd,
    connection: &mut impl ConnectionLike,
) -> RedisResult<T> {
    match command.query_async(connection).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // Every command names a script this process made (`script_command`).
            let Some(script) = named_script(command) else {
                return Err(err);
            };
            script.load_async(connection).await?;
            command.query_async(connection).await
        }
        result => result,
    }
}

/// The script an `EVALSHA` names (its first argument).
fn named_script(command: &Cmd) -> Option<&'static redis::Script> {
    match command.args_iter().nth(1)? {
        Arg::Simple(hash) => by_hash(std::str::from_utf8(hash).ok()?),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn policy() -> Policy {
        Policy::new(
            "p",
            [
                Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
                Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
            ],
        )
        .unwrap()
    }

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

    #[test]
    fn the_command_names_the_policy_s_script_then_keys_then_arguments() {
        let policy = policy();
        let command = script_command("rl", &policy, &Key::new("k"), 3, Some(7));
        let text: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(text[0], "EVALSHA");
        assert_eq!(text[1], script_for_policy(&policy).script.get_hash());
        assert_eq!(text[2..5], ["2", "rl:p:{k}:sl", "rl:p:{k}:sl"]);
        // Then the logs' TTL: the longest log period, plus the test slack.
        assert_eq!(
            text[5..],
            ["7", "3", "20", "60000000", "5", "3000000", "120000"]
        );
        assert!(std::ptr::eq(
            named_script(&command).unwrap(),
            &script_for_policy(&policy).script
        ));
    }
}
