//! The decoding of a script's reply (`{ now, 1, per limit: remaining, reset }` for an
//! admission, else `{ now, allowed, per limit: allowed, remaining, reset, retry }`), which
//! rejects anything the script never returns.

use crate::decision::{Decision, LimitState};
use crate::error::StoreError;
use crate::policy::Policy;

/// Builds the decision from the script's integers, rejecting anything the script never
/// returns as [`StoreError::UnexpectedReply`].
pub(crate) fn decode(policy: &Policy, reply: &[i64]) -> Result<Decision, StoreError> {
    let limits = policy.limits();
    let bad = |what: &str| StoreError::UnexpectedReply(format!("{what} in {reply:?}"));
    // An admission answers two values per limit, anything else four (`lua/prelude.lua`).
    let admitted = reply.len() == 2 + 2 * limits.len() && reply.get(1) == Some(&1);
    if !admitted && reply.len() != 2 + 4 * limits.len() {
        return Err(bad("wrong length"));
    }
    let now = u64::try_from(reply[0]).map_err(|_| bad("negative time"))?;
    let flag = |v: i64| match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(bad("non-boolean flag")),
    };
    // 2: denied, the key in its penalty box (`penalty.rs`).
    let penalized = reply[1] == 2;
    let allowed = if penalized { false } else { flag(reply[1])? };
    let width = if admitted { 2 } else { 4 };
    // The states are written where the decision keeps them, not collected and copied in.
    let (decision, filled) = Decision::filled(policy.name_arc(), now, |states| {
        for (limit, raw) in limits.iter().zip(reply[2..].chunks_exact(width)) {
            // (allowed, remaining, reset, retry): an admission's limits all allowed, no wait.
            let (ok, remaining, reset, retry) = match *raw {
                [remaining, reset] => (1, remaining, reset, 0),
                [ok, remaining, reset, retry] => (ok, remaining, reset, retry),
                _ => return Err(bad("wrong length")),
            };
            let remaining = u64::try_from(remaining).map_err(|_| bad("negative remaining"))?;
            let reset = u64::try_from(reset).map_err(|_| bad("negative reset"))?;
            if retry < -1 || remaining > limit.count() {
                return Err(bad("out-of-range limit state"));
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
        return Err(bad("inconsistent verdict"));
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
        let short = decode(&policy(), &[1_000_000, 1, 19, 60_000_000, 4, 3_000_000]).unwrap();
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
    fn garbage_is_a_typed_error() {
        let p = policy();
        for reply in [
            &[][..],
            &[1, 1],
            // Short is for admissions only; and a short reply must be complete.
            &[1, 0, 19, 0, 4, 0],
            &[1, 2, 19, 0, 4, 0],
            &[1, 1, 19, 0, 4],
            &[1, 1, 99, 0, 4, 0],
            &[1, 1, 19, -1, 4, 0],
            &[1, 2, 1, 0, 0, 0, 1, 0, 0, 0],
            &[-1, 1, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 99, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, -5, 0, 1, 0, 0, 0],
            &[1, 0, 1, 0, 0, 0, 1, 0, 0, 0],
            &[1, 1, 1, 0, 0, -7, 1, 0, 0, 0],
        ] {
            assert!(
                matches!(decode(&p, reply), Err(StoreError::UnexpectedReply(_))),
                "{reply:?}"
            );
        }
    }
}
