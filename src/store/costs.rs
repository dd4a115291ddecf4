//! Checks with a cost per limit: a store's optional power to check and commit several limits of
//! one policy in one atomic step when each limit is charged units of its own
//! ([`LimitCosts`], reached through [`Store::limit_costs`](super::Store::limit_costs)). The
//! RLS server is built on it: a request's descriptors, each with its own `hits_addend`, are
//! one atomic check, so a refused request charges nothing, even for a moment.

use super::Check;
use crate::algorithm::Algorithm;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;

/// How a check with a cost per limit commits its costs.
///
/// The admission ([`AllOrNone`](Commit::AllOrNone), the default) or the charge of every cost
/// ([`Always`](Commit::Always), as envoyproxy/ratelimit counts by default). The enum is
/// `#[non_exhaustive]`: a store that meets a mode it does not know answers
/// [`StoreError::Unsupported`].
///
/// ```
/// use redlimit::store::Commit;
/// assert_eq!(Commit::default(), Commit::AllOrNone);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Commit {
    /// The request is admitted only if every limit admits its own cost, and only then is any
    /// cost committed: a refused request consumes nothing (the [`Store`](super::Store)
    /// contract, per limit).
    #[default]
    AllOrNone,
    /// Every limit is charged its own cost, whatever the others say and past its own limit
    /// (debt, up to the cap of [`Store::charge`](super::Store::charge): twice the limit), as
    /// envoyproxy/ratelimit's `INCRBY` counts every hit by default. Each limit answers on its
    /// own, as the Go service answers each descriptor (`OVER_LIMIT` when its count after the
    /// hits is past the limit):
    ///
    /// - **allowed** when its cost fitted, that is when an admission of that cost alone would
    ///   have admitted it (its state after the charge within the limit; a cost of 0 on a state
    ///   within the limit, even with nothing left): the state after the charge, as a check
    ///   reports it (remaining after, reset);
    /// - **refused** otherwise (the cost did not fit, or the state was in debt already): the
    ///   cost lands anyway, and the limit reports 0 remaining, with
    ///   [`retry_after`](crate::LimitState::retry_after) when its debt is paid (when its state
    ///   is back within the limit: a cost of 0 would pass) and its reset.
    ///
    /// The decision is allowed when every limit is. Not for a concurrency limit (its slots are
    /// leases, not costs: [`StoreError::Unsupported`]); a penalty box plays no part (nothing is
    /// boxed, a box is not read), as in a charge.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{Commit, LimitCosts, MemoryStore, Store};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let hour = Duration::from_secs(3_600);
    /// let policy = Policy::new("p", [Limit::fixed_window(1_000, hour)?, Limit::fixed_window(10, hour)?])?;
    /// let key = Key::new("k");
    /// let store = MemoryStore::new();
    /// let costs = store.limit_costs().expect("the memory store checks costs per limit");
    /// // 1 200 tokens do not fit: charged anyway (200 owed), refused; the request fits.
    /// let decision = costs.check_costs(&policy, &key, &[1_200, 1], Commit::Always).await?;
    /// assert!(!decision.limits()[0].is_allowed());
    /// assert_eq!(decision.limits()[0].remaining(), 0);
    /// assert!(decision.limits()[1].is_allowed());
    /// assert_eq!(decision.limits()[1].remaining(), 9);
    /// // A check of nothing is refused while the debt lasts.
    /// let check = costs.check_costs(&policy, &key, &[0, 0], Commit::Always).await?;
    /// assert!(!check.limits()[0].is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    Always,
}

/// Checks a policy for a key with a cost of its own for each limit, in one atomic step (one
/// script call in Redis, on Redis `TIME`; one lock of the shards involved in memory): a
/// store's optional power, reached through
/// [`Store::limit_costs`](super::Store::limit_costs).
///
/// `costs` holds one cost per limit of the policy, in its order; a limit of cost 0 is
/// evaluated and reported as it stands and consumes nothing. The sliding-log limits of a
/// policy share one log per key, so they must share one cost. Anything else (a different
/// number of costs, logs of different costs, a [`Commit`] the store does not know) is refused
/// with [`StoreError::Unsupported`] before the store is asked. The decision is what
/// [`Store::check`](super::Store::check) answers, each limit's state after its own cost.
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::{Commit, LimitCosts, MemoryStore, Store};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let day = Duration::from_secs(86_400);
/// let policy = Policy::new("p", [Limit::fixed_window(5, day)?, Limit::fixed_window(3, day)?])?;
/// let key = Key::new("k");
/// let store = MemoryStore::new();
/// let costs = store.limit_costs().expect("the memory store checks costs per limit");
/// let decision = costs.check_costs(&policy, &key, &[1, 3], Commit::AllOrNone).await?;
/// let left: Vec<u64> = decision.limits().iter().map(|l| l.remaining()).collect();
/// assert_eq!(left, [4, 0]);
/// // Refused by the second limit: the first is not charged either.
/// assert!(!costs.check_costs(&policy, &key, &[1, 1], Commit::AllOrNone).await?.is_allowed());
/// assert_eq!(store.inspect_now(&policy, &key).limits()[0].remaining(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub trait LimitCosts: Send + Sync {
    /// Checks `costs[i]` units against limit `i` of `policy` for `key`, committing them as
    /// `commit` says.
    fn check_costs(&self, policy: &Policy, key: &Key, costs: &[u64], commit: Commit) -> Check;
}

/// Whether a check of `costs` (one per limit) under `policy` and `commit` is one a store can
/// make, or why not.
pub(crate) fn validate(policy: &Policy, costs: &[u64], commit: Commit) -> Result<(), StoreError> {
    let limits = policy.limits();
    if costs.len() != limits.len() {
        return Err(StoreError::Unsupported(
            "costs per limit that are not one per limit of the policy",
        ));
    }
    let mut logs = limits
        .iter()
        .zip(costs)
        .filter(|(l, _)| l.algorithm() == Algorithm::SlidingLog)
        .map(|(_, c)| *c);
    if let Some(first) = logs.next()
        && logs.any(|c| c != first)
    {
        return Err(StoreError::Unsupported(
            "sliding logs of one policy with different costs (they share one log)",
        ));
    }
    match commit {
        Commit::AllOrNone => Ok(()),
        Commit::Always
            if limits
                .iter()
                .any(|l| l.algorithm() == Algorithm::Concurrency) =>
        {
            Err(StoreError::Unsupported(
                "a concurrency limit charged whatever its state",
            ))
        }
        Commit::Always => Ok(()),
    }
}

/// The cost a whole check of `costs` is reported and guarded under where one cost is needed
/// (a lease taken, a script's cost argument): the largest.
#[cfg(feature = "redis")]
pub(crate) fn largest(costs: &[u64]) -> u64 {
    costs.iter().copied().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use std::time::Duration;

    #[test]
    fn one_cost_per_limit_and_one_per_log() {
        let s = Duration::from_secs(1);
        let policy = Policy::new(
            "p",
            [
                Limit::sliding_log(5, s).unwrap(),
                Limit::gcra(5, s).unwrap(),
                Limit::sliding_log(9, s).unwrap(),
            ],
        )
        .unwrap();
        assert!(validate(&policy, &[2, 7, 2], Commit::AllOrNone).is_ok());
        assert!(validate(&policy, &[2, 7], Commit::AllOrNone).is_err());
        assert!(validate(&policy, &[2, 7, 3], Commit::AllOrNone).is_err());
        assert_eq!(largest(&[2, 7, 3]), 7);
    }
}
