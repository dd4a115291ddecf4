//! Internals exposed for the crate's own tests and benchmarks (`redlimit::__private`), behind
//! the `__test-hooks` feature. Not part of the public API: hidden from the docs, no semver
//! promise, may change in any release.

use http::HeaderMap;

use crate::decision::Decision;
use crate::response::HeaderStyle;

#[cfg(feature = "redis")]
mod script_call;

#[cfg(feature = "redis")]
pub use self::script_call::ScriptCall;

/// The headers the layer renders for a decision.
pub fn render_headers(decision: &Decision, style: HeaderStyle) -> HeaderMap {
    crate::response::headers::render(decision, style)
}

/// Decodes a script reply as the Redis store does.
#[cfg(feature = "redis")]
pub fn decode_reply(policy: &crate::Policy, reply: &[i64]) -> Result<Decision, crate::StoreError> {
    crate::store::decode_reply(policy, reply)
}

/// The very `EVALSHA` the Redis store sends for one check (Redis `TIME`), so a baseline can
/// send the same call by hand; the policy's script must be loaded first (`SCRIPT LOAD` of
/// `RedisStore::script_source_for(policy)`).
#[cfg(feature = "redis")]
pub fn script_call(
    prefix: &str,
    policy: &crate::Policy,
    key: &crate::Key,
    cost: u64,
) -> ScriptCall {
    ScriptCall::new(crate::store::script_call(prefix, policy, key, cost))
}

/// A Redis error as the Redis store reports it.
#[cfg(feature = "redis")]
pub fn store_error(err: redis::RedisError) -> crate::StoreError {
    crate::store::redis_store_error(err)
}

/// TEST ONLY: a Redis check whose script uses `now_us` (Unix µs) instead of Redis `TIME`, so
/// tests can drive time. Production code never does this: a client clock that lags would
/// rewind the limits.
#[cfg(feature = "redis")]
pub fn check_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    cost: u64,
    now_us: u64,
) -> crate::store::Check {
    crate::store::Store::check(&store.at(now_us), policy, key, cost)
}

/// TEST ONLY: a Redis charge ([`Store::charge`](crate::store::Store::charge)) whose script
/// uses `now_us` (Unix µs) instead of Redis `TIME`, to drive time as [`check_at`] does.
#[cfg(feature = "redis")]
pub fn charge_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    cost: u64,
    now_us: u64,
) -> crate::store::Check {
    store.at(now_us).charge_call(policy, key, cost)
}

/// TEST ONLY: a Redis check with a cost per limit ([`LimitCosts`](crate::store::LimitCosts)),
/// committed as `commit` says, whose script uses `now_us` (Unix µs) instead of Redis `TIME`,
/// as [`check_at`] does.
#[cfg(feature = "redis")]
pub fn check_costs_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    costs: &[u64],
    commit: crate::store::Commit,
    now_us: u64,
) -> crate::store::Check {
    crate::store::LimitCosts::check_costs(&store.at(now_us), policy, key, costs, commit)
}

/// TEST ONLY: a Redis inspection whose script uses `now_us` (Unix µs) instead of Redis `TIME`,
/// to compare with [`check_at`] at the same time.
#[cfg(feature = "redis")]
pub fn inspect_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    now_us: u64,
) -> crate::store::StoreFuture<crate::store::KeyState> {
    crate::store::Admin::inspect(&store.at(now_us), policy, key)
}

/// TEST ONLY: a Redis refund whose script uses `now_us` (Unix µs) instead of Redis `TIME`, to
/// drive time as [`check_at`] does.
#[cfg(feature = "redis")]
pub fn refund_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    refund: crate::store::Refund,
    now_us: u64,
) -> crate::store::StoreFuture<bool> {
    crate::store::Refunds::refund(&store.at(now_us), policy, key, refund)
}

/// The very `EVALSHA` the Redis store sends for one refund (Redis `TIME`), so a benchmark can
/// send it by hand; the refund script must be loaded first (`SCRIPT LOAD` of
/// `RedisStore::refund_script_source()`).
#[cfg(feature = "redis")]
pub fn refund_call(
    prefix: &str,
    policy: &crate::Policy,
    key: &crate::Key,
    refund: &crate::store::Refund,
) -> ScriptCall {
    ScriptCall::new(crate::store::refund_call(prefix, policy, key, refund))
}

/// The local-first store without I/O, for the simulation (`benches/local_first_sim.rs`).
#[cfg(feature = "redis")]
pub mod local_first {
    pub use crate::store::local_first::sim::{Batch, Fleet, Instance, Reply};

    impl Batch {
        /// The `EVAL` of the real sync script (`lua/local_first_sync.lua`) for this batch, keys
        /// under `prefix`: to hold the script and its Rust twin ([`Fleet`]) to the same
        /// answers.
        pub fn command(&self, prefix: &str) -> super::ScriptCall {
            super::ScriptCall::new(self.sync_command(prefix))
        }
    }
}

/// TEST ONLY: [`Reservations::reserve`](crate::store::Reservations::reserve) (with a
/// `max_wait`), `charge` (without) or `give_back` (`give_back`) on a Redis store, the script
/// using `now_us` instead of Redis `TIME`.
#[cfg(feature = "redis")]
pub fn reserve_at(
    store: &crate::store::RedisStore,
    policy: &crate::Policy,
    key: &crate::Key,
    costs: &[u64],
    max_wait: Option<std::time::Duration>,
    give_back: bool,
    now_us: u64,
) -> crate::store::StoreFuture<crate::store::Reserved> {
    store
        .at(now_us)
        .book(policy, key, costs, max_wait, give_back)
}

/// TEST ONLY: a reservation of `costs` made at `now_us`, `wait_us` before its slot.
pub fn reservation(costs: &[u64], now_us: u64, wait_us: u64) -> crate::store::Reservation {
    crate::store::Reservation::new(costs, now_us, wait_us)
}
