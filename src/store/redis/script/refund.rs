//! The refund script (`lua/refund.lua`, its contract at its head): one call gives back what
//! one admission consumed, once. Registered like the check scripts, so it runs by `EVALSHA`
//! and reloads on `NOSCRIPT`.

use std::sync::LazyLock;

use redis::Cmd;

use super::args::state_key;
use super::clock::Clock;
use super::penalty::beside;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Refund;

/// The refund script's text.
pub(crate) fn refund_source() -> &'static str {
    include_str!("../../../../lua/refund.lua")
}

/// The refund script, hashed once.
pub(crate) fn script() -> &'static redis::Script {
    static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(refund_source()));
    &SCRIPT
}

/// The `EVALSHA` that gives `refund` back to `key` under `policy`, at `clock`'s time.
pub(crate) fn refund_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    refund: &Refund,
    clock: Clock,
) -> Cmd {
    let limits = policy.limits();
    let mut command = redis::cmd("EVALSHA");
    command.arg(script().get_hash()).arg(limits.len() + 1);
    for position in 0..limits.len() {
        command.arg(state_key(prefix, policy, key, position));
    }
    command.arg(beside(
        prefix,
        policy,
        key,
        &format!("rf:{:016x}", refund.token()),
    ));
    clock.push(&mut command);
    // Every state an admission touches is moot after twice the longest period.
    let longest_ms = 2 * policy.max_period().as_millis().max(1);
    command
        .arg(refund.at_us())
        .arg(refund.cost())
        .arg(u64::try_from(longest_ms).unwrap_or(u64::MAX));
    for limit in limits {
        // A calendar window's period: the end of the admission's window.
        command
            .arg(limit.algorithm().code())
            .arg(limit.count())
            .arg(limit.period_arg(refund.at_us()));
    }
    command
}
