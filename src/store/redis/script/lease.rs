//! The Redis side of concurrency limits: the release of one lease (`lua/concurrency.lua`
//! takes them, in the sorted set [`state_key`] names: `{prefix}:{policy}:{{key}}:cc`).

use redis::Cmd;

use super::args::state_key;
use crate::key::Key;
use crate::lease::Lease;
use crate::limit::Algorithm;
use crate::policy::Policy;

/// The one command that gives `lease` back: `ZREM` of its member. Removing a member that is
/// gone (released before, or lapsed and trimmed) does nothing, so a release never frees
/// another request's slot.
pub(crate) fn release_command(prefix: &str, policy: &Policy, key: &Key, lease: Lease) -> Cmd {
    let mut command = redis::cmd("ZREM");
    command
        .arg(state_key(prefix, policy, key, concurrency_position(policy)))
        .arg(lease.member());
    command
}

/// Where the policy's concurrency limit is (a policy holds at most one).
fn concurrency_position(policy: &Policy) -> usize {
    policy
        .limits()
        .iter()
        .position(|l| l.algorithm() == Algorithm::Concurrency)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    #[test]
    fn removes_the_lease_s_member_from_the_key_s_set() {
        let policy = Policy::new(
            "up",
            [Limit::concurrency(2, Duration::from_secs(9)).unwrap()],
        )
        .unwrap();
        let command = release_command("rl", &policy, &Key::new("ip:1"), Lease::new(0xab));
        let args: Vec<String> = command
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(args, ["ZREM", "rl:up:{ip:1}:cc", "ab"]);
    }
}
