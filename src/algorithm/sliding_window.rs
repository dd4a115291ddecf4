//! Sliding-window counter: the previous window's count weighted by its overlap with the
//! sliding window, plus the current count (`prev · (P − elapsed) / P + cur`). The weighted
//! count is rounded up, so the estimate never admits more than it allows for.
//! Twin of `lua/sliding_window.lua`.

use super::{Eval, PerKey, RateAlgorithm, Step, debt_cap, span, window_end};

/// The counts of the key's last window and the one before it, and when that window ends
/// (Unix µs).
///
/// The end, not the window's index, so that a changed limit keeps the counts: with the same
/// `P` the stored window is the current one or the previous one as before; with another `P`
/// (an override, a reloaded policy) a stored window that has not ended counts as the current
/// one (both counts carried over); one that ended is the previous window only if it ended
/// where the current one began (so its state is alive under the TTL the old limit gave it). After a clock step back a window ahead of the current one also counts
/// as the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) end: u64,
    pub(crate) current: u64,
    pub(crate) previous: u64,
}

/// The sliding window in the table.
pub(crate) struct SlidingWindow;

impl RateAlgorithm for SlidingWindow {
    const NAME: &'static str = "sliding-window";
    const CODE: &'static str = "sw";
    const LUA_FN: &'static str = "sliding_window";
    const LUA_FILE: &'static str = include_str!("../../lua/sliding_window.lua");
    type State = State;

    /// Evaluates `cost` at `now`; returns the verdict, the state to store and its time to live.
    fn check(
        state: Option<State>,
        _: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<State> {
        let window = now / period_us;
        let start = window * period_us;
        let end = start + period_us;
        let (current, previous) = counts(state, start, now);
        let elapsed = now - start;
        let used = weighted(previous, period_us, elapsed) + current;
        let remaining = count.saturating_sub(used);
        let until_free = |current: u64| {
            if current > 0 {
                start + 2 * period_us - now
            } else if previous > 0 {
                start + period_us - now
            } else {
                0
            }
        };
        let next = State {
            end,
            current: current + cost,
            previous,
        };
        let ttl = start + 2 * period_us - now;
        if cost > count {
            return Step {
                eval: Eval::never(remaining, until_free(current)),
                next,
                ttl,
            };
        }
        let allowed = used + cost <= count;
        let retry = if allowed {
            0
        } else if current + cost <= count {
            // The current window fits; wait for the previous one's weight to decay.
            span(start + decayed_at(previous, period_us, count - current - cost) - now)
        } else {
            // Wait for the next window, where the current count becomes the decaying one.
            span(start + period_us + decayed_at(current, period_us, count - cost) - now)
        };
        let eval = Eval {
            allowed,
            remaining_before: remaining,
            remaining_after: if allowed { remaining - cost } else { remaining },
            reset_before: until_free(current),
            reset_after: until_free(if allowed { current + cost } else { current }),
            retry,
        };
        Step { eval, next, ttl }
    }

    /// Takes the cost off the count of the admission's window while it lasts, or off the
    /// previous count while that still weighs.
    /// Adds `cost` to the current count whatever the weighted count is, up to a weighted count
    /// of `2·N`: past `N`, checks wait for the weight to decay (at most into the next window).
    fn charge(
        state: Option<State>,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> (State, u64) {
        let start = now / period_us * period_us;
        let (current, previous) = counts(state, start, now);
        let used = weighted(previous, period_us, now - start) + current;
        let room = debt_cap(count).saturating_sub(used);
        let next = State {
            end: start + period_us,
            current: current + cost.min(room),
            previous,
        };
        (next, start + 2 * period_us - now)
    }

    fn refund(
        state: &mut Option<State>,
        _: u64,
        period_us: u64,
        cost: u64,
        at: u64,
        now: u64,
    ) -> bool {
        let mine = window_end(at, period_us);
        match state {
            // Counted in the current window, which may have just ended: it then weighs as the
            // previous one.
            Some(s) if s.end == mine && now < s.end + period_us && s.current > 0 => {
                s.current = s.current.saturating_sub(cost);
                true
            }
            Some(s) if s.end == mine + period_us && now < s.end && s.previous > 0 => {
                s.previous = s.previous.saturating_sub(cost);
                true
            }
            _ => false,
        }
    }
}

/// `ceil(prev · (P − elapsed) / P)`, in doubles, in the same order as the Lua script.
/// The current and previous counts of `state` in the window starting at `start`: a stored
/// window that has not ended counts as the current one; one that ended where this one began
/// is the previous one.
fn counts(state: Option<State>, start: u64, now: u64) -> (u64, u64) {
    match state {
        Some(s) if s.end > now => (s.current, s.previous),
        Some(s) if s.end == start => (0, s.current),
        _ => (0, 0),
    }
}

fn weighted(previous: u64, period_us: u64, elapsed: u64) -> u64 {
    (previous as f64 * (period_us - elapsed) as f64 / period_us as f64).ceil() as u64
}

/// The least elapsed time in a window at which `weighted(previous, ..) <= k`:
/// `prev · (P − e) / P <= k` ⇔ `e >= P − k · P / prev`.
fn decayed_at(previous: u64, period_us: u64, k: u64) -> u64 {
    if previous <= k {
        return 0;
    }
    let x = (k as f64 * period_us as f64 / previous as f64).floor() as u64;
    period_us.saturating_sub(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(state: Option<State>, n: u64, p: u64, cost: u64, now: u64) -> Step<State> {
        SlidingWindow::check(state, &PerKey::default(), n, p, cost, now)
    }

    const P: u64 = 1_000_000;

    #[test]
    fn previous_window_weighs_by_overlap() {
        let full = Some(State {
            end: 10 * P,
            current: 10,
            previous: 0,
        });
        // A quarter into window 10, the previous 10 weigh 7.5 → 8: 2 left of 10.
        let e = check(full, 10, P, 2, 10 * P + 250_000).eval;
        assert!(e.allowed);
        assert_eq!(e.remaining_after, 0);
        let e = check(full, 10, P, 3, 10 * P + 250_000).eval;
        assert!(!e.allowed);
        // The weight must fall to 7: 10·(P−e)/P <= 7 ⇒ e >= 300_000.
        assert_eq!(e.retry, 50_000);
        let e = check(full, 10, P, 3, 10 * P + 300_000).eval;
        assert!(e.allowed);
    }

    #[test]
    fn full_current_window_waits_into_the_next() {
        let s = Some(State {
            end: 4 * P,
            current: 4,
            previous: 0,
        });
        let e = check(s, 4, P, 1, 3 * P + 100).eval;
        assert!(!e.allowed);
        // Next window: 4·(P−e)/P ≤ 3 once e ≥ 250_000.
        assert_eq!(e.retry, span(P - 100 + 250_000));
        let e = check(s, 4, P, 1, 4 * P + 250_000).eval;
        assert!(e.allowed);
        let e = check(s, 4, P, 1, 4 * P + 249_999).eval;
        assert!(!e.allowed);
    }

    #[test]
    fn a_changed_limit_keeps_the_counts() {
        let used = check(None, 100, 60 * P, 90, 30 * P).next;
        assert_eq!(
            check(Some(used), 1000, 60 * P, 0, 30 * P)
                .eval
                .remaining_before,
            910
        );
        // Another period: the running window's count is the current count.
        assert_eq!(
            check(Some(used), 1000, 7 * P, 0, 30 * P)
                .eval
                .remaining_before,
            910
        );
    }

    #[test]
    fn a_charge_weighs_until_it_decays_in_the_next_window() {
        let (s, ttl) = SlidingWindow::charge(None, 4, P, 8, 3 * P + 100);
        assert_eq!((s.current, ttl), (8, 2 * P - 100));
        let e = check(Some(s), 4, P, 1, 3 * P + 100).eval;
        assert!(!e.allowed);
        assert_eq!(e.remaining_before, 0);
        // Next window: 8·(P−e)/P ≤ 3 once e ≥ 625_000.
        assert_eq!(e.retry, span(P - 100 + 625_000));
        assert!(check(Some(s), 4, P, 1, 4 * P + 625_000).eval.allowed);
        // No more than twice the limit weighs.
        assert_eq!(
            SlidingWindow::charge(Some(s), 4, P, 9, 3 * P + 200)
                .0
                .current,
            8
        );
    }

    #[test]
    fn a_refund_gives_back_while_its_count_still_weighs() {
        let (at, refund) = (3_200_000, SlidingWindow::refund);
        let mut sw = Some(check(None, 5, P, 2, at).next);
        assert!(refund(&mut sw, 5, P, 1, at, 4_500_000), "still weighs");
        assert_eq!(sw.unwrap().current, 1);
        assert!(!refund(&mut sw, 5, P, 1, at, 5 * P), "no longer weighs");
    }
}
