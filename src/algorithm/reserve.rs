//! Reservations: the earliest time a request of `cost` conforms to a limit, and the state
//! after committing it at that time. Twin of `lua/reserve.lua`. Only GCRA and the token bucket
//! reserve: their state can be moved forward (a TAT in the future, a bucket in debt); a
//! window's count cannot be charged to a window that has not begun.
//!
//! A reservation of a policy is two passes: every limit says when it would take the cost
//! ([`ready`]); the slot is the latest of those (and now); every limit then commits the cost at
//! that slot ([`commit`]). Unlike a check, neither pass clamps state beyond the period: a
//! backlog of reservations is what the state now holds. `charge` (a settle above the estimate)
//! commits at now whatever the backlog, never refused.

use super::{Algorithm, State};
use super::{debt_cap, emission_interval, gcra, token_bucket};

impl Algorithm {
    /// Whether a limit of this algorithm can reserve natively (GCRA and token bucket only).
    pub(crate) fn reserves(self) -> bool {
        matches!(self, Algorithm::Gcra | Algorithm::TokenBucket)
    }
}

/// When `cost` would conform to the limit (`count` per `period_us`) holding `state`, in µs,
/// never before `now`; `None` if it never would (`cost > count`) or the state is not one that
/// reserves.
pub(crate) fn ready(state: &State, count: u64, period_us: u64, cost: u64, now: u64) -> Option<u64> {
    if cost == 0 {
        return Some(now);
    }
    if cost > count {
        return None;
    }
    let t = emission_interval(count, period_us);
    match state {
        State::Gcra(s) => {
            let start = gcra_start(*s, t, now);
            Some((start + cost * t).saturating_sub(count * t).max(now))
        }
        State::TokenBucket(s) => {
            // A `last` in the future is a reserved slot: later reservations come after it,
            // since the state does not say how full the bucket is before it.
            let (used, last) = bucket_at(*s, t, now);
            if used + cost <= count {
                Some(last.max(now))
            } else {
                Some(last + (used + cost - count) * t)
            }
        }
        _ => None,
    }
}

/// Commits `cost` at `at` (a slot no earlier than [`ready`]'s, or now for a charge, `charge`);
/// answers how long, from `now`, the new state matters (its TTL). A charge stops at the debt
/// cap (twice the limit: [`debt_cap`]) unless reservations already hold more, which it then
/// leaves as it is. A reservation is given back with the algorithm's refund
/// (`State::refund`), as `lua/reserve.lua` gives it back.
pub(crate) fn commit(
    state: &mut State,
    count: u64,
    period_us: u64,
    cost: u64,
    (at, charge): (u64, bool),
    now: u64,
) -> u64 {
    let t = emission_interval(count, period_us);
    match state {
        State::Gcra(s) => {
            let start = gcra_start(*s, t, now);
            let mut tat = start.max(at) + cost * t;
            if charge {
                tat = tat.min(start.max(now + debt_cap(count) * t));
            }
            *s = Some(gcra::State { tat, t });
            tat - now
        }
        State::TokenBucket(s) => {
            let (mut used, mut last) = bucket_at(*s, t, now);
            if at > last {
                // Refilled up to the slot: tokens that arrive before it are the slot's.
                let gained = (at - last) / t;
                if gained >= used {
                    (used, last) = (0, at);
                } else {
                    (used, last) = (used - gained, last + gained * t);
                }
            }
            let before = used;
            used += cost;
            if charge {
                // As GCRA's: full again no later than now + 2·N·T, or when reservations had
                // it full again if later (`last` may be a reserved slot, in the future).
                let cap = (now + debt_cap(count) * t).saturating_sub(last) / t;
                used = used.min(before.max(cap));
            }
            *s = Some(token_bucket::State { used, last });
            (last + used * t).saturating_sub(now)
        }
        _ => 0,
    }
}

/// The GCRA TAT as a time no earlier than now, its backlog rescaled to the interval `t` if
/// the state was written under another limit (as a check reads it), never clamped.
fn gcra_start(state: Option<gcra::State>, t: u64, now: u64) -> u64 {
    match state {
        Some(s) if s.tat > now => {
            let raw = s.tat - now;
            let backlog = if s.t == t || s.t == 0 {
                raw
            } else {
                (raw as f64 * t as f64 / s.t as f64).ceil() as u64
            };
            now + backlog
        }
        _ => now,
    }
}

/// The bucket refilled up to `now`: tokens missing (beyond the capacity: a debt of
/// reservations) as of `last`, which may be in the future (a reserved slot).
fn bucket_at(state: Option<token_bucket::State>, t: u64, now: u64) -> (u64, u64) {
    match state {
        Some(s) if s.used > 0 => {
            if s.last >= now {
                return (s.used, s.last);
            }
            let gained = (now - s.last) / t;
            if gained >= s.used {
                (0, now)
            } else {
                (s.used - gained, s.last + gained * t)
            }
        }
        _ => (0, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000;

    fn reserve(state: &mut State, n: u64, cost: u64, now: u64) -> u64 {
        let at = ready(state, n, SEC, cost, now).unwrap();
        commit(state, n, SEC, cost, (at, false), now);
        at - now
    }

    #[test]
    fn gcra_serves_the_burst_then_one_slot_per_interval() {
        let mut s = State::fresh(Algorithm::Gcra);
        let waits: Vec<u64> = (0..6).map(|_| reserve(&mut s, 4, 1, SEC)).collect();
        assert_eq!(waits, [0, 0, 0, 0, SEC / 4, SEC / 2]);
    }

    #[test]
    fn a_token_bucket_goes_into_debt_and_serves_in_order() {
        let mut s = State::fresh(Algorithm::TokenBucket);
        let waits: Vec<u64> = (0..6).map(|_| reserve(&mut s, 4, 1, SEC)).collect();
        assert_eq!(waits, [0, 0, 0, 0, SEC / 4, SEC / 2]);
        // Half a second later the debt is paid: the next slot is a quarter second after that.
        assert_eq!(reserve(&mut s, 4, 1, SEC + SEC / 2), SEC / 4);
    }

    #[test]
    fn a_cost_above_the_count_never_conforms() {
        let s = State::fresh(Algorithm::Gcra);
        assert_eq!(ready(&s, 4, SEC, 5, 0), None);
        assert_eq!(
            ready(&State::fresh(Algorithm::FixedWindow), 4, SEC, 1, 0),
            None
        );
    }

    #[test]
    fn a_charge_stops_at_the_debt_cap_but_keeps_a_longer_backlog() {
        for algorithm in [Algorithm::Gcra, Algorithm::TokenBucket] {
            let mut s = State::fresh(algorithm);
            commit(&mut s, 4, SEC, 100, (SEC, true), SEC);
            assert_eq!(
                ready(&s, 4, SEC, 1, SEC),
                Some(SEC + SEC + SEC / 4),
                "{algorithm}"
            );
            // Reservations queued further: a charge adds nothing beyond them.
            let mut s = State::fresh(algorithm);
            for _ in 0..20 {
                reserve(&mut s, 4, 1, SEC);
            }
            let queued = ready(&s, 4, SEC, 1, SEC);
            commit(&mut s, 4, SEC, 5, (SEC, true), SEC);
            assert_eq!(ready(&s, 4, SEC, 1, SEC), queued, "{algorithm}");
        }
    }

    #[test]
    fn a_slot_later_than_a_limit_needs_is_committed_at_the_slot() {
        // A limit that could serve now, committed at a slot another limit set: its TAT moves
        // from the slot, as a request made then would move it.
        let mut s = State::fresh(Algorithm::Gcra);
        commit(&mut s, 4, SEC, 1, (3 * SEC, false), SEC);
        assert_eq!(
            s,
            State::Gcra(Some(gcra::State {
                tat: 3 * SEC + SEC / 4,
                t: SEC / 4
            }))
        );
        let mut b = State::fresh(Algorithm::TokenBucket);
        commit(&mut b, 4, SEC, 1, (3 * SEC, false), SEC);
        assert_eq!(
            b,
            State::TokenBucket(Some(token_bucket::State {
                used: 1,
                last: 3 * SEC
            }))
        );
        // The bucket does not say how full it is before that slot: later ones come after it.
        assert_eq!(ready(&b, 4, SEC, 1, SEC), Some(3 * SEC));
    }
}
