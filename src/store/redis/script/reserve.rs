//! The reservation script (`lua/reserve.lua`, its contract at its head): one call books the
//! earliest slot under every limit of a policy, charges units at once, or gives a reservation
//! back. Registered like the check scripts, so it runs by `EVALSHA` and reloads on
//! `NOSCRIPT`.

use std::sync::LazyLock;

use redis::Cmd;

use super::args::state_key;
use super::clock::Clock;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::cost_at;

/// The reservation script's text.
pub(crate) fn reserve_source() -> &'static str {
    include_str!("../../../../lua/reserve.lua")
}

/// The reservation script, hashed once.
pub(crate) fn script() -> &'static redis::Script {
    static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(reserve_source()));
    &SCRIPT
}

/// What a call does: reserve within a wait (µs), charge, or give back (`ARGV[2]`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    Reserve(u64),
    Charge,
    GiveBack,
}

/// The `EVALSHA` that books `costs` (one per limit, or one for all) for `key` under `policy`
/// in `mode`, at `clock`'s time.
pub(crate) fn reserve_command(
    prefix: &str,
    policy: &Policy,
    key: &Key,
    costs: &[u64],
    mode: Mode,
    clock: Clock,
) -> Cmd {
    let limits = policy.limits();
    let mut command = redis::cmd("EVALSHA");
    command.arg(script().get_hash()).arg(limits.len());
    for position in 0..limits.len() {
        command.arg(state_key(prefix, policy, key, position));
    }
    clock.push(&mut command);
    match mode {
        Mode::Reserve(max) => command.arg(max),
        Mode::Charge => command.arg(-1),
        Mode::GiveBack => command.arg(-2),
    };
    for (i, limit) in limits.iter().enumerate() {
        command
            .arg(limit.algorithm().code())
            .arg(limit.count())
            .arg(limit.period_us())
            .arg(cost_at(costs, i));
    }
    command
}
