//! Fixed window: `N` per window of `P` aligned to the Unix epoch. Twin of `lua/fixed_window.lua`.

use super::{Eval, PerKey, RateAlgorithm, Step, debt_cap, span, window_end};

/// The count of the window the key last saw, and when that window ends (Unix µs).
///
/// The end, not the window's index, so that a changed limit keeps the count: while the stored
/// window has not ended its count is the current window's count whatever the new `N` and `P`
/// (90 used of 100 leaves 910 of 1000), and the next write moves it to the current window's
/// end. (On one unchanged limit a stored window that has not ended is the current one, or one
/// ahead of it after a clock step back, which then counts in the current window.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) end: u64,
    pub(crate) count: u64,
}

/// The fixed window in the table.
pub(crate) struct FixedWindow;

impl RateAlgorithm for FixedWindow {
    const NAME: &'static str = "fixed-window";
    const CODE: &'static str = "fw";
    const LUA_FN: &'static str = "fixed_window";
    const LUA_FILE: &'static str = include_str!("../../lua/fixed_window.lua");
    type State = State;

    /// Evaluates `cost` against `count`/`period_us` at `now`; returns the verdict and the state to
    /// store (with its time to live in µs) if the policy commits.
    fn check(
        state: Option<State>,
        _: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<State> {
        check_in(state, count, window_end(now, period_us), cost, now)
    }

    /// Adds `cost` to the current window's count whatever it holds: past `N` the window is
    /// refused to its end (it forgets by itself); the count stops at `2·N`.
    fn charge(
        state: Option<State>,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> (State, u64) {
        charge_in(state, count, window_end(now, period_us), cost, now)
    }

    /// Takes the cost off the count of the window the admission was counted in, while it lasts.
    fn refund(
        state: &mut Option<State>,
        _: u64,
        period_us: u64,
        cost: u64,
        at: u64,
        now: u64,
    ) -> bool {
        refund_in(state, window_end(at, period_us), cost, now)
    }
}

/// Evaluates `cost` at `now` in the window that ends at `end` (after `now`): the fixed
/// window's check, and the calendar window's (`calendar_window.rs`), whose windows end where
/// the calendar says.
pub(crate) fn check_in(
    state: Option<State>,
    count: u64,
    end: u64,
    cost: u64,
    now: u64,
) -> Step<State> {
    let used = state.filter(|s| s.end > now).map_or(0, |s| s.count);
    let until_end = end - now;
    let remaining = count.saturating_sub(used);
    let reset_before = if used == 0 { 0 } else { until_end };
    let next = State {
        end,
        count: used + cost,
    };
    if cost > count {
        return Step {
            eval: Eval::never(remaining, reset_before),
            next,
            ttl: until_end,
        };
    }
    let allowed = used + cost <= count;
    let eval = Eval {
        allowed,
        remaining_before: remaining,
        remaining_after: if allowed { remaining - cost } else { remaining },
        reset_before,
        reset_after: if allowed && used + cost > 0 {
            until_end
        } else {
            reset_before
        },
        retry: if allowed { 0 } else { span(until_end) },
    };
    Step {
        eval,
        next,
        ttl: until_end,
    }
}

/// Charges `cost` at `now` to the window that ends at `end`, up to the debt cap: the state
/// and its TTL.
pub(crate) fn charge_in(
    state: Option<State>,
    count: u64,
    end: u64,
    cost: u64,
    now: u64,
) -> (State, u64) {
    let used = state.filter(|s| s.end > now).map_or(0, |s| s.count);
    let charged = used.max(used.saturating_add(cost).min(debt_cap(count)));
    (
        State {
            end,
            count: charged,
        },
        end - now,
    )
}

/// Takes `cost` off the count of the window that ends at `end` (the admission's), while it
/// lasts.
pub(crate) fn refund_in(state: &mut Option<State>, end: u64, cost: u64, now: u64) -> bool {
    match state {
        Some(s) if s.end == end && s.end > now && s.count > 0 => {
            s.count = s.count.saturating_sub(cost);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(state: Option<State>, n: u64, p: u64, cost: u64, now: u64) -> Step<State> {
        FixedWindow::check(state, &PerKey::default(), n, p, cost, now)
    }

    const P: u64 = 1_000_000;

    fn run(state: &mut Option<State>, cost: u64, now: u64) -> Eval {
        let Step { eval, next, .. } = check(*state, 3, P, cost, now);
        if eval.allowed {
            *state = Some(next);
        }
        eval
    }

    #[test]
    fn admits_n_per_window_and_resets_at_the_edge() {
        let mut s = None;
        let t0 = 10 * P + 250_000;
        for left in [2, 1, 0] {
            let e = run(&mut s, 1, t0);
            assert!(e.allowed);
            assert_eq!(e.remaining_after, left);
            assert_eq!(e.reset_after, 750_000);
        }
        let denied = run(&mut s, 1, t0 + 1);
        assert!(!denied.allowed);
        assert_eq!(denied.retry, 749_999);
        assert!(run(&mut s, 1, 11 * P).allowed, "new window");
    }

    #[test]
    fn cost_above_capacity_is_never() {
        let e = run(&mut None, 4, P);
        assert!(!e.allowed);
        assert_eq!(e.retry, -1);
    }

    #[test]
    fn a_changed_limit_keeps_the_count_until_its_window_ends() {
        let used = check(None, 100, 60 * P, 90, 30 * P).next;
        assert_eq!(
            check(Some(used), 1000, 60 * P, 0, 30 * P)
                .eval
                .remaining_before,
            910
        );
        // A longer period: the count still runs in the current (longer) window.
        let longer = check(Some(used), 1000, 3600 * P, 1, 30 * P);
        assert_eq!(longer.eval.remaining_before, 910);
        assert_eq!(longer.next.end, 3600 * P);
        // Once the stored window has ended, nothing is counted.
        assert_eq!(
            check(Some(used), 1000, 7 * P, 0, 60 * P)
                .eval
                .remaining_before,
            1000
        );
    }

    #[test]
    fn a_charge_goes_past_the_limit_until_the_window_ends() {
        let t0 = 10 * P + 250_000;
        let (s, ttl) = FixedWindow::charge(None, 3, P, 5, t0);
        assert_eq!((s.count, ttl), (5, 750_000));
        let e = check(Some(s), 3, P, 1, t0).eval;
        assert!(!e.allowed);
        assert_eq!((e.remaining_before, e.retry), (0, 750_000));
        assert_eq!(FixedWindow::charge(Some(s), 3, P, 100, t0).0.count, 6);
        assert!(
            check(Some(s), 3, P, 1, 11 * P).eval.allowed,
            "the next window forgets"
        );
    }

    #[test]
    fn a_refund_gives_back_only_its_own_window_s_count() {
        let (at, refund) = (3_200_000, FixedWindow::refund);
        let mut state = Some(check(None, 5, P, 2, at).next);
        assert!(!refund(&mut state, 5, P, 2, at, 4 * P), "the window ended");
        assert!(refund(&mut state, 5, P, 5, at, at + 1));
        assert_eq!(state.unwrap().count, 0, "not below zero");
    }
}
