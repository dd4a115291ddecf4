//! Resets told to every replica: a reset deletes the key's state, then appends
//! `POLICY\nKEY` to a log in Redis (`lua/reset_log.lua`) beside the overrides, with the same
//! hash tag (one slot in a Cluster). Each store reads the entries it has not seen in the same
//! call that polls the overrides (`poll.rs`) and records them in its [`ResetLog`], so every
//! layer in front of every replica drops its cached denials of the key, and a local-first
//! store decides it exactly until its next sync brings the fresh state.
//!
//! The log keeps the last [`KEPT`] resets and expires [`LOG_TTL`] after the last one; its
//! counter never expires. A replica that finds entries missing (it was away longer, or Redis
//! lost them) counts every key as reset: its denials are asked again once.
//!
//! [`ResetLog`]: crate::store::reset_log::ResetLog

use std::time::Duration;

use crate::key::Key;

/// Resets the log in Redis keeps.
const KEPT: u64 = 1000;

/// How long the log stays after the last reset.
const LOG_TTL: Duration = Duration::from_secs(600);

const PUBLISH: &str = include_str!("../../../lua/reset_log.lua");

pub(super) fn counter_key(prefix: &str) -> String {
    format!("{prefix}:{{overrides}}:resets:n")
}

pub(super) fn log_key(prefix: &str) -> String {
    format!("{prefix}:{{overrides}}:resets")
}

/// The `EVAL` that appends a reset of `key` under `policy`, made by the store `origin`.
pub(super) fn publish_command(prefix: &str, origin: u64, policy: &str, key: &Key) -> redis::Cmd {
    let mut command = redis::cmd("EVAL");
    command
        .arg(PUBLISH)
        .arg(2)
        .arg(counter_key(prefix))
        .arg(log_key(prefix))
        .arg(format!("{origin}\n{policy}\n{key}"))
        .arg(KEPT)
        .arg(LOG_TTL.as_millis() as u64);
    command
}

/// One entry of the log: who reset which key (`None` if it is not an entry).
pub(super) fn parse_entry(member: &str) -> Option<(u64, &str, Key)> {
    let mut parts = member.splitn(4, '\n');
    let _n = parts.next()?;
    let origin = parts.next()?.parse().ok()?;
    let policy = parts.next()?;
    let key = Key::from_encoded(parts.next()?)?;
    Some((origin, policy, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_back_and_garbage_does_not() {
        let key = Key::new("a").with_limit_key(1, Key::new("tenant:t"));
        let member = format!("7\n42\napi\n{key}");
        let (origin, policy, read) = parse_entry(&member).unwrap();
        assert_eq!((origin, policy, read), (42, "api", key));
        for garbage in ["", "7", "7\nx\napi\nk", "7\n1\napi", "7\n1\napi\n{}"] {
            assert!(parse_entry(garbage).is_none(), "{garbage:?}");
        }
    }
}
