//! In-flight (concurrency) limit: at most `N` leases held per key, each lapsing `P` (the lease
//! timeout) after it was taken. Twin of `lua/concurrency.lua`.
//!
//! A lease is one slot, whatever the request's cost (cost 0 takes none). The limit's answers:
//! `remaining` is the free slots; `reset` is when the newest lease lapses (every slot free at
//! the latest); `retry`, for a denial, is when the oldest lease lapses, capped at
//! [`RETRY_CAP_US`]: a slot usually comes back far sooner, when a response ends, which no
//! store can foresee, so a client is told to try again within a second rather than wait out
//! a lease timeout sized for the slowest request.

use super::{Eval, PerKey, RateAlgorithm, Step, span};

/// The longest `retry` a denial reports (1 s, the least `Retry-After` can say).
pub(crate) const RETRY_CAP_US: u64 = 1_000_000;

/// The concurrency limit in the table: a per-key algorithm, its state the key's [`Leases`].
pub(crate) struct Concurrency;

impl RateAlgorithm for Concurrency {
    const NAME: &'static str = "concurrency";
    const CODE: &'static str = "cc";
    const LUA_FN: &'static str = "concurrency";
    const LUA_FILE: &'static str = include_str!("../../lua/concurrency.lua");
    const PER_KEY: bool = true;
    type State = ();

    /// Counts the key's leases (trimmed of the lapsed ones first); a lease taken matters for
    /// the timeout. The lease itself is taken by [`Leases::hold`], once the policy committed.
    fn check(
        _: Option<()>,
        key: &PerKey,
        count: u64,
        period_us: u64,
        cost: u64,
        now: u64,
    ) -> Step<()> {
        Step {
            eval: key.leases.check(count, period_us, cost, now),
            next: (),
            ttl: if cost > 0 { period_us } else { 0 },
        }
    }

    /// Nothing: a slot is a lease, taken by a check, not units a charge adds to.
    fn charge(_: Option<()>, _: u64, _: u64, _: u64, _: u64) -> ((), u64) {
        ((), 0)
    }

    /// Nothing: a slot is given back by its lease's release, not by a refund.
    fn refund(_: &mut Option<()>, _: u64, _: u64, _: u64, _: u64, _: u64) -> bool {
        false
    }
}

/// The leases of one key: when each was taken (Unix µs) and its id, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Leases {
    held: Vec<(u64, u128)>,
}

impl Leases {
    /// Drops the leases that lapsed: taken at or before `now − timeout`.
    pub(crate) fn trim(&mut self, timeout_us: u64, now: u64) {
        let lapsed = self.held.partition_point(|&(t, _)| t + timeout_us <= now);
        self.held.drain(..lapsed);
    }

    /// Evaluates one more request of `cost` against `count` slots (after [`Leases::trim`]).
    pub(crate) fn check(&self, count: u64, timeout_us: u64, cost: u64, now: u64) -> Eval {
        let used = self.held.len() as u64;
        let units = cost.min(1);
        let remaining = count.saturating_sub(used);
        let lapse = |t: u64| (t + timeout_us).saturating_sub(now).min(timeout_us);
        let reset_before = self.held.last().map_or(0, |&(t, _)| lapse(t));
        if used + units <= count {
            return Eval {
                allowed: true,
                remaining_before: remaining,
                remaining_after: remaining - units,
                reset_before,
                reset_after: if units > 0 { timeout_us } else { reset_before },
                retry: 0,
            };
        }
        let oldest = self.held.first().map_or(0, |&(t, _)| lapse(t));
        Eval {
            allowed: false,
            remaining_before: remaining,
            remaining_after: remaining,
            reset_before,
            reset_after: reset_before,
            retry: span(oldest.clamp(1, RETRY_CAP_US)),
        }
    }

    /// Takes lease `id` at `now` (kept in time order, as a sorted set keeps it, even if the
    /// clock stepped back).
    pub(crate) fn hold(&mut self, id: u128, now: u64) {
        let at = self.held.partition_point(|&(t, _)| t <= now);
        self.held.insert(at, (now, id));
    }

    /// Gives lease `id` back; answers whether it was held (a lapsed or released one is not).
    pub(crate) fn release(&mut self, id: u128) -> bool {
        match self.held.iter().position(|&(_, held)| held == id) {
            Some(i) => {
                self.held.remove(i);
                true
            }
            None => false,
        }
    }

    /// How many leases are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_at_most_n_and_releases_exactly_its_own() {
        let mut leases = Leases::default();
        for id in 0..3 {
            assert!(leases.check(3, 1_000, 1, 10).allowed);
            leases.hold(id, 10);
        }
        let denied = leases.check(3, 1_000, 1, 20);
        assert!(!denied.allowed);
        assert_eq!(denied.remaining_before, 0);
        // The oldest lease lapses at 1010: 990 µs from now.
        assert_eq!(denied.retry, 990);
        assert!(leases.release(1));
        assert!(!leases.release(1), "never twice");
        assert!(!leases.release(7), "never another's");
        assert_eq!(leases.len(), 2);
        assert!(leases.check(3, 1_000, 1, 20).allowed);
    }

    #[test]
    fn leases_lapse_after_the_timeout() {
        let mut leases = Leases::default();
        leases.hold(1, 100);
        leases.hold(2, 500);
        leases.trim(1_000, 1_099);
        assert_eq!(leases.len(), 2);
        leases.trim(1_000, 1_100);
        assert_eq!(leases.len(), 1);
        assert_eq!(leases.check(1, 1_000, 1, 1_100).reset_before, 400);
        leases.trim(1_000, 1_500);
        assert_eq!(leases.len(), 0);
    }

    #[test]
    fn a_request_holds_one_slot_whatever_its_cost() {
        let leases = Leases::default();
        let e = leases.check(2, 1_000, 50, 0);
        assert!(e.allowed);
        assert_eq!(e.remaining_after, 1);
        assert_eq!(leases.check(2, 1_000, 0, 0).remaining_after, 2);
    }

    #[test]
    fn retry_is_capped_at_a_second() {
        let mut leases = Leases::default();
        leases.hold(1, 0);
        let e = leases.check(1, 3_600_000_000, 1, 0);
        assert_eq!(e.retry, RETRY_CAP_US as i64);
        assert_eq!(e.reset_before, 3_600_000_000);
    }
}
