//! The Rust side of the Lua script (its contract heads `lua/prelude.lua`): the assembled
//! source, the state keys it reads, the `EVALSHA` that calls it, and the decoding of its
//! reply (`{ now, allowed, per limit: allowed, remaining, reset, retry }`).

use std::sync::LazyLock;

use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind};

use crate::decision::{Decision, LimitState, LimitStates};
use crate::error::StoreError;
use crate::key::Key;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// The whole script, as sent to Redis: the prelude, the five algorithms, the check loop.
pub(super) const SOURCE: &str = concat!(
    include_str!("../../../lua/prelude.lua"),
    include_str!("../../../lua/fixed_window.lua"),
    include_str!("../../../lua/sliding_window.lua"),
    include_str!("../../../lua/sliding_log.lua"),
    include_str!("../../../lua/token_bucket.lua"),
    include_str!("../../../lua/gcra.lua"),
    include_str!("../../../lua/check.lua"),
);

/// Hashed once; calls are `EVALSHA`, and the script is loaded on `NOSCRIPT` only.
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SOURCE));

/// The state key of one limit: `{prefix}:{policy}:{{key}}:{suffix}`. The braces make the key
/// the cluster hash tag; [`Key`] text never contains braces, so every key of one evaluation
/// hashes to one slot. The suffix names the algorithm and numbers, so a changed limit starts
/// fresh instead of misreading old state; sliding logs share one key.
fn state_key(prefix: &str, policy: &str, key: &str, limit: &Limit) -> String {
    match limit.algorithm() {
        Algorithm::SlidingLog => format!("{prefix}:{policy}:{{{key}}}:sl"),
        algorithm => format!(
            "{prefix}:{policy}:{{{key}}}:{}:{}:{}",
            algorithm.code(),
            limit.count(),
            limit.period_us()
        ),
    }
}

/// The `EVALSHA` of one check, built once, arguments written straight into it. `now_us`
/// replaces Redis `TIME` (tests only).
pub(super) fn script_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    cost: u64,
    now_us: Option<u64>,
) -> Cmd {
    let mut command = redis::cmd("EVALSHA");
    command.arg(SCRIPT.get_hash()).arg(policy.limits().len());
    for limit in policy.limits() {
        command.arg(state_key(prefix, policy.name(), key.as_str(), limit));
    }
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command.arg(cost);
    for limit in policy.limits() {
        command
            .arg(limit.algorithm().code())
            .arg(limit.count())
            .arg(limit.period_us());
    }
    command
}

/// Sends the `EVALSHA`; on `NOSCRIPT` (the script never ran) loads the script and sends it
/// once more, as `redis::Script::invoke_async` does, without copying the arguments again.
pub(super) async fn evalsha(
    command: &Cmd,
    connection: &mut impl ConnectionLike,
) -> RedisResult<Vec<i64>> {
    match command.query_async(connection).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            SCRIPT.load_async(connection).await?;
            command.query_async(connection).await
        }
        result => result,
    }
}

/// Builds the decision from the script's integers, rejecting anything the script never
/// returns as [`StoreError::UnexpectedReply`].
pub(super) fn decode(policy: &Policy, reply: &[i64]) -> Result<Decision, StoreError> {
    let limits = policy.limits();
    let bad = |what: &str| StoreError::UnexpectedReply(format!("{what} in {reply:?}"));
    if reply.len() != 2 + 4 * limits.len() {
        return Err(bad("wrong length"));
    }
    let now = u64::try_from(reply[0]).map_err(|_| bad("negative time"))?;
    let flag = |v: i64| match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(bad("non-boolean flag")),
    };
    let allowed = flag(reply[1])?;
    let states = limits
        .iter()
        .zip(reply[2..].chunks_exact(4))
        .map(|(limit, raw)| {
            let remaining = u64::try_from(raw[1]).map_err(|_| bad("negative remaining"))?;
            let reset = u64::try_from(raw[2]).map_err(|_| bad("negative reset"))?;
            if raw[3] < -1 || remaining > limit.count() {
                return Err(bad("out-of-range limit state"));
            }
            Ok(LimitState::from_raw(
                *limit,
                flag(raw[0])?,
                remaining,
                reset,
                raw[3],
            ))
        })
        .collect::<Result<LimitStates, _>>()?;
    let decision = Decision::from_states(policy.name_arc(), now, states);
    if decision.is_allowed() != allowed {
        return Err(bad("inconsistent verdict"));
    }
    Ok(decision)
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
            state_key("rl", "login", "ip:1.2.3.4", &l),
            "rl:login:{ip:1.2.3.4}:gc:5:1000000"
        );
        let s = Limit::sliding_log(5, Duration::from_secs(1)).unwrap();
        assert_eq!(
            state_key("rl", "login", "ip:1.2.3.4", &s),
            "rl:login:{ip:1.2.3.4}:sl"
        );
    }

    #[test]
    fn script_is_assembled_in_order() {
        assert!(SOURCE.starts_with(include_str!("../../../lua/prelude.lua")));
        assert!(SOURCE.ends_with(include_str!("../../../lua/check.lua")));
    }

    #[test]
    fn the_command_carries_keys_then_arguments() {
        let command = script_command("rl", &policy(), &Key::new("k"), 3, Some(7));
        let text: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(text[0], "EVALSHA");
        assert_eq!(text[1], SCRIPT.get_hash());
        assert_eq!(text[2..5], ["2", "rl:p:{k}:sl", "rl:p:{k}:sl"]);
        assert_eq!(text[5..7], ["7", "3"]);
        assert_eq!(text.len(), 7 + 3 * 2);
    }

    #[test]
    fn names_the_denying_limit() {
        let d = decode(
            &policy(),
            &[
                1_000_000, 0, 1, 15, 60_000_000, 0, 0, 0, 2_500_000, 2_500_000,
            ],
        )
        .unwrap();
        assert!(!d.is_allowed());
        assert_eq!(d.denied_by(), Some(1));
        assert_eq!(d.retry_after(), Some(Duration::from_micros(2_500_000)));
        assert_eq!(d.limit(), Some(5));
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let p = policy();
        for reply in [
            &[][..],
            &[1, 1],
            &[1, 2, 1, 0, 0, 0, 1, 0, 0, 0],
            &[-1, 1, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 99, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, -5, 0, 1, 0, 0, 0],
            &[1, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, 0, -7, 1, 0, 0, 0],
        ] {
            assert!(
                matches!(decode(&p, reply), Err(StoreError::UnexpectedReply(_))),
                "{reply:?}"
            );
        }
    }
}
