//! One call of a script: the state keys it reads, the `EVALSHA` that names the policy's script,
//! and the one reload a `NOSCRIPT` answer allows.

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::args::{
    check_bytes, push_always_args, push_counts_and_logs, push_keys, push_limit_args,
    push_time_and_cost,
};
use super::clock::Clock;
use super::registry::{by_hash, script_for_always, script_for_check, script_for_policy};
use crate::key::Key;
use crate::policy::Policy;

/// The `EVALSHA` of one check, built once, arguments written straight into it, at `clock`'s
/// time.
pub(crate) fn script_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    (cost, costs): (u64, Option<&[u64]>),
    clock: Clock,
) -> Cmd {
    let limits = policy.limits();
    // Sized for the whole call at once: growing it argument by argument reallocated it
    // several times per decision.
    let mut command =
        redis::Cmd::with_capacity(2 * limits.len() + 8, check_bytes(prefix, policy, key) + 96);
    command.arg("EVALSHA");
    command.arg(script_for_check(policy, costs.is_some()).script.get_hash());
    let boxed = policy.penalty_us() > 0;
    command.arg(limits.len() + usize::from(boxed));
    push_keys(&mut command, prefix, policy, key, boxed);
    push_time_and_cost(&mut command, clock, cost);
    push_limit_args(&mut command, policy, costs, clock);
    command
}

/// The `EVALSHA` of an always check of `costs` (one per limit) for `key` under `policy` (its
/// override applied by the caller): a charge's keys and arguments, then the costs, at
/// `clock`'s time.
pub(crate) fn always_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    costs: &[u64],
    clock: Clock,
) -> Cmd {
    let limits = policy.limits();
    let mut command =
        redis::Cmd::with_capacity(3 * limits.len() + 8, check_bytes(prefix, policy, key) + 128);
    command.arg("EVALSHA");
    command.arg(script_for_always(policy).script.get_hash());
    command.arg(limits.len());
    push_keys(&mut command, prefix, policy, key, false);
    push_time_and_cost(&mut command, clock, crate::store::largest_cost(costs));
    push_always_args(&mut command, policy, costs, clock);
    command
}

/// The `EVALSHA` of a charge of `cost` for `key` under `policy` (its override applied by the
/// caller): a check's keys (without the penalty box) and arguments (without the penalty and
/// the lease), at `clock`'s time.
pub(crate) fn charge_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    cost: u64,
    clock: Clock,
) -> Cmd {
    let limits = policy.limits();
    let mut command =
        redis::Cmd::with_capacity(2 * limits.len() + 8, check_bytes(prefix, policy, key) + 96);
    command.arg("EVALSHA");
    command.arg(script_for_policy(policy).charge().get_hash());
    command.arg(limits.len());
    push_keys(&mut command, prefix, policy, key, false);
    push_time_and_cost(&mut command, clock, cost);
    push_counts_and_logs(&mut command, policy, clock);
    command
}

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
    use super::super::args::state_key;
    use super::*;
    use crate::limit::Limit;
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
    fn the_keys_written_into_a_command_are_the_state_keys() {
        let g = Limit::gcra(5, Duration::from_secs(1)).unwrap();
        let s = Limit::sliding_log(5, Duration::from_secs(1)).unwrap();
        let policies = [
            Policy::new("one", [g]).unwrap(),
            Policy::new("mix", [g, s, g, s, g, g, g, g, g, g, g, g]).unwrap(),
        ];
        let keys = [
            Key::new("ip:1.2.3.4"),
            Key::new("k1")
                .with_limit_key(1, Key::new("tenant:t"))
                .with_limit_key(3, Key::new("other")),
        ];
        for policy in &policies {
            for key in &keys {
                let command = script_command("rl", policy, key, (1, None), Clock::default());
                let written: Vec<Vec<u8>> = command
                    .args_iter()
                    .skip(3)
                    .take(policy.limits().len())
                    .map(|arg| match arg {
                        Arg::Simple(bytes) => bytes.to_vec(),
                        _ => Vec::new(),
                    })
                    .collect();
                let expected: Vec<Vec<u8>> = (0..policy.limits().len())
                    .map(|p| state_key("rl", policy, key, p).into_bytes())
                    .collect();
                assert_eq!(written, expected, "{} {}", policy.name(), key.as_str());
            }
        }
        // Past the policy's limits, and past position 9.
        let one = &policies[0];
        assert_eq!(
            state_key("rl", one, &keys[0], 12),
            "rl:one:{ip:1.2.3.4}:none12"
        );
        assert_eq!(
            state_key("rl", &policies[1], &keys[0], 11),
            "rl:mix:{ip:1.2.3.4}:gc11"
        );
    }

    #[test]
    fn the_command_names_the_policy_s_script_then_keys_then_arguments() {
        let policy = policy();
        let command = script_command("rl", &policy, &Key::new("k"), (3, None), Clock::at(7));
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

    #[test]
    fn the_command_passes_each_cost_after_the_limits() {
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(5, Duration::from_secs(1)).unwrap(),
                Limit::fixed_window(9, Duration::from_secs(60)).unwrap(),
            ],
        )
        .unwrap();
        let command = always_command("rl", &policy, &Key::new("k"), &[3, 0], Clock::at(9));
        let text: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(text[1], script_for_always(&policy).script.get_hash());
        assert_eq!(
            text[2..],
            [
                "2",
                "rl:p:{k}:gc0",
                "rl:p:{k}:fw1",
                "9",
                "3",
                "5",
                "1000000",
                "9",
                "60000000",
                "3",
                "0"
            ]
        );
    }

    #[test]
    fn the_command_names_the_charge_script_without_box_or_lease() {
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(5, Duration::from_secs(1)).unwrap(),
                Limit::concurrency(2, Duration::from_secs(30)).unwrap(),
            ],
        )
        .unwrap()
        .penalty(Duration::from_secs(60))
        .unwrap();
        let command = charge_command("rl", &policy, &Key::new("k"), 7, Clock::at(9));
        let text: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(text[1], script_for_policy(&policy).charge().get_hash());
        assert_eq!(
            text[2..],
            [
                "2",
                "rl:p:{k}:gc0",
                "rl:p:{k}:cc",
                "9",
                "7",
                "5",
                "1000000",
                "2",
                "30000000"
            ]
        );
    }
}
