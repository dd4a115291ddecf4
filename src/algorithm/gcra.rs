//! GCRA: one theoretical arrival time (TAT) per key. Twin of `lua/gcra.lua`.
//!
//! With `T = ceil(P / N)`, a request of cost `c` is admitted iff
//! `max(tat, now) + c·T - now <= N·T`: the burst is exactly `N`, the rate `1/T`. A TAT beyond
//! `now + N·T` cannot be reached on a monotonic clock: it is clamped there.

use super::{emission_interval, span, Eval, Step};

/// Evaluates `cost` at `now` given the stored TAT; the next state is the TAT to store (its
/// time to live is `tat - now`).
pub(crate) fn check(
    tat: Option<u64>,
    count: u64,
    period_us: u64,
    cost: u64,
    now: u64,
) -> Step<u64> {
    let t = emission_interval(count, period_us);
    let tolerance = count * t;
    let start = tat.map_or(now, |tat| tat.clamp(now, now + tolerance));
    let backlog = start - now;
    let remaining_before = tolerance.saturating_sub(backlog) / t;
    if cost > count {
        return Step {
            eval: Eval::never(remaining_before, backlog),
            next: start,
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
        next,
        ttl: next - now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(step.next, 1_000_002);
        assert_eq!(step.eval.reset_after, 1_000_002);
    }

    #[test]
    fn a_tat_from_a_clock_step_back_is_clamped() {
        // 5 per 10 s; the TAT was written 60 s "later" than now (the clock stepped back).
        let (n, p) = (5, 10_000_000);
        let e = check(Some(70_000_000), n, p, 1, 10_000_000).eval;
        assert!(!e.allowed);
        assert!(
            e.retry <= 2_000_000,
            "waits one emission interval, not 60 s"
        );
    }
}
