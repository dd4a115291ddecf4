//! One call of a script: the state keys it reads, the `EVALSHA` that names the policy's script,
//! and the one reload a `NOSCRIPT` answer allows.

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::registry::{by_hash, script_for};
use crate::key::Key;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// The state key of the limit at `position`: `{prefix}:{policy}:{{key}}:{code}{position}`
/// (`rl:login:{ip:1.2.3.4}:gc0`). The braces make the key the cluster hash tag; [`Key`] text
/// never contains braces, so every key of one evaluation hashes to one slot. The key names
/// the limit's position and algorithm, not its `N` and period: a changed limit (an override,
/// a reloaded policy) reads the state the old one left, each algorithm's script saying how;
/// a changed algorithm starts fresh. Sliding logs share one key.
pub(super) fn state_key(
    prefix: &str,
    policy: &str,
    key: &str,
    position: usize,
    limit: &Limit,
) -> String {
    match limit.algorithm() {
        Algorithm::SlidingLog => format!("{prefix}:{policy}:{{{key}}}:sl"),
        Algorithm::Concurrency => super::lease::leases_key(prefix, policy, key),
        algorithm => format!("{prefix}:{policy}:{{{key}}}:{}{position}", algorithm.code()),
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
    let mut command = redis::cmd("EVALSHA");
    command
        .arg(script_for(limits).script.get_hash())
        .arg(limits.len());
    for (position, limit) in limits.iter().enumerate() {
        command.arg(state_key(
            prefix,
            policy.name(),
            key.as_str(),
            position,
            limit,
        ));
    }
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command.arg(cost);
    for limit in limits {
        command.arg(limit.count()).arg(limit.period_us());
    }
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
    command
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
        assert_eq!(
            state_key("rl", "login", "ip:1.2.3.4", 0, &l),
            "rl:login:{ip:1.2.3.4}:gc0"
        );
        let s = Limit::sliding_log(5, Duration::from_secs(1)).unwrap();
        assert_eq!(
            state_key("rl", "login", "ip:1.2.3.4", 1, &s),
            "rl:login:{ip:1.2.3.4}:sl"
        );
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
        assert_eq!(text[1], script_for(policy.limits()).script.get_hash());
        assert_eq!(text[2..5], ["2", "rl:p:{k}:sl", "rl:p:{k}:sl"]);
        // Then the logs' TTL: the longest log period, plus the test slack.
        assert_eq!(
            text[5..],
            ["7", "3", "20", "60000000", "5", "3000000", "120000"]
        );
        assert!(std::ptr::eq(
            named_script(&command).unwrap(),
            &script_for(policy.limits()).script
        ));
    }
}
