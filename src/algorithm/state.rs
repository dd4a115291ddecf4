//! One limit's state, whatever its algorithm, as both in-process stores keep it: the memory
//! store per key and policy, local-first mode as its view of the fleet. Generated from the
//! table in `mod.rs`, so that no store names every algorithm.

use super::State;
use super::concurrency::Leases;
use super::sliding_log::Log;

/// Writes the table (`TABLE`) and [`State`] from the rows `Variant => Type`: `Variant` of
/// `Algorithm`, `Type` its [`RateAlgorithm`](super::RateAlgorithm).
macro_rules! algorithms {
    ($($variant:ident => $algorithm:ty,)+) => {
        /// Every algorithm's constants, in the order of `Algorithm`'s variants.
        pub(crate) const TABLE: [Descriptor; [$(stringify!($variant)),+].len()] =
            [$(Descriptor::of::<$algorithm>(Algorithm::$variant)),+];

        /// One limit's state: the variant of its algorithm, `None` until it has one.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum State {
            $($variant(Option<<$algorithm as RateAlgorithm>::State>),)+
        }

        impl State {
            /// The state of a limit of `algorithm` that has seen nothing.
            pub(crate) fn fresh(algorithm: Algorithm) -> State {
                match algorithm {
                    $(Algorithm::$variant => State::$variant(None),)+
                }
            }

            /// The algorithm this state is of.
            pub(crate) fn algorithm(&self) -> Algorithm {
                match self {
                    $(State::$variant(_) => Algorithm::$variant,)+
                }
            }

            /// [`RateAlgorithm::check`] of this state's algorithm.
            pub(crate) fn check(
                self,
                key: &PerKey,
                count: u64,
                period_us: u64,
                cost: u64,
                now: u64,
            ) -> Step<State> {
                match self {
                    $(State::$variant(s) => {
                        <$algorithm as RateAlgorithm>::check(s, key, count, period_us, cost, now)
                            .map(|next| State::$variant(Some(next)))
                    })+
                }
            }

            /// [`RateAlgorithm::charge`] of this state's algorithm: the charged state, and how
            /// long it matters.
            pub(crate) fn charge(
                self,
                count: u64,
                period_us: u64,
                cost: u64,
                now: u64,
            ) -> (State, u64) {
                match self {
                    $(State::$variant(s) => {
                        let (next, ttl) =
                            <$algorithm as RateAlgorithm>::charge(s, count, period_us, cost, now);
                        (State::$variant(Some(next)), ttl)
                    })+
                }
            }

            /// [`RateAlgorithm::refund`] of this state's algorithm.
            pub(crate) fn refund(
                &mut self,
                count: u64,
                period_us: u64,
                cost: u64,
                at: u64,
                now: u64,
            ) -> bool {
                match self {
                    $(State::$variant(s) => {
                        <$algorithm as RateAlgorithm>::refund(s, count, period_us, cost, at, now)
                    })+
                }
            }
        }
    };
}

impl State {
    /// The states of limits of `fresh`'s algorithms (fresh ones), keeping each of `old`
    /// whose position and algorithm are unchanged, as the Redis keys (which name a limit's
    /// position and algorithm) keep theirs: a changed `N` or period keeps the state (each
    /// algorithm says how it reads state written under another limit); a limit of another
    /// algorithm starts fresh.
    pub(crate) fn adopt<C: FromIterator<State>>(
        old: &[State],
        fresh: impl IntoIterator<Item = State>,
    ) -> C {
        fresh
            .into_iter()
            .enumerate()
            .map(|(i, new)| match old.get(i) {
                Some(kept) if kept.algorithm() == new.algorithm() => *kept,
                _ => new,
            })
            .collect()
    }
}

/// What a key keeps for the limits of a per-key algorithm: the sliding log, one per key that
/// every sliding-log limit of the policy counts in (one sorted set in Redis), and the leases of
/// its concurrency limit (a policy has at most one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PerKey {
    pub(crate) log: Log,
    pub(crate) leases: Leases,
}

impl PerKey {
    /// Readies the key for a check at `now` of `limits`, whose sliding logs' longest period is
    /// `max_log`: drops the log entries no span counts any more and the leases that lapsed. No
    /// decision changes.
    /// `lease_timeout`: the policy's concurrency limit's period (µs), if it has one.
    pub(crate) fn trim(&mut self, lease_timeout: Option<u64>, max_log: u64, now: u64) {
        if max_log > 0 {
            self.log.trim(now, max_log);
        }
        if let Some(timeout) = lease_timeout {
            self.leases.trim(timeout, now);
        }
    }

    /// Records an admission of `cost` at `now` in the log, if there are sliding logs (the lease
    /// is taken apart, by `Leases::hold`, once the policy committed).
    pub(crate) fn commit(&mut self, max_log: u64, cost: u64, now: u64) {
        if max_log > 0 {
            self.log.record(now, cost);
        }
    }

    /// Gives back `cost` units admitted at `at` to the log, once for every sliding-log limit
    /// (a lease is given back by its release, not by a refund). Whether anything was.
    pub(crate) fn refund(&mut self, max_log: u64, cost: u64, at: u64, now: u64) -> bool {
        max_log > 0 && self.log.refund(at, cost, now, max_log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Algorithm;

    #[test]
    fn adopt_keeps_what_the_same_algorithm_left_at_the_same_position() {
        let used = crate::algorithm::gcra::State { tat: 9, t: 1 };
        let old = [State::Gcra(Some(used)), State::FixedWindow(None)];
        let fresh = [
            State::fresh(Algorithm::Gcra),
            State::fresh(Algorithm::Gcra),
            State::fresh(Algorithm::SlidingLog),
        ];
        let adopted: Vec<State> = State::adopt(&old, fresh);
        assert_eq!(
            adopted,
            [
                State::Gcra(Some(used)),
                State::Gcra(None),
                State::SlidingLog(None)
            ]
        );
    }

    #[test]
    fn the_table_names_every_algorithm_once() {
        for (i, d) in super::super::TABLE.iter().enumerate() {
            assert_eq!(d.algorithm as usize, i);
            assert_eq!(State::fresh(d.algorithm).algorithm(), d.algorithm);
            assert_eq!(d.algorithm.name(), d.name);
            assert_eq!(d.code.len(), 2);
        }
    }
}
