//! One call of a script: the state keys it reads, the `EVALSHA` that names the policy's script,
//! and the one reload a `NOSCRIPT` answer allows.

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind, Value};

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
    evalsha_with(command, connection, converted).await
}

/// [`evalsha`], its reply converted by [`Reply::from_reply`].
pub(crate) async fn evalsha_reply<T: Reply>(
    command: &Cmd,
    connection: &mut impl ConnectionLike,
) -> RedisResult<T> {
    evalsha_with(command, connection, T::from_reply).await
}

async fn evalsha_with<T>(
    command: &Cmd,
    connection: &mut impl ConnectionLike,
    convert: fn(Value) -> RedisResult<T>,
) -> RedisResult<T> {
    match connection
        .req_packed_command(command)
        .await
        .and_then(convert)
    {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // Every command names a script this process made (`script_command`).
            let Some(script) = named_script(command) else {
                return Err(err);
            };
            script.load_async(connection).await?;
            connection
                .req_packed_command(command)
                .await
                .and_then(convert)
        }
        result => result,
    }
}

/// `value` converted as `Cmd::query_async` converts a reply: an error in it (at any depth)
/// is the call's error, the rest is `T`'s.
fn converted<T: FromRedisValue>(value: Value) -> RedisResult<T> {
    Ok(redis::from_redis_value(value.extract_error()?)?)
}

/// A reply type of the calls a batcher makes, converted as `Cmd::query_async` converts it,
/// or by a shorter path where the result is the same.
pub(crate) trait Reply: FromRedisValue {
    /// `value` as this type.
    fn from_reply(value: Value) -> RedisResult<Self> {
        converted(value)
    }
}

/// A check's reply, integers only, taken as they are: redis-rs's conversion (looking for an
/// error in each element, then converting each) cost about 560 instructions more a decision
/// for the same integers. Anything else (an error among them, a `nil`, a string) is converted as
/// `Cmd::query_async` converts it.
impl Reply for Vec<i64> {
    fn from_reply(value: Value) -> RedisResult<Self> {
        match value {
            // Collected in place, in the array's allocation.
            Value::Array(items) if items.iter().all(|item| matches!(item, Value::Int(_))) => {
                Ok(items
                    .into_iter()
                    .filter_map(|item| match item {
                        Value::Int(n) => Some(n),
                        _ => None,
                    })
                    .collect())
            }
            value => converted(value),
        }
    }
}

/// A batch's reply: one array per decision (`batch.rs`).
impl Reply for Vec<Value> {}

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

    /// A connection answering every command with one reply, as a connection hands a reply
    /// (errors in it included) to `Cmd::query_async`.
    struct Canned(Value);

    impl ConnectionLike for Canned {
        fn req_packed_command<'a>(&'a mut self, _: &'a Cmd) -> redis::RedisFuture<'a, Value> {
            Box::pin(std::future::ready(Ok(self.0.clone())))
        }

        fn req_packed_commands<'a>(
            &'a mut self,
            _: &'a redis::Pipeline,
            _: usize,
            _: usize,
        ) -> redis::RedisFuture<'a, Vec<Value>> {
            Box::pin(std::future::ready(Ok(vec![self.0.clone()])))
        }

        fn get_db(&self) -> i64 {
            0
        }
    }

    /// The reply `resp` (RESP bytes) as ours reads it, and as redis-rs's own `query_async`
    /// does, as comparable text.
    fn both(resp: &[u8]) -> (String, String) {
        let value = redis::parse_redis_value(resp).unwrap();
        let show = |r: RedisResult<Vec<i64>>| match r {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("{:?}: {e}", e.kind()),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let theirs =
            runtime.block_on(redis::cmd("EVALSHA").query_async(&mut Canned(value.clone())));
        (show(Vec::<i64>::from_reply(value)), show(theirs))
    }

    #[test]
    fn a_check_reply_converts_as_query_async_converts_it() {
        for resp in [
            &b"*2\r\n:1764400000123456\r\n:-3\r\n"[..],
            b"*0\r\n",
            // Not integers only: the general conversion, whose answers these are.
            b"*2\r\n:1\r\n$2\r\n42\r\n",
            b"*2\r\n:1\r\n-NOSCRIPT No matching script\r\n",
            b"*2\r\n:1\r\n$-1\r\n",
            b"-NOSCRIPT No matching script\r\n",
            b"$-1\r\n",
            b":7\r\n",
            b"+OK\r\n",
        ] {
            let (fast, general) = both(resp);
            assert_eq!(fast, general, "{}", String::from_utf8_lossy(resp));
        }
        let (fast, _) = both(b"*2\r\n:1\r\n:2\r\n");
        assert_eq!(fast, "[1, 2]");
        let (error, _) = both(b"*2\r\n:1\r\n-NOSCRIPT No matching script\r\n");
        assert!(error.starts_with("Server(NoScript)"), "{error}");
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
