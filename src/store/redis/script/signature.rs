//! What a script is written for: the algorithms of a policy's limits, in order. Counts and
//! periods are arguments, so every policy with the same algorithms runs the same script.

use crate::limit::{Algorithm, Limit};
use crate::policy::MAX_LIMITS;

/// Bits per limit: the algorithm's position in `Algorithm::EVERY`, plus one (0 ends the list).
const BITS: u32 = 3;

// Every policy fits: 16 limits of 3 bits.
const _: () = assert!(MAX_LIMITS as u32 * BITS <= u64::BITS);
const _: () = assert!(Algorithm::EVERY.len() < 1 << BITS);

/// The top bit: the policy has a penalty box (`penalty.rs`).
const PENALTY: u64 = 1 << 63;

/// The next bit: each limit has a cost of its own (`LimitCosts`), passed after the limits'
/// other arguments (`tail.rs`).
const COSTS: u64 = 1 << 62;

/// The next: every limit is charged its own cost whatever it meets (`Commit::Always`): the
/// script is the always variant (`always.rs`), with no penalty box.
const ALWAYS: u64 = 1 << 61;

// The algorithms stay clear of the flags.
const _: () = assert!(MAX_LIMITS as u32 * BITS <= 61);

/// The algorithms of a policy's limits, in order, packed into one integer (first limit in the
/// lowest bits), and whether it has a penalty box (the top bit): `Copy`, hashed in one step,
/// no allocation on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Signature(u64);

impl Signature {
    /// The signature of a policy's limits (1 to [`MAX_LIMITS`]).
    pub(crate) fn of(limits: &[Limit]) -> Signature {
        debug_assert!((1..=MAX_LIMITS).contains(&limits.len()));
        let packed = limits.iter().rev().fold(0, |packed, limit| {
            (packed << BITS) | (position(limit.algorithm()) as u64 + 1)
        });
        Signature(packed)
    }

    /// The same signature, for a policy with a penalty box if `penalty`.
    pub(crate) fn with_penalty(self, penalty: bool) -> Signature {
        if penalty {
            Signature(self.0 | PENALTY)
        } else {
            self
        }
    }

    /// Whether the policy has a penalty box.
    pub(crate) fn penalty(self) -> bool {
        self.0 & PENALTY != 0
    }

    /// The same signature, for checks with a cost per limit if `costs`.
    pub(crate) fn with_costs(self, costs: bool) -> Signature {
        if costs {
            Signature(self.0 | COSTS)
        } else {
            self
        }
    }

    /// Whether each limit has a cost of its own.
    pub(crate) fn costs(self) -> bool {
        self.0 & COSTS != 0
    }

    /// The same signature, for checks whose every cost lands (`Commit::Always`) if `always`:
    /// each limit has a cost of its own, and a penalty box plays no part.
    pub(crate) fn with_always(self, always: bool) -> Signature {
        if always {
            Signature((self.0 | ALWAYS | COSTS) & !PENALTY)
        } else {
            self
        }
    }

    /// Whether every cost lands (the always variant).
    pub(crate) fn always(self) -> bool {
        self.0 & ALWAYS != 0
    }

    /// The single algorithm of a one-limit policy.
    pub(crate) fn single(self) -> Option<Algorithm> {
        (self.0 < 1 << BITS).then(|| Algorithm::EVERY[self.0 as usize - 1])
    }

    /// The algorithms, in the order of the policy's limits.
    pub(crate) fn algorithms(self) -> impl Iterator<Item = Algorithm> {
        let mut rest = self.0 & !(PENALTY | COSTS | ALWAYS);
        std::iter::from_fn(move || {
            let code = rest & ((1 << BITS) - 1);
            rest >>= BITS;
            (code != 0).then(|| Algorithm::EVERY[code as usize - 1])
        })
    }

    /// Whether any limit uses `algorithm`.
    pub(crate) fn uses(self, algorithm: Algorithm) -> bool {
        self.algorithms().any(|a| a == algorithm)
    }
}

/// The position of `algorithm` in `Algorithm::EVERY` (the algorithms' table, in the order of
/// the variants).
pub(crate) fn position(algorithm: Algorithm) -> usize {
    algorithm as usize
}

/// How a batch script of one signature lays out its call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchShape {
    /// Keys per decision: one per limit, and the penalty box's.
    pub(crate) keys: usize,
    /// A decision's own arguments: its lease id, if any.
    pub(crate) own: usize,
    /// The limits' arguments: counts and periods, the logs' TTL, the penalty, the costs.
    pub(crate) params: usize,
    /// The counts and periods, the first of the limits' arguments.
    pub(crate) numbers: usize,
    /// Every key holds a string: the batch reads them all with one `MGET`.
    pub(crate) mget: bool,
}

impl BatchShape {
    /// The shape of `signature`'s batches.
    pub(crate) fn of(signature: Signature) -> BatchShape {
        let limits = signature.algorithms().count();
        let logs = signature.uses(Algorithm::SlidingLog);
        let leases = signature.uses(Algorithm::Concurrency);
        let penalty = usize::from(signature.penalty());
        let costs = if signature.costs() { limits } else { 0 };
        BatchShape {
            keys: limits + penalty,
            own: usize::from(leases),
            params: 2 * limits + usize::from(logs) + penalty + costs,
            numbers: 2 * limits,
            // A sliding log and a concurrency limit keep sorted sets, which they read with
            // their own commands.
            mget: !(logs || leases),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(algorithms: &[Algorithm]) -> Vec<Limit> {
        algorithms
            .iter()
            .map(|a| Limit::new(*a, 10, Duration::from_secs(1)).unwrap())
            .collect()
    }

    #[test]
    fn keeps_the_order_and_every_algorithm() {
        let all = Algorithm::ALL;
        let mut sixteen: Vec<Algorithm> = all.iter().cycle().take(MAX_LIMITS).copied().collect();
        sixteen.reverse();
        for algorithms in [&all[..], &sixteen[..], &[Algorithm::Gcra][..]] {
            let s = Signature::of(&limits(algorithms));
            assert_eq!(s.algorithms().collect::<Vec<_>>(), algorithms);
        }
    }

    #[test]
    fn counts_and_periods_do_not_matter_order_does() {
        let a = Signature::of(&[Limit::gcra(1, Duration::from_secs(1)).unwrap()]);
        let b = Signature::of(&[Limit::gcra(9, Duration::from_secs(60)).unwrap()]);
        assert_eq!(a, b);
        assert_eq!(a.single(), Some(Algorithm::Gcra));
        let ab = Signature::of(&limits(&[Algorithm::Gcra, Algorithm::SlidingLog]));
        let ba = Signature::of(&limits(&[Algorithm::SlidingLog, Algorithm::Gcra]));
        assert_ne!(ab, ba);
        assert_eq!(ab.single(), None);
        assert!(ab.uses(Algorithm::SlidingLog) && !ab.uses(Algorithm::TokenBucket));
        let costs = ab.with_costs(true).with_penalty(true);
        assert!(costs.costs() && costs.penalty() && !ab.costs());
        assert_ne!(costs, ab.with_penalty(true));
        assert_eq!(
            costs.algorithms().collect::<Vec<_>>(),
            ab.algorithms().collect::<Vec<_>>()
        );
        // Always: costs per limit, no penalty box, a script of its own.
        let always = ab.with_penalty(true).with_always(true);
        assert!(always.always() && always.costs() && !always.penalty());
        assert_ne!(always, ab.with_costs(true));
        assert_eq!(always, ab.with_always(true));
        assert_eq!(
            always.algorithms().collect::<Vec<_>>(),
            ab.algorithms().collect::<Vec<_>>()
        );
        assert_eq!(always.single(), None);
    }
}
