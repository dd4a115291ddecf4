//! Refunds: the units one admitted request consumed, given back to each algorithm's state
//! (see [`Refund`](crate::store::Refund) for what that means per algorithm). Twin of
//! `lua/refund.lua`. Each function takes the state, the cost, the store's time `at` of the
//! admission and `now`, and answers whether it gave anything back. None takes a state below
//! what it was before the admission: each removes at most `cost` units, only from where the
//! admission put them.

use super::{emission_interval, fixed_window, gcra, sliding_window, token_bucket};

/// The end of the epoch-aligned window of `period_us` that holds `at`.
fn window_end(at: u64, period_us: u64) -> u64 {
    (at / period_us + 1) * period_us
}

pub(crate) fn fixed_window(
    state: &mut Option<fixed_window::State>,
    period_us: u64,
    cost: u64,
    at: u64,
    now: u64,
) -> bool {
    match state {
        Some(s) if s.end == window_end(at, period_us) && s.end > now && s.count > 0 => {
            s.count = s.count.saturating_sub(cost);
            true
        }
        _ => false,
    }
}

pub(crate) fn sliding_window(
    state: &mut Option<sliding_window::State>,
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

pub(crate) fn token_bucket(
    state: &mut Option<token_bucket::State>,
    count: u64,
    period_us: u64,
    cost: u64,
    now: u64,
) -> bool {
    let t = emission_interval(count, period_us);
    // A bucket already full again has nothing to take back.
    let refilled = |s: &token_bucket::State| (now - s.last.min(now)) / t >= s.used.min(count);
    match state {
        Some(s) if s.used > 0 && !refilled(s) => {
            s.used = s.used.saturating_sub(cost);
            true
        }
        _ => false,
    }
}

pub(crate) fn gcra(state: &mut Option<gcra::State>, cost: u64, now: u64) -> bool {
    match state {
        Some(s) if s.tat > now => {
            s.tat = s.tat.saturating_sub(cost.saturating_mul(s.t)).max(now);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_moves_back_by_the_cost_never_before_now() {
        let (n, p, now) = (4, 1_000_000, 5_000_000);
        let step = gcra::check(None, n, p, 3, now);
        let mut state = Some(step.next);
        assert!(gcra(&mut state, 3, now));
        assert_eq!(state.unwrap().tat, now);
        assert!(!gcra(&mut state, 3, now), "nothing left to give back");
        let mut late = Some(gcra::check(None, n, p, 1, now).next);
        assert!(gcra(&mut late, 100, now + 100));
        assert_eq!(late.unwrap().tat, now + 100);
    }

    #[test]
    fn a_window_refunds_only_its_own_count() {
        let (n, p, at) = (5, 1_000_000, 3_200_000);
        let mut state = Some(fixed_window::check(None, n, p, 2, at).next);
        assert!(
            !fixed_window(&mut state, p, 2, at, 4_000_000),
            "the window ended"
        );
        assert!(fixed_window(&mut state, p, 5, at, at + 1));
        assert_eq!(state.unwrap().count, 0, "not below zero");
        let mut sw = Some(sliding_window::check(None, n, p, 2, at).next);
        assert!(sliding_window(&mut sw, p, 1, at, 4_500_000), "still weighs");
        assert_eq!(sw.unwrap().current, 1);
        assert!(
            !sliding_window(&mut sw, p, 1, at, 5_000_000),
            "no longer weighs"
        );
    }

    #[test]
    fn a_bucket_never_overfills() {
        let mut state = Some(token_bucket::check(None, 4, 1_000_000, 1, 0).next);
        assert!(token_bucket(&mut state, 4, 1_000_000, 3, 0));
        assert_eq!(state.unwrap().used, 0);
        assert!(!token_bucket(&mut state, 4, 1_000_000, 1, 0));
        let mut state = Some(token_bucket::check(None, 4, 1_000_000, 1, 0).next);
        assert!(
            !token_bucket(&mut state, 4, 1_000_000, 1, 250_000),
            "refilled"
        );
    }
}
