//! Token bucket: `N` tokens, one more every `T = ceil(P / N)` µs. Twin of `lua/token_bucket.lua`.
//!
//! Tokens arrive at whole multiples of `T` after `last`; a full bucket restarts the clock, so
//! the stored state is exact integers. A `last` in the future (the clock stepped back) is
//! clamped to now, so refilling resumes at once. A charge (a cost already incurred) takes its
//! tokens whatever is left: below zero the bucket is in debt, checks are refused until it
//! refills above their cost, and it never goes more than `N` below zero
//! ([`debt_cap`](super::debt_cap)).

use super::{Eval, PerKey, RateAlgorithm, Step, debt_cap, emission_interval, span};

/// The tokens missing from the bucket (`used`) as of `last` (µs), when the latest token
/// arrived or the bucket filled. Missing tokens, not tokens left, so that a changed limit
/// keeps the units used: 90 missing of 100 leaves 910 of 1000 (and none of 50); refilling
/// continues from `last` at the new rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) used: u64,
    pub(crate) last: u64,
}

/// The token bucket in the table.
pub(crate) struct TokenBucket;

impl RateAlgorithm for TokenBucket {
    const NAME: &'static str = "token-bucket";
    const CODE: &'static str = "tb";
    const LUA_FN: &'static str = "token_bucket";
    const LUA_FILE: &'static str = include_str!("../../lua/token_bucket.lua");
    type State = State;

    /// Evaluates `cost` at `now`; the next state lives until the bucket is full again.
    fn check(
        state: Option<State>,
        _: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<State> {
        let t = emission_interval(count, period_us);
        let bucket = Bucket::refilled(state, count, t, now);
        let reset_before = bucket.until_full(bucket.missing, t, now);
        let remaining = count.saturating_sub(bucket.missing);
        if cost > count {
            return Step {
                eval: Eval::never(remaining, reset_before),
                next: bucket.stored(bucket.missing),
                ttl: reset_before,
            };
        }
        let allowed = bucket.missing + cost <= count;
        let after = if allowed {
            bucket.missing + cost
        } else {
            bucket.missing
        };
        let eval = Eval {
            allowed,
            remaining_before: remaining,
            remaining_after: count - after.min(count),
            reset_before,
            reset_after: bucket.until_full(after, t, now),
            retry: if allowed {
                0
            } else {
                // Tokens below zero (debt) are waited for too.
                span((bucket.last + (bucket.missing + cost - count) * t).saturating_sub(now))
            },
        };
        Step {
            eval,
            next: bucket.stored(after),
            ttl: eval.reset_after,
        }
    }

    /// Takes `cost` tokens whatever is left: below zero (debt), to at most `N` below.
    fn charge(
        state: Option<State>,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> (State, u64) {
        let t = emission_interval(count, period_us);
        let bucket = Bucket::refilled(state, count, t, now);
        let missing = bucket.missing.saturating_add(cost).min(debt_cap(count));
        (bucket.stored(missing), bucket.until_full(missing, t, now))
    }

    /// Puts the tokens back; a bucket is never fuller than full (the missing count stops at 0).
    fn refund(
        state: &mut Option<State>,
        count: u64,
        period_us: u64,
        cost: u64,
        _: u64,
        now: u64,
    ) -> bool {
        let t = emission_interval(count, period_us);
        // A bucket already full again has nothing to take back; one in debt (reservations,
        // `reserve.rs`) is full again only once the whole debt is paid.
        let refilled = |s: &State| (now - s.last.min(now)) / t >= s.used;
        match state {
            Some(s) if s.used > 0 && !refilled(s) => {
                s.used = s.used.saturating_sub(cost);
                true
            }
            _ => false,
        }
    }
}

/// A bucket refilled to now: the tokens missing as of `last` (more than `N`: tokens below
/// zero, a debt).
#[derive(Clone, Copy)]
struct Bucket {
    missing: u64,
    last: u64,
}

impl Bucket {
    /// The bucket of `state` refilled up to `now`. A `last` in the future (a clock step back)
    /// is read as now; more missing than [`debt_cap`] (a state no charge writes) as that.
    fn refilled(state: Option<State>, count: u64, t: u64, now: u64) -> Bucket {
        match state {
            Some(s) if s.used > 0 => {
                let missing = s.used.min(debt_cap(count));
                let last = s.last.min(now);
                let gained = (now - last) / t;
                if gained >= missing {
                    Bucket {
                        missing: 0,
                        last: now,
                    }
                } else {
                    Bucket {
                        missing: missing - gained,
                        last: last + gained * t,
                    }
                }
            }
            _ => Bucket {
                missing: 0,
                last: now,
            },
        }
    }

    /// µs from `now` until a bucket missing `missing` is full again.
    fn until_full(self, missing: u64, t: u64, now: u64) -> u64 {
        if missing == 0 {
            0
        } else {
            (self.last + missing * t).saturating_sub(now)
        }
    }

    /// The state to store with `missing` tokens missing.
    fn stored(self, missing: u64) -> State {
        State {
            used: missing,
            last: self.last,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(state: Option<State>, n: u64, p: u64, cost: u64, now: u64) -> Step<State> {
        TokenBucket::check(state, &PerKey::default(), n, p, cost, now)
    }

    #[test]
    fn burst_then_refill_one_token_per_interval() {
        let (n, p) = (5, 3_000_000);
        let step = check(None, n, p, 5, 1_000);
        let (e, s) = (step.eval, step.next);
        assert!(e.allowed);
        assert_eq!(e.remaining_after, 0);
        assert_eq!(e.reset_after, 3_000_000);
        let e = check(Some(s), n, p, 1, 1_000 + 599_999).eval;
        assert!(!e.allowed);
        assert_eq!(e.retry, 1);
        let step = check(Some(s), n, p, 1, 1_000 + 600_000);
        assert!(step.eval.allowed);
        assert_eq!(
            step.next,
            State {
                used: 5,
                last: 601_000
            }
        );
    }

    #[test]
    fn refill_caps_at_capacity() {
        let s = check(None, 2, 1_000_000, 2, 0).next;
        let e = check(Some(s), 2, 1_000_000, 1, 50_000_000).eval;
        assert_eq!(e.remaining_before, 2);
        assert_eq!(e.reset_before, 0);
    }

    #[test]
    fn a_last_from_a_clock_step_back_refills_from_now() {
        // 5 per 10 s, 3 tokens left, `last` 60 s ahead of now (the clock stepped back).
        let s = State {
            used: 2,
            last: 70_000_000,
        };
        let step = check(Some(s), 5, 10_000_000, 1, 10_000_000);
        assert!(step.eval.allowed);
        assert_eq!(step.next.last, 10_000_000, "`last` clamped to now");
        let e = check(Some(step.next), 5, 10_000_000, 1, 12_000_000).eval;
        assert_eq!(e.remaining_before, 3, "refills again after one interval");
    }

    #[test]
    fn a_changed_limit_keeps_the_tokens_used() {
        let used = check(None, 100, 60_000_000, 90, 0).next;
        assert_eq!(
            check(Some(used), 1000, 60_000_000, 0, 0)
                .eval
                .remaining_before,
            910
        );
        assert_eq!(
            check(Some(used), 50, 60_000_000, 0, 0)
                .eval
                .remaining_before,
            0
        );
    }

    #[test]
    fn a_charge_runs_the_bucket_into_debt_up_to_the_cap() {
        // 4 per second, T = 250 ms: 6 charged from full leaves 2 tokens owed.
        let (n, p, now) = (4, 1_000_000, 5_000_000);
        let (s, ttl) = TokenBucket::charge(None, n, p, 6, now);
        assert_eq!(s, State { used: 6, last: now });
        assert_eq!(ttl, 1_500_000);
        let e = check(Some(s), n, p, 1, now).eval;
        assert!(!e.allowed);
        assert_eq!(e.remaining_before, 0);
        assert_eq!(e.retry, 750_000, "the debt, then one token");
        assert!(check(Some(s), n, p, 1, now + 750_000).eval.allowed);
        // Never more than N below zero.
        let (s, ttl) = TokenBucket::charge(Some(s), n, p, u64::MAX, now);
        assert_eq!((s.used, ttl), (8, 2_000_000));
        assert_eq!(check(Some(s), n, p, 1, now).eval.retry, 1_250_000);
        // A state holding more (a reservation backlog) reads as the cap.
        let deep = State {
            used: 100,
            last: now,
        };
        assert_eq!(check(Some(deep), n, p, 1, now).eval.retry, 1_250_000);
    }

    #[test]
    fn a_refund_never_overfills_the_bucket() {
        let refund =
            |s: &mut Option<State>, cost, now| TokenBucket::refund(s, 4, 1_000_000, cost, 0, now);
        let mut state = Some(check(None, 4, 1_000_000, 1, 0).next);
        assert!(refund(&mut state, 3, 0));
        assert_eq!(state.unwrap().used, 0);
        assert!(!refund(&mut state, 1, 0));
        let mut state = Some(check(None, 4, 1_000_000, 1, 0).next);
        assert!(!refund(&mut state, 1, 250_000), "refilled");
    }
}
