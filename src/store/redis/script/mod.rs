//! The Rust side of the Lua scripts (their contract heads `lua/prelude.lua`). The store runs
//! one script per algorithm mix, not one script for every policy: a script defines only the
//! algorithms its policy uses and ends in a tail written for its limits, so a decision costs
//! Redis what a hand-written script of the same algorithm does (`benches/redis_cost`).
//!
//! The Lua text: `head` (the prelude and each algorithm's file), `source` and `tail` (a check's
//! script and its batch variant), `charge` (a charge's tail), `always` (each limit charged its
//! own cost, `Commit::Always`, batched as a check is); `signature`: which script a policy runs,
//! and its batch's shape; `registry`: the scripts made so far, from the Lua text. The calls:
//! `args` (the state keys, the time and cost, the limits' arguments), `clock` (the time a
//! script decides at), `call` (a check's, an always check's and a charge's `EVALSHA`, from the
//! registry's hashes, and the reload on `NOSCRIPT`), `check` (a check's arguments until it is
//! sent), `batch` (several decisions in one call), `poll` (the overrides poll's script);
//! `reply`: the reply's form and its decoding; `lease`: the leases of concurrency limits. The
//! Lua text never asks for a call, so the registry sits between them.

mod always;
mod args;
mod batch;
mod call;
mod charge;
mod check;
mod clock;
mod head;
mod lease;
pub(super) mod peek;
mod penalty;
mod poll;
mod refund;
mod registry;
mod reply;
mod reserve;
mod signature;
mod source;
mod tail;

use std::sync::LazyLock;
use std::time::Duration;

use crate::limit::{Algorithm, Limit};

#[cfg(test)]
pub(super) use self::args::state_key;
pub(super) use self::batch::{batch_command, split};
pub(super) use self::call::charge_command;
#[cfg(feature = "__test-hooks")]
pub(super) use self::call::script_command;
pub(super) use self::call::{Reply, evalsha, evalsha_reply};
pub(super) use self::check::CheckArgs;
pub(super) use self::clock::Clock;
pub(super) use self::lease::release_command;
pub(super) use self::penalty::box_key;
pub(super) use self::poll::{poll_command, script as poll_script, unknown_command};
pub(super) use self::refund::{refund_command, refund_source};
pub(super) use self::registry::{
    LuaScript, Prepared, script_for, script_for_always, script_for_check, script_for_policy,
};
pub(super) use self::reply::decode;
pub(super) use self::reserve::{
    Mode as ReserveMode, reserve_command, reserve_source, script as reserve_script,
};

/// The script of a policy with one limit of each algorithm, in the order of
/// `Algorithm::EVERY`: every line of Lua a script of this store can hold.
pub(super) fn every_algorithm_source() -> &'static str {
    static EVERY: LazyLock<&'static str> = LazyLock::new(|| {
        let limits: Vec<Limit> = Algorithm::EVERY
            .into_iter()
            .map(|a| match a {
                Algorithm::Calendar => {
                    let day = crate::calendar::Calendar::day()
                        .utc()
                        .expect("a valid calendar");
                    Limit::calendar(1, day).expect("a valid limit")
                }
                a => Limit::new(a, 1, Duration::from_secs(1)).expect("a valid limit"),
            })
            .collect();
        &script_for(&limits).source
    });
    &EVERY
}
