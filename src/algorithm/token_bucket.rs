//! Token bucket: `N` tokens, one more every `T = ceil(P / N)` µs. Twin of `lua/token_bucket.lua`.
//!
//! Tokens arrive at whole multiples of `T` after `last`; a full bucket restarts the clock, so
//! the stored state is exact integers.

use super::{emission_interval, span, Eval};

/// Tokens in the bucket as of `last` (µs), when the latest token arrived or the bucket filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) tokens: u64,
    pub(crate) last: u64,
}

/// Evaluates `cost` at `now`; returns the verdict and the state to store (time to live:
/// `reset_after`, when the bucket is full again and the state can go).
pub(crate) fn check(
    state: Option<State>,
    count: u64,
    period_us: u64,
    cost: u64,
    now: u64,
) -> (Eval, State) {
    let t = emission_interval(count, period_us);
    let refilled = match state {
        Some(s) if s.tokens < count => {
            let gained = now.saturating_sub(s.last) / t;
            if gained >= count - s.tokens {
                State {
                    tokens: count,
                    last: now,
                }
            } else {
                State {
                    tokens: s.tokens + gained,
                    last: s.last + gained * t,
                }
            }
        }
        _ => State {
            tokens: count,
            last: now,
        },
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
        return (Eval::never(refilled.tokens, reset_before), refilled);
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
    (
        eval,
        State {
            tokens: after,
            last: refilled.last,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refill_one_token_per_interval() {
        let (n, p) = (5, 3_000_000);
        let (e, s) = check(None, n, p, 5, 1_000);
        assert!(e.allowed);
        assert_eq!(e.remaining_after, 0);
        assert_eq!(e.reset_after, 3_000_000);
        let (e, _) = check(Some(s), n, p, 1, 1_000 + 599_999);
        assert!(!e.allowed);
        assert_eq!(e.retry, 1);
        let (e, s2) = check(Some(s), n, p, 1, 1_000 + 600_000);
        assert!(e.allowed);
        assert_eq!(
            s2,
            State {
                tokens: 0,
                last: 601_000
            }
        );
    }

    #[test]
    fn refill_caps_at_capacity() {
        let (_, s) = check(None, 2, 1_000_000, 2, 0);
        let (e, _) = check(Some(s), 2, 1_000_000, 1, 50_000_000);
        assert_eq!(e.remaining_before, 2);
        assert_eq!(e.reset_before, 0);
    }
}
