//! One limit's state as this instance sees it: the fleet's state at the last sync, plus the
//! units counted since (this instance's, and the rest of the fleet's, extrapolated). Kept as
//! the memory store keeps a limit's state ([`State`]), so the algorithms of `src/algorithm/`
//! evaluate it and report remaining units, reset and retry times exactly as in exact mode.
//!
//! A token bucket is kept as its GCRA twin (the same burst `N` and rate `N/P`): the leaky
//! bucket as a meter is the one whose fleet state merges by addition (`tat = max(tat, now) +
//! units·T`, YARL's `level = max(level, floor) + delta`).

use crate::algorithm::{
    Eval, PerKey, State, emission_interval, fixed_window, gcra, sliding_window,
};
use crate::limit::{Algorithm, Limit};

/// The largest GCRA backlog (µs) the fleet's state keeps: a burst, plus another burst or 1 s,
/// whichever is longer. What the fleet admits beyond a full bucket between two syncs is paid
/// back by later denials, so the long-run rate holds; the cap only bounds how long a key can
/// stay denied after a flood (a cap of one burst would forgive the overshoot: +20 % at 3×
/// load on a 100 ms burst, `tests.rs`).
pub(crate) fn max_backlog(count: u64, t: u64) -> u64 {
    count * t + (count * t).max(1_000_000)
}

/// The fleet's state of one limit as the sync script answers it: `(tat, 0, 0)` for GCRA and
/// token bucket, `(window end, count, 0)` for a fixed window, `(window end, current,
/// previous)` for a sliding window.
pub(crate) type Fleet = (u64, u64, u64);

/// The algorithm local-first mode keeps a limit of `algorithm` as: itself, but a token bucket
/// as its GCRA twin; `None` for a sliding log, a concurrency limit or a calendar window,
/// which it does not approximate.
pub(crate) fn kept_as(algorithm: Algorithm) -> Option<Algorithm> {
    match algorithm {
        Algorithm::TokenBucket => Some(Algorithm::Gcra),
        Algorithm::SlidingLog | Algorithm::Concurrency | Algorithm::Calendar => None,
        other => Some(other),
    }
}

/// A fresh state for `limit` in local-first mode (a GCRA's for one it does not approximate,
/// which never reaches it: such policies are decided by Redis).
pub(crate) fn fresh(limit: &Limit) -> State {
    State::fresh(kept_as(limit.algorithm()).unwrap_or(Algorithm::Gcra))
}

/// What local-first mode does with a limit's [`State`] besides checking it. Only the states
/// [`fresh`] makes reach it: GCRA, fixed and sliding windows.
pub(crate) trait View {
    /// The view of the fleet's state `fleet` of a limit of this kind.
    fn with_fleet(self, count: u64, period_us: u64, fleet: Fleet) -> State;

    /// Evaluates `cost` at `now` against `count` per `period_us`: the verdict, and the state
    /// if the request is admitted (whatever the verdict: admission is decided by the caller).
    fn eval(&self, count: u64, period_us: u64, cost: u64, now: u64) -> (Eval, State);

    /// Counts `units` consumed at `now`, admitted or not: the fleet's consumption as merged
    /// by the sync script (`lua/local_first_sync.lua`), never refused. A GCRA backlog is
    /// capped as in Redis ([`max_backlog`]).
    fn add(&mut self, count: u64, period_us: u64, units: u64, now: u64);

    /// How long until a request that fills the limit `over` units beyond the admission's low
    /// mark would find it below the mark again: the wait to announce when a request is denied
    /// by the probabilistic band, where the exact algorithm would have admitted it.
    fn wait_for(&self, count: u64, period_us: u64, over: u64, eval: &Eval) -> u64;
}

impl View for State {
    fn with_fleet(self, count: u64, period_us: u64, fleet: Fleet) -> State {
        let (a, b, c) = fleet;
        match self {
            State::Gcra(_) => State::Gcra((a > 0).then(|| gcra::State {
                tat: a,
                t: emission_interval(count, period_us),
            })),
            State::FixedWindow(_) => {
                State::FixedWindow((a > 0).then_some(fixed_window::State { end: a, count: b }))
            }
            State::SlidingWindow(_) => {
                State::SlidingWindow((a > 0).then_some(sliding_window::State {
                    end: a,
                    current: b,
                    previous: c,
                }))
            }
            other => other,
        }
    }

    fn eval(&self, count: u64, period_us: u64, cost: u64, now: u64) -> (Eval, State) {
        // No limit local-first mode keeps is per key: it has no key state to read.
        let step = self.check(&PerKey::default(), count, period_us, cost, now);
        // A GCRA admitted beyond its burst (the band reaches past the limit) adds up as the
        // fleet's state does, capped.
        if let State::Gcra(_) = self {
            let mut next = *self;
            next.add(count, period_us, cost, now);
            return (step.eval, next);
        }
        (step.eval, step.next)
    }

    fn add(&mut self, count: u64, period_us: u64, units: u64, now: u64) {
        if units == 0 {
            return;
        }
        *self = match *self {
            State::Gcra(s) => {
                let t = emission_interval(count, period_us);
                let start = s.map_or(now, |s| s.tat.max(now));
                let cap = now.saturating_add(max_backlog(count, t));
                let tat = start.saturating_add(units.saturating_mul(t)).min(cap);
                State::Gcra(Some(gcra::State { tat, t }))
            }
            windows => {
                windows
                    .check(&PerKey::default(), count, period_us, units, now)
                    .next
            }
        };
    }

    fn wait_for(&self, count: u64, period_us: u64, over: u64, eval: &Eval) -> u64 {
        let over = over.max(1);
        match self {
            State::Gcra(_) => over.saturating_mul(emission_interval(count, period_us)),
            // The previous window's weight decays by about `N / P` units per µs·N.
            State::SlidingWindow(_) => over
                .saturating_mul(period_us.div_ceil(count))
                .min(eval.reset_before.max(1)),
            // A fixed window's count falls only when the window ends.
            _ => eval.reset_before.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limit(algorithm: Algorithm) -> Limit {
        Limit::new(algorithm, 10, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn a_sliding_log_has_no_view_and_a_token_bucket_is_a_gcra() {
        assert_eq!(kept_as(Algorithm::SlidingLog), None);
        assert_eq!(fresh(&limit(Algorithm::TokenBucket)), State::Gcra(None));
    }

    #[test]
    fn gcra_units_add_up_from_now_and_are_capped_at_two_bursts() {
        let (n, p, now) = (10, 1_000_000, 5_000_000);
        let mut v = State::Gcra(None);
        v.add(n, p, 4, now);
        assert_eq!(
            v,
            State::Gcra(Some(gcra::State {
                tat: now + 400_000,
                t: 100_000
            }))
        );
        let (e, _) = v.eval(n, p, 1, now);
        assert_eq!(e.remaining_before, 6);
        v.add(n, p, 1_000, now);
        assert_eq!(
            v,
            State::Gcra(Some(gcra::State {
                tat: now + 2_000_000,
                t: 100_000
            }))
        );
        let short = |v: &mut State| v.add(10, 100_000, 1_000, now);
        let mut s = State::Gcra(None);
        short(&mut s);
        assert_eq!(
            s,
            State::Gcra(Some(gcra::State {
                tat: now + 1_100_000,
                t: 10_000
            }))
        );
        // Drained after its backlog.
        let (e, _) = v.eval(n, p, 1, now + 2_000_000);
        assert!(e.allowed);
        assert_eq!(e.remaining_before, 10);
    }

    #[test]
    fn window_units_land_in_the_window_of_now() {
        let (n, p) = (10, 1_000_000);
        let mut v = State::FixedWindow(None);
        v.add(n, p, 7, 3_500_000);
        assert_eq!(
            v,
            State::FixedWindow(Some(fixed_window::State {
                end: 4_000_000,
                count: 7
            }))
        );
        v.add(n, p, 1, 4_000_000);
        assert_eq!(
            v,
            State::FixedWindow(Some(fixed_window::State {
                end: 5_000_000,
                count: 1
            }))
        );
        let mut s = State::SlidingWindow(None);
        s.add(n, p, 8, 3_500_000);
        s.add(n, p, 2, 4_100_000);
        assert_eq!(
            s,
            State::SlidingWindow(Some(sliding_window::State {
                end: 5_000_000,
                current: 2,
                previous: 8
            }))
        );
    }

    #[test]
    fn the_fleet_reply_becomes_the_view() {
        let (n, p) = (10, 1_000_000);
        let g = State::Gcra(None).with_fleet(n, p, (9_000_000, 0, 0));
        assert_eq!(
            g,
            State::Gcra(Some(gcra::State {
                tat: 9_000_000,
                t: 100_000
            }))
        );
        let f = State::FixedWindow(None).with_fleet(n, p, (4_000_000, 3, 0));
        let (e, _) = f.eval(n, p, 1, 3_900_000);
        assert_eq!(e.remaining_before, 7);
        assert_eq!(
            State::SlidingWindow(None).with_fleet(n, p, (0, 0, 0)),
            State::SlidingWindow(None)
        );
    }
}
