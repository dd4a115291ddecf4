//! The script's reply and its decoding, which rejects anything the script never returns.
//!
//! An admission answers `{ now, then per limit: what cannot be derived }`: a fixed window its
//! remaining (its reset is 0 with nothing used, else the rest of the epoch-aligned window), a
//! GCRA limit its backlog (its reset; the units remaining are the emission intervals left
//! below the burst), a token bucket the time until it is full (its reset; the tokens missing
//! are the intervals that takes, rounded up), any other limit its remaining and reset. Every
//! value is a cost, to Redis that writes it and to us that parse it. A charge after which
//! every limit would admit answers the same, of the state as it stands (`charge.rs`). Anything
//! else (a denial, a charge after which a limit refuses, a peek) answers the long `{ now,
//! allowed, per limit: allowed, remaining, reset, retry }`; an admission's reply is always
//! shorter (`1 + k..=1 + 2k` values, against `2 + 4k`), so the length tells which.

use super::signature::Signature;
use crate::algorithm::emission_interval;
use crate::decision::{Decision, LimitState};
use crate::error::StoreError;
use crate::limit::{Algorithm, Limit};
use crate::policy::Policy;

/// What an admission's reply says of one limit: the values the decoder cannot derive from
/// the time and the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admitted {
    /// The units remaining (a fixed window).
    Remaining,
    /// The reset (GCRA: the backlog; a token bucket: until it is full).
    Reset,
    /// The units remaining, then the reset.
    Both,
}

impl Admitted {
    /// What an admission by a limit of `algorithm` answers.
    pub(super) fn of(algorithm: Algorithm) -> Admitted {
        match algorithm {
            Algorithm::FixedWindow => Admitted::Remaining,
            Algorithm::Gcra | Algorithm::TokenBucket => Admitted::Reset,
            _ => Admitted::Both,
        }
    }

    /// The Lua expressions of a limit's values in an admission's reply, given those of its
    /// remaining and reset.
    pub(super) fn items(self, remaining: String, reset: String) -> Vec<String> {
        match self {
            Admitted::Remaining => vec![remaining],
            Admitted::Reset => vec![reset],
            Admitted::Both => vec![remaining, reset],
        }
    }

    fn width(self) -> usize {
        if self == Admitted::Both { 2 } else { 1 }
    }
}

/// The shape of a signature's decisions in a batch reply: how many limits each reports, and
/// how many values an admission answers for them (`reply.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Widths {
    pub(super) limits: usize,
    pub(super) admitted: usize,
}

impl Widths {
    pub(super) fn of(signature: Signature) -> Widths {
        Widths {
            limits: signature.algorithms().count(),
            admitted: admitted_width(signature.algorithms()),
        }
    }
}

/// The number of values an admission answers for `algorithms` (without its time).
pub(super) fn admitted_width(algorithms: impl Iterator<Item = Algorithm>) -> usize {
    algorithms.map(|a| Admitted::of(a).width()).sum()
}

/// Builds the decision from the script's integers, rejecting anything the script never
/// returns as [`StoreError::UnexpectedReply`].
pub(crate) fn decode(policy: &Policy, reply: &[i64]) -> Result<Decision, StoreError> {
    let limits = policy.limits();
    let bad = |what: &str| StoreError::UnexpectedReply(format!("{what} in {reply:?}"));
    let long = reply.len() == 2 + 4 * limits.len();
    let Some((&now, values)) = reply.split_first() else {
        return Err(bad("wrong length"));
    };
    let now = u64::try_from(now).map_err(|_| bad("negative time"))?;
    if long {
        return decode_long(policy, now, values).map_err(&bad);
    }
    // The states are written where the decision keeps them, not collected and copied in.
    let (decision, filled) = Decision::filled(policy.name_arc(), now, |states| {
        let mut values = values.iter().copied();
        for limit in limits {
            let (remaining, reset) = admitted(limit, now, &mut values)?;
            states.push(LimitState::from_raw(*limit, true, remaining, reset, 0));
        }
        if values.next().is_some() {
            return Err("wrong length");
        }
        Ok(())
    });
    filled.map_err(bad)?;
    Ok(decision)
}

/// One limit's remaining and reset from its values in an admission's reply (see
/// [`Admitted`]), as the script computed them.
fn admitted(
    limit: &Limit,
    now: u64,
    values: &mut impl Iterator<Item = i64>,
) -> Result<(u64, u64), &'static str> {
    let mut next = || {
        let value = values.next().ok_or("wrong length")?;
        u64::try_from(value).map_err(|_| "a negative value")
    };
    let (n, p) = (limit.count(), limit.period_us());
    let (remaining, reset) = match (Admitted::of(limit.algorithm()), limit.algorithm()) {
        // `lua/fixed_window.lua`: with nothing used (a cost of 0 on an empty window), no
        // reset; else the window's end, windows aligned to the epoch.
        (Admitted::Remaining, _) => {
            let remaining = next()?;
            let reset = if remaining >= n { 0 } else { p - now % p };
            (remaining, reset)
        }
        // `lua/gcra.lua`: the backlog after it, at most the burst's N * T.
        (Admitted::Reset, Algorithm::Gcra) => {
            let backlog = next()?;
            let t = emission_interval(n, p);
            let tolerance = n.checked_mul(t).ok_or("an out-of-range limit")?;
            let left = tolerance
                .checked_sub(backlog)
                .ok_or("an out-of-range backlog")?;
            (left / t, backlog)
        }
        // `lua/token_bucket.lua`: the time until the bucket is full, the missing tokens' T
        // each less what the latest one has already waited (less than T).
        (Admitted::Reset, _) => {
            let full = next()?;
            let missing = full.div_ceil(emission_interval(n, p));
            (n.checked_sub(missing).ok_or("an out-of-range reset")?, full)
        }
        (Admitted::Both, _) => (next()?, next()?),
    };
    if remaining > n {
        return Err("out-of-range limit state");
    }
    Ok((remaining, reset))
}

/// The long reply, after its time: the verdict (0, 1, or 2: denied, the key in its penalty
/// box, `penalty.rs`), then four values per limit.
fn decode_long(policy: &Policy, now: u64, values: &[i64]) -> Result<Decision, &'static str> {
    let flag = |v: i64| match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err("non-boolean flag"),
    };
    let (&verdict, values) = values.split_first().ok_or("wrong length")?;
    let penalized = verdict == 2;
    let allowed = if penalized { false } else { flag(verdict)? };
    let (decision, filled) = Decision::filled(policy.name_arc(), now, |states| {
        for (limit, raw) in policy.limits().iter().zip(values.chunks_exact(4)) {
            let &[ok, remaining, reset, retry] = raw else {
                return Err("wrong length");
            };
            let remaining = u64::try_from(remaining).map_err(|_| "negative remaining")?;
            let reset = u64::try_from(reset).map_err(|_| "negative reset")?;
            if retry < -1 || remaining > limit.count() {
                return Err("out-of-range limit state");
            }
            states.push(LimitState::from_raw(
                *limit,
                flag(ok)?,
                remaining,
                reset,
                retry,
            ));
        }
        Ok(())
    });
    filled?;
    if decision.is_allowed() != allowed {
        return Err("inconsistent verdict");
    }
    if penalized {
        return Ok(decision.penalized());
    }
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    fn policy() -> Policy {
        Policy::new(
            "p",
            [
                Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
                Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
            ],
        )
        .unwrap()
    }

    #[test]
    fn names_the_denying_limit() {
        let d = decode(
            &policy(),
            &[
                1_000_000, 0, 1, 15, 60_000_000, 0, 0, 0, 2_500_000, 2_500_000,
            ],
        )
        .unwrap();
        assert!(!d.is_allowed());
        assert_eq!(d.denied_by(), Some(1));
        assert_eq!(d.retry_after(), Some(Duration::from_micros(2_500_000)));
        assert_eq!(d.limit(), Some(5));
    }

    #[test]
    fn an_admission_reads_the_same_short_or_long() {
        let short = decode(&policy(), &[1_000_000, 19, 60_000_000, 4, 3_000_000]).unwrap();
        let long = decode(
            &policy(),
            &[1_000_000, 1, 1, 19, 60_000_000, 0, 1, 4, 3_000_000, 0],
        )
        .unwrap();
        assert!(short.is_allowed());
        assert_eq!(short, long);
        assert_eq!(short.remaining(), Some(4));
    }

    #[test]
    fn an_admission_s_derived_values_are_the_script_s() {
        let second = Duration::from_secs(1);
        let policy = Policy::new(
            "p",
            [
                Limit::fixed_window(10, second).unwrap(),
                Limit::gcra(10, second).unwrap(),
                Limit::token_bucket(10, second).unwrap(),
                // Nothing used, nothing charged: no reset.
                Limit::fixed_window(10, second).unwrap(),
            ],
        )
        .unwrap();
        // 0.25 s into a second: a window ends in 0.75 s; T = 0.1 s.
        let d = decode(&policy, &[7_250_000, 6, 350_000, 250_000, 10]).unwrap();
        let states: Vec<(u64, Duration)> = d
            .limits()
            .iter()
            .map(|s| (s.remaining(), s.reset_after()))
            .collect();
        assert_eq!(
            states,
            [
                (6, Duration::from_millis(750)),
                // A backlog of 3.5 T: 6 whole intervals left below the burst of 10.
                (6, Duration::from_millis(350)),
                // Full in 2.5 T: 3 tokens missing.
                (7, Duration::from_millis(250)),
                (10, Duration::ZERO),
            ]
        );
        assert!(d.is_allowed());
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let p = policy();
        for reply in [
            &[][..],
            &[1],
            &[1, 1],
            // A short reply must be complete, and no longer.
            &[1, 19, 0, 4],
            &[1, 19, 0, 4, 0, 0],
            &[1, 99, 0, 4, 0],
            &[1, 19, -1, 4, 0],
            &[-1, 19, 0, 4, 0],
            &[1, 2, 1, 0, 0, 0, 1, 0, 0, 0],
            &[-1, 1, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 99, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, -5, 0, 1, 0, 0, 0],
            &[1, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, 0, -7, 1, 0, 0, 0],
            &[1, 3, 0, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert!(
                matches!(decode(&p, reply), Err(StoreError::UnexpectedReply(_))),
                "{reply:?}"
            );
        }
        // Derived values out of their limit's range.
        let second = Duration::from_secs(1);
        for (limit, value) in [
            (Limit::fixed_window(10, second), 11),
            (Limit::gcra(10, second), 1_000_001),
            (Limit::token_bucket(10, second), 1_000_001),
            (Limit::gcra(10, second), -1),
        ] {
            let p = Policy::new("p", [limit.unwrap()]).unwrap();
            assert!(
                matches!(decode(&p, &[1, value]), Err(StoreError::UnexpectedReply(_))),
                "{value}"
            );
        }
    }
}
