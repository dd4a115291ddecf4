//! Reservations: a store's optional power to book the earliest slot for a request under
//! every limit of a policy, in one atomic call, so the caller sleeps until its slot instead of
//! asking again ([`Reservations`], reached through
//! [`Store::reservations`](super::Store::reservations)). The client side's
//! [`Limiter`](crate::limiter::Limiter) is built on it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::StoreFuture;
use crate::key::Key;
use crate::policy::Policy;

/// Whether every limit of `policy` reserves natively: GCRA and token bucket limits do (the
/// reservation moves their state forward); windows, logs and concurrency limits do not.
///
/// ```
/// use std::time::Duration;
/// use redlimit::{Limit, Policy};
/// let minute = Duration::from_secs(60);
/// let llm = Policy::new("llm", [Limit::gcra(500, minute)?, Limit::token_bucket(90_000, minute)?])?;
/// assert!(redlimit::store::reservable(&llm));
/// let window = Policy::new("w", [Limit::fixed_window(10, minute)?])?;
/// assert!(!redlimit::store::reservable(&window));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
pub fn reservable(policy: &Policy) -> bool {
    let limits = policy.limits();
    !limits.is_empty() && limits.iter().all(|l| l.algorithm().reserves())
}

/// A slot booked by [`Reservations::reserve`]: the units are committed in the store, the
/// request may go at [`slot`](Self::slot), after [`wait`](Self::wait).
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::{MemoryStore, Reserved};
/// use redlimit::{Key, Limit, Policy};
/// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
/// let policy = Policy::new("p", [Limit::gcra(2, Duration::from_secs(1))?])?;
/// let key = Key::new("k");
/// let max = Duration::from_secs(5);
/// for expected in [0, 0, 500] {
///     let Reserved::Slot(r) = store.reserve_now(&policy, &key, &[1], max)? else { panic!() };
///     assert_eq!(r.wait(), Duration::from_millis(expected));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    costs: Box<[u64]>,
    wait_us: u64,
    slot_us: u64,
}

impl Reservation {
    /// A reservation of `costs` at the store's time `now_us`, `wait_us` from then.
    pub(crate) fn new(costs: &[u64], now_us: u64, wait_us: u64) -> Self {
        Reservation {
            costs: costs.into(),
            wait_us,
            slot_us: now_us.saturating_add(wait_us),
        }
    }

    /// How long the caller must wait, from the store's answer, before its slot.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::store::{MemoryStore, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let Reserved::Slot(r) = store.reserve_now(&policy, &Key::new("k"), &[1], Duration::ZERO)? else { panic!() };
    /// assert_eq!(r.wait(), Duration::ZERO);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&self) -> Duration {
        Duration::from_micros(self.wait_us)
    }

    /// The units reserved: one per limit of the policy, or one for every limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::store::{MemoryStore, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1))?])?;
    /// let Reserved::Slot(r) = MemoryStore::new().reserve_now(&policy, &Key::new("k"), &[3], Duration::ZERO)? else { panic!() };
    /// assert_eq!(r.costs(), [3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn costs(&self) -> &[u64] {
        &self.costs
    }

    /// The slot, on the store's clock.
    ///
    /// ```
    /// # use std::time::{Duration, SystemTime};
    /// # use redlimit::store::{MemoryStore, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(1))?])?;
    /// let Reserved::Slot(r) = MemoryStore::new().reserve_now(&policy, &Key::new("k"), &[1], Duration::ZERO)? else { panic!() };
    /// assert!(r.slot() <= SystemTime::now());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slot(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.slot_us)
    }
}

/// The answer to [`Reservations::reserve`].
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::{MemoryStore, Reserved};
/// use redlimit::{Key, Limit, Policy};
/// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
/// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60))?])?;
/// let key = Key::new("k");
/// assert!(matches!(store.reserve_now(&policy, &key, &[1], Duration::ZERO)?, Reserved::Slot(_)));
/// assert_eq!(
///     store.reserve_now(&policy, &key, &[1], Duration::ZERO)?,
///     Reserved::TooLong { wait: Duration::from_secs(60) },
/// );
/// assert_eq!(store.reserve_now(&policy, &key, &[2], Duration::ZERO)?, Reserved::Never);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserved {
    /// The slot is booked: go after [`Reservation::wait`].
    Slot(Reservation),
    /// The earliest slot is further than the longest wait accepted: nothing was taken.
    TooLong {
        /// How long the caller would have had to wait.
        wait: Duration,
    },
    /// Some limit never admits this cost (it is above its count): nothing was taken.
    Never,
}

/// Books slots in the future: a store's optional power, reached through
/// [`Store::reservations`](super::Store::reservations). Policies of GCRA and token bucket
/// limits only ([`reservable`]); any other answers
/// [`StoreError::Unsupported`](crate::StoreError::Unsupported).
///
/// Costs are given per limit, in the policy's order (an LLM quota of 500 requests and
/// 90 000 tokens a minute reserves `[1, tokens]`), or as one value for every limit; a limit
/// of cost 0 is left as it is.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::store::{MemoryStore, Reservations, Reserved, Store};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let minute = Duration::from_secs(60);
/// let llm = Policy::new("llm", [Limit::gcra(500, minute).unwrap(), Limit::gcra(90_000, minute).unwrap()]).unwrap();
/// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
/// let reservations = store.reservations().expect("the memory store reserves");
/// let answer = reservations.reserve(&llm, &Key::new("k"), &[1, 4_000], Duration::from_secs(1)).await;
/// assert!(matches!(answer.unwrap(), Reserved::Slot(_)));
/// # });
/// ```
pub trait Reservations: Send + Sync {
    /// Books the earliest slot at which `costs` of `key` conform to every limit of `policy`,
    /// committing them in every limit, in one atomic step (one script call in Redis, on Redis
    /// `TIME`); or takes nothing if that slot is further than `max_wait`
    /// ([`Reserved::TooLong`]) or never comes ([`Reserved::Never`]). Callers are served in the
    /// order their reservations reach the store.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Reservations, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let policy = Policy::new("p", [Limit::token_bucket(1, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let first = store.reserve(&policy, &Key::new("k"), &[1], Duration::ZERO).await.unwrap();
    /// assert!(matches!(first, Reserved::Slot(_)));
    /// # });
    /// ```
    fn reserve(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        max_wait: Duration,
    ) -> StoreFuture<Reserved>;

    /// Commits `costs` more units of `key` now in every limit of `policy`, however long the
    /// backlog and whatever the counts: a request that turned out dearer than it reserved
    /// ([`Permit::settle`](crate::limiter::Permit::settle)). Later reservations wait for it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Reservations, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let policy = Policy::new("p", [Limit::gcra(10, Duration::from_secs(1)).unwrap()]).unwrap();
    /// let (store, key) = (MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40)), Key::new("k"));
    /// store.charge_costs(&policy, &key, &[20]).await.unwrap();
    /// let answer = store.reserve(&policy, &key, &[1], Duration::from_secs(5)).await.unwrap();
    /// let Reserved::Slot(r) = answer else { panic!() };
    /// assert_eq!(r.wait(), Duration::from_millis(1100));
    /// # });
    /// ```
    fn charge_costs(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()>;

    /// Gives back `costs` of a reservation of `key` (all of its costs, or part of them: a
    /// settle below the estimate): a waiter cancelled before its slot. Call it once per
    /// reservation (it is not idempotent: the limiter calls it once and never replays it).
    /// Per limit it is a refund ([`Refund`](super::Refund)): GCRA moves the TAT back by the
    /// cost's intervals, never before now; a token bucket takes the tokens back, never fuller
    /// than full.
    ///
    /// What that means when others reserved behind: every reservation made after a cancelled
    /// one, before its slot, waited behind it (the backlog never drained in between), so for
    /// the limit that set the slot the TAT given back is exactly the TAT the store would hold
    /// had the cancelled reservation never been made. Those later callers keep their slots
    /// (they go no earlier than told; the cancelled slot stays empty): the units go to the
    /// next caller, who goes no earlier than the last slot handed out, so no window admits
    /// more than the policy allows. A limit that did not set the slot (a multi-limit policy)
    /// gets the same units back, which may come up to that cost early on that limit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Reservations, Reserved};
    /// # use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let (key, max) = (Key::new("k"), Duration::from_secs(120));
    /// store.reserve(&policy, &key, &[1], max).await.unwrap();
    /// let Reserved::Slot(second) = store.reserve(&policy, &key, &[1], max).await.unwrap() else { panic!() };
    /// assert_eq!(second.wait(), Duration::from_secs(60));
    /// store.give_back(&policy, &key, second.costs()).await.unwrap();
    /// let Reserved::Slot(again) = store.reserve(&policy, &key, &[1], max).await.unwrap() else { panic!() };
    /// assert_eq!(again.wait(), Duration::from_secs(60), "the cancelled slot, handed out again");
    /// # });
    /// ```
    fn give_back(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()>;

    /// Readies the store for reservations before the first one, without waiting (a Redis
    /// store loads the reservation script in the background, so that the first
    /// reservations of a fleet starting together are not each a `NOSCRIPT`, a load and the
    /// call again). The default does nothing; a [`Limiter`](crate::limiter::Limiter) calls it
    /// when it is built.
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Reservations};
    /// MemoryStore::new().prepare_reservations();
    /// ```
    fn prepare_reservations(&self) {}
}

/// The cost of limit `i` among `costs` (one per limit, or one for all).
pub(crate) fn cost_at(costs: &[u64], i: usize) -> u64 {
    match costs {
        [all] => *all,
        _ => costs.get(i).copied().unwrap_or(0),
    }
}

/// A span in µs, saturating (reservations are bounded far below).
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
