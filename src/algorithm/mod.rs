//! The five rate algorithms and the concurrency limit in Rust, with the same integer semantics as their Lua twins in `lua/`
//! (`lua/gcra.lua` ↔ `gcra.rs`, ...). The memory store runs these; the Redis store runs the
//! scripts. Every function is pure: state in, evaluation and next state out.
//!
//! Time is in Unix microseconds. Where a ratio cannot be an integer (the sliding-window
//! weight), both sides compute it with the same IEEE-754 double operations in the same order,
//! so they agree bit for bit.
//!
//! Every algorithm with per-limit state has the same shape: `check(state, count, period_us,
//! cost, now) -> Step<State>` (and in Lua `NAME_check` / `NAME_commit`), so adding one touches
//! its `.rs`, its `.lua` and the dispatch tables only. The sliding log differs on purpose: all
//! sliding-log limits of a policy share one log per key.
//!
//! State that a monotonic clock could not have produced (after the store's clock stepped
//! back) is clamped on read, in Rust and Lua alike, so no wait asked for exceeds the period.

pub(crate) mod concurrency;
pub(crate) mod fixed_window;
pub(crate) mod gcra;
pub(crate) mod refund;
pub(crate) mod sliding_log;
pub(crate) mod sliding_window;
pub(crate) mod token_bucket;

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

/// `ceil(P / N)`: the µs between two units for token bucket and GCRA.
pub(crate) fn emission_interval(count: u64, period_us: u64) -> u64 {
    period_us.div_ceil(count).max(1)
}

/// Converts a µs span to an `i64` for `retry`, saturating (spans are bounded far below).
pub(crate) fn span(us: u64) -> i64 {
    i64::try_from(us).unwrap_or(i64::MAX)
}
