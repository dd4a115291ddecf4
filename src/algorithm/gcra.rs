//! GCRA: one theoretical arrival time (TAT) per key. Twin of `lua/gcra.lua`.
//!
//! With `T = ceil(P / N)`, a request of cost `c` is admitted iff
//! `max(tat, now) + c·T - now <= N·T`: the burst is exactly `N`, the rate `1/T`. A charge
//! (a cost already incurred) moves the TAT by `c·T` whatever it was: past `now + N·T` it is in
//! debt, and checks are refused until time pays it. The TAT never goes beyond `now + 2·N·T`
//! ([`debt_cap`](super::debt_cap)): a charge stops there, and a TAT beyond it (unreachable on
//! a monotonic clock: the clock stepped back) is clamped there on read.
//!
//! The state keeps the `T` it was written with: the backlog `tat - now` is `units · T`, so
//! when the limit changes (an override, a reloaded policy) the backlog is rescaled to the new
//! `T` (`ceil(backlog · T_new / T_old)`, in doubles as the Lua script computes it) and the
//! units used are kept: 90 used of 100 leaves 910 of 1000.

use super::{Eval, PerKey, RateAlgorithm, Step, debt_cap, emission_interval, span};

/// The stored TAT (µs) and the emission interval `T` it was computed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) tat: u64,
    pub(crate) t: u64,
}

/// GCRA in the table.
pub(crate) struct Gcra;

impl RateAlgorithm for Gcra {
    const NAME: &'static str = "gcra";
    const CODE: &'static str = "gc";
    const LUA_FN: &'static str = "gcra";
    const LUA_FILE: &'static str = include_str!("../../lua/gcra.lua");
    type State = State;

    /// Evaluates `cost` at `now` given the stored state; the next state is the TAT to store (its
    /// time to live is `tat - now`).
    fn check(
        state: Option<State>,
        _: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<State> {
        let t = emission_interval(count, period_us);
        let tolerance = count * t;
        let start = state.map_or(now, |s| now + backlog(s, t, now).min(debt_cap(count) * t));
        let backlog = start - now;
        let remaining_before = tolerance.saturating_sub(backlog) / t;
        if cost > count {
            return Step {
                eval: Eval::never(remaining_before, backlog),
                next: State { tat: start, t },
                ttl: backlog,
            };
        }
        let next = start + cost * t;
        let allowed = next - now <= tolerance;
        let eval = Eval {
            allowed,
            remaining_before,
            remaining_after: if allowed {
                (tolerance - (next - now)) / t
            } else {
                remaining_before
            },
            reset_before: backlog,
            reset_after: if allowed { next - now } else { backlog },
            retry: if allowed {
                0
            } else {
                span(next - now - tolerance)
            },
        };
        Step {
            eval,
            next: State { tat: next, t },
            ttl: next - now,
        }
    }

    /// Moves the TAT by `cost` intervals from `max(tat, now)`, up to `now + 2·N·T`.
    fn charge(
        state: Option<State>,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> (State, u64) {
        let t = emission_interval(count, period_us);
        let cap = debt_cap(count) * t;
        let backlog = state.map_or(0, |s| backlog(s, t, now).min(cap));
        let after = backlog.saturating_add(cost.saturating_mul(t)).min(cap);
        (
            State {
                tat: now + after,
                t,
            },
            after,
        )
    }

    /// Moves the TAT back by `cost` intervals of the state's own `T`, never before now.
    fn refund(state: &mut Option<State>, _: u64, _: u64, cost: u64, _: u64, now: u64) -> bool {
        match state {
            Some(s) if s.tat > now => {
                s.tat = s.tat.saturating_sub(cost.saturating_mul(s.t)).max(now);
                true
            }
            _ => false,
        }
    }
}

/// The backlog of `state` at `now` in µs of the interval `t`.
fn backlog(state: State, t: u64, now: u64) -> u64 {
    let raw = state.tat.saturating_sub(now);
    if state.t == t || state.t == 0 {
        raw
    } else {
        (raw as f64 * t as f64 / state.t as f64).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(state: Option<State>, n: u64, p: u64, cost: u64, now: u64) -> Step<State> {
        Gcra::check(state, &PerKey::default(), n, p, cost, now)
    }

    #[test]
    fn burst_then_one_per_interval() {
        let (p, n) = (1_000_000, 4);
        let mut tat = None;
        let now = 5_000_000;
        for left in [3, 2, 1, 0] {
            let step = check(tat, n, p, 1, now);
            assert!(step.eval.allowed);
            assert_eq!(step.eval.remaining_after, left);
            tat = Some(step.next);
        }
        let e = check(tat, n, p, 1, now).eval;
        assert!(!e.allowed);
        assert_eq!(e.retry, 250_000);
        let e = check(tat, n, p, 1, now + 250_000).eval;
        assert!(e.allowed);
        assert_eq!(e.remaining_after, 0);
    }

    #[test]
    fn rate_never_exceeds_nominal_when_p_over_n_is_fractional() {
        // 3 per second: one unit every 333_334 µs, never faster than 3/s.
        let step = check(None, 3, 1_000_000, 3, 0);
        assert!(step.eval.allowed);
        assert_eq!(step.next.tat, 1_000_002);
        assert_eq!(step.eval.reset_after, 1_000_002);
    }

    #[test]
    fn a_tat_from_a_clock_step_back_is_clamped() {
        // 5 per 10 s; the TAT was written 60 s "later" than now (the clock stepped back).
        let (n, p) = (5, 10_000_000);
        let stepped = State {
            tat: 70_000_000,
            t: 2_000_000,
        };
        let e = check(Some(stepped), n, p, 1, 10_000_000).eval;
        assert!(!e.allowed);
        assert_eq!(
            e.retry, 12_000_000,
            "waits out the most debt a state holds (a period and an interval), not 60 s"
        );
    }

    #[test]
    fn a_charge_lands_past_the_limit_up_to_the_cap() {
        // 4 per second, T = 250 ms: 6 charged leaves 2 owed.
        let (n, p, now) = (4, 1_000_000, 5_000_000);
        let (s, ttl) = Gcra::charge(None, n, p, 6, now);
        assert_eq!((s.tat, ttl), (now + 1_500_000, 1_500_000));
        let e = check(Some(s), n, p, 1, now).eval;
        assert!(!e.allowed);
        assert_eq!(e.remaining_before, 0);
        assert_eq!(e.retry, 750_000, "the debt, then one interval");
        assert!(check(Some(s), n, p, 1, now + 750_000).eval.allowed);
        // Charging on: never more than twice the limit owed, however much.
        let (s, ttl) = Gcra::charge(Some(s), n, p, 1_000, now);
        assert_eq!((s.tat, ttl), (now + 2_000_000, 2_000_000));
        let (s, _) = Gcra::charge(Some(s), n, p, u64::MAX, now + 10);
        assert_eq!(s.tat, now + 10 + 2_000_000);
        assert_eq!(check(Some(s), n, p, 1, now + 10).eval.retry, 1_250_000);
    }

    #[test]
    fn a_changed_limit_keeps_the_units_used() {
        // 90 used of 100 per minute, then the limit becomes 1000 per minute: 910 left.
        let (p, now) = (60_000_000, 1_000_000_000);
        let used = check(None, 100, p, 90, now).next;
        let e = check(Some(used), 1000, p, 0, now).eval;
        assert_eq!(e.remaining_before, 910);
        // And cut to 50: nothing left, the wait no longer than the new period.
        let e = check(Some(used), 50, p, 1, now).eval;
        assert!(!e.allowed);
        assert_eq!(e.remaining_before, 0);
    }

    #[test]
    fn a_refund_moves_back_by_the_cost_never_before_now() {
        let (n, p, now) = (4, 1_000_000, 5_000_000);
        let refund = |s: &mut Option<State>, cost, now| Gcra::refund(s, n, p, cost, now, now);
        let mut state = Some(check(None, n, p, 3, now).next);
        assert!(refund(&mut state, 3, now));
        assert_eq!(state.unwrap().tat, now);
        assert!(!refund(&mut state, 3, now), "nothing left to give back");
        let mut late = Some(check(None, n, p, 1, now).next);
        assert!(refund(&mut late, 100, now + 100));
        assert_eq!(late.unwrap().tat, now + 100);
    }
}
