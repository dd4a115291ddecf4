//! The five rate algorithms, the calendar window and the concurrency limit in Rust, with the same integer semantics
//! as their Lua twins in `lua/` (`lua/gcra.lua` ↔ `gcra.rs`, ...). The memory store and
//! local-first mode run these; the Redis store runs the scripts. Every function is pure: state
//! in, evaluation and next state out.
//!
//! Time is in Unix microseconds. Where a ratio cannot be an integer (the sliding-window
//! weight), both sides compute it with the same IEEE-754 double operations in the same order,
//! so they agree bit for bit.
//!
//! Each algorithm file implements [`RateAlgorithm`]: its names (in logs, in Redis keys, in
//! Lua), its Lua twin, its state, its check and its refund. The table below lists them once;
//! everything that dispatches on an algorithm (`Algorithm::name`, the per-limit [`State`] of
//! the in-process stores, the scripts' text and keys) is read or generated from it. So adding
//! an algorithm touches its `.rs`, its `.lua`, its `Algorithm` variant and one row here. The
//! sliding log and the concurrency limit differ on purpose: their state is the key's, shared
//! by all their limits of a policy ([`PerKey`]).
//!
//! State that a monotonic clock could not have produced (after the store's clock stepped
//! back) is clamped on read, in Rust and Lua alike, to the most a state can hold: the limit,
//! plus as much again of debt ([`debt_cap`]: what charges past the limit may owe), so no wait
//! asked for exceeds the time that debt takes to pay.

pub(crate) mod calendar_window;
pub(crate) mod concurrency;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
mod kind;
pub(crate) mod reserve;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
#[macro_use]
mod state;
pub(crate) mod token_bucket;

use std::fmt;

pub use kind::Algorithm;
pub(crate) use state::PerKey;

/// One algorithm: what the crate needs to know of it, in one place.
pub(crate) trait RateAlgorithm {
    /// Its name on the command line and in logs (`Algorithm::name`).
    const NAME: &'static str;
    /// The two letters that name it in Redis state keys and in the arguments of the refund and
    /// sync scripts.
    const CODE: &'static str;
    /// The Lua function that checks one limit, defined in [`Self::LUA_FILE`].
    const LUA_FN: &'static str;
    /// The text of its Lua twin (`lua/NAME.lua`).
    const LUA_FILE: &'static str;
    /// Whether all its limits of a policy share one state per key (kept in [`PerKey`], one
    /// Redis key named without a position) instead of one each.
    const PER_KEY: bool = false;

    /// What one limit keeps between checks; `()` for a per-key algorithm.
    type State: Copy + fmt::Debug + PartialEq + Eq;

    /// Evaluates `cost` at `now` against `count` per `period_us`, given the limit's stored
    /// state and the key's: the verdict, the state to store if the policy commits, and how
    /// long that state matters.
    fn check(
        state: Option<Self::State>,
        key: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<Self::State>;

    /// Charges `cost` units at `now` whatever the state (a cost already incurred: it always
    /// lands, past the limit too, as debt, up to [`debt_cap`]): the state to store and how
    /// long it matters (µs). A per-key algorithm's units are charged by the entry (the
    /// sliding log's by [`Log::charge`](sliding_log::Log::charge); a concurrency limit is
    /// not charged: its slots are leases, taken by checks).
    fn charge(
        state: Option<Self::State>,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> (Self::State, u64);

    /// Gives back `cost` units admitted at `at` (a refund; see
    /// [`Refund`](crate::store::Refund) for what that means per algorithm). Never takes the
    /// state below what it was before the admission: it removes at most `cost` units, only
    /// from where the admission put them. Answers whether it gave anything back.
    fn refund(
        state: &mut Option<Self::State>,
        count: u64,
        period_us: u64,
        cost: u64,
        at: u64,
        now: u64,
    ) -> bool;
}

/// An algorithm's constants, as the parts of the crate that only name it read them.
#[derive(Debug)]
pub(crate) struct Descriptor {
    pub(crate) algorithm: Algorithm,
    pub(crate) name: &'static str,
    // The rest names an algorithm to Redis.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) code: &'static str,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) lua_fn: &'static str,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) lua_file: &'static str,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) per_key: bool,
}

impl Descriptor {
    const fn of<A: RateAlgorithm>(algorithm: Algorithm) -> Descriptor {
        Descriptor {
            algorithm,
            name: A::NAME,
            code: A::CODE,
            lua_fn: A::LUA_FN,
            lua_file: A::LUA_FILE,
            per_key: A::PER_KEY,
        }
    }
}

// The table: every algorithm, in the order of `Algorithm`'s variants (the scripts' signatures
// number them so). It generates `TABLE` and the per-limit `State` (`state.rs`).
algorithms! {
    FixedWindow => fixed_window::FixedWindow,
    SlidingWindow => sliding_window::SlidingWindow,
    SlidingLog => sliding_log::SlidingLog,
    TokenBucket => token_bucket::TokenBucket,
    Gcra => gcra::Gcra,
    Concurrency => concurrency::Concurrency,
    Calendar => calendar_window::CalendarWindow,
}

// `Algorithm::descriptor` indexes the table by variant.
const _: () = {
    let mut i = 0;
    while i < TABLE.len() {
        assert!(TABLE[i].algorithm as usize == i);
        i += 1;
    }
};

/// One limit's verdict on one request, before the policy decides whether to commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Eval {
    /// This limit alone would admit the request.
    pub(crate) allowed: bool,
    /// Units left without this request, and with it (equal when not allowed).
    pub(crate) remaining_before: u64,
    pub(crate) remaining_after: u64,
    /// µs until fully free, without this request and with it.
    pub(crate) reset_before: u64,
    pub(crate) reset_after: u64,
    /// µs until the request would be admitted: 0 when allowed, -1 when never (cost > N).
    pub(crate) retry: i64,
}

impl Eval {
    /// The verdict on a cost larger than the limit's capacity: denied, nothing consumed.
    pub(crate) fn never(remaining: u64, reset: u64) -> Self {
        Eval {
            allowed: false,
            remaining_before: remaining,
            remaining_after: remaining,
            reset_before: reset,
            reset_after: reset,
            retry: -1,
        }
    }

    /// What the decision reports for this limit, given whether the whole policy committed.
    pub(crate) fn reported(&self, committed: bool) -> (u64, u64) {
        if committed {
            (self.remaining_after, self.reset_after)
        } else {
            (self.remaining_before, self.reset_before)
        }
    }
}

/// One limit's evaluation: the verdict, the state to store if the policy commits, and how
/// long that state matters (µs; the TTL Redis would set, after which it is moot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step<S> {
    pub(crate) eval: Eval,
    pub(crate) next: S,
    pub(crate) ttl: u64,
}

impl<S> Step<S> {
    /// The same step, its next state wrapped by `f`.
    pub(crate) fn map<T>(self, f: impl FnOnce(S) -> T) -> Step<T> {
        Step {
            eval: self.eval,
            next: f(self.next),
            ttl: self.ttl,
        }
    }
}

/// The most units a limit's state holds: its count `N`, then as much again owed (debt). A
/// charge lands past the limit up to it, never beyond: a client that keeps charging while
/// refused is never asked to wait more than one period for the debt beyond the limit to be
/// paid (GCRA and the token bucket: the next unit after at most `P + T`, every unit after
/// `2P`; windows and logs forget by themselves, and are capped alike so their numbers stay
/// bounded). The Lua twins cap at `2 * n` (`lua/gcra.lua`, ...).
pub(crate) fn debt_cap(count: u64) -> u64 {
    count.saturating_mul(2)
}

/// `ceil(P / N)`: the µs between two units for token bucket and GCRA.
pub(crate) fn emission_interval(count: u64, period_us: u64) -> u64 {
    period_us.div_ceil(count).max(1)
}

/// Converts a µs span to an `i64` for `retry`, saturating (spans are bounded far below).
pub(crate) fn span(us: u64) -> i64 {
    i64::try_from(us).unwrap_or(i64::MAX)
}

/// The end of the epoch-aligned window of `period_us` that holds `at`.
pub(crate) fn window_end(at: u64, period_us: u64) -> u64 {
    (at / period_us + 1) * period_us
}
