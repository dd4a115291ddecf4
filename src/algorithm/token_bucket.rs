//! Token bucket: `N` tokens, one more every `T = ceil(P / N)` µs. Twin of `lua/token_bucket.lua`.
//!
//! Tokens arrive at whole multiples of `T` after `last`; a full bucket restarts the clock, so
//! the stored state is exact integers. A `last` in the future (the clock stepped back) is
//! clamped to now, so refilling resumes at once.

use super::{Eval, PerKey, RateAlgorithm, Step, emission_interval, span};

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
        let refilled = match state {
            Some(s) if s.used > 0 => {
                let tokens = count - s.used.min(count);
                let last = s.last.min(now);
                let gained = (now - last) / t;
                if gained >= count - tokens {
                    Bucket {
                        tokens: count,
                        last: now,
                    }
                } else {
                    Bucket {
                        tokens: tokens + gained,
                        last: last + gained * t,
                    }
                }
            }
            _ => Bucket {
                tokens: count,
                last: now,
            },
        };
        let stored = |b: Bucket| State {
            used: count - b.tokens,
            last: b.last,
        };
        let until_full = |tokens: u64| {
            if tokens >= count {
                0
            } else {
                (refilled.last + (count - tokens) * t).saturating_sub(now)
            }
        };
        let reset_before = until_full(refilled.tokens);
        if cost > count {
            return Step {
                eval: Eval::never(refilled.tokens, reset_before),
                next: stored(refilled),
                ttl: reset_before,
            };
        }
        let allowed = refilled.tokens >= cost;
        let after = if allowed {
            refilled.tokens - cost
        } else {
            refilled.tokens
        };
        let eval = Eval {
            allowed,
            remaining_before: refilled.tokens,
            remaining_after: after,
            reset_before,
            reset_after: until_full(after),
            retry: if allowed {
                0
            } else {
                span((refilled.last + (cost - refilled.tokens) * t).saturating_sub(now))
            },
        };
        Step {
            eval,
            next: stored(Bucket {
                tokens: after,
                last: refilled.last,
            }),
            ttl: eval.reset_after,
        }
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

/// Tokens in a bucket as of `last`, before refilling.
#[derive(Clone, Copy)]
struct Bucket {
    tokens: u64,
    last: u64,
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
