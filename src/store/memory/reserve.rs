//! Reservations in memory: the earliest slot booked in the key's entry, under the shard's
//! lock, with the same arithmetic as `lua/reserve.lua` (`algorithm/reserve.rs`).

use std::time::Duration;

use super::MemoryStore;
use super::entry::with_entry;
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Reservation, Reservations, Reserved, StoreFuture, micros, reservable};

/// What a booking does: reserve within a wait (µs), charge, or give back.
#[derive(Clone, Copy)]
enum Mode {
    Reserve(u64),
    Charge,
    GiveBack,
}

impl MemoryStore {
    /// Books synchronously what [`Reservations::reserve`] books: the earliest slot for
    /// `costs` of `key` under every limit of `policy`, if it is within `max_wait`.
    /// [`StoreError::Unsupported`] for a policy with a limit that does not reserve
    /// ([`reservable`](crate::store::reservable)) or a key with limit keys.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Reserved};
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let policy = Policy::new("p", [Limit::token_bucket(1, Duration::from_secs(1))?])?;
    /// let key = Key::new("k");
    /// assert!(matches!(store.reserve_now(&policy, &key, &[1], Duration::ZERO)?, Reserved::Slot(_)));
    /// let Reserved::Slot(r) = store.reserve_now(&policy, &key, &[1], Duration::from_secs(1))? else {
    ///     panic!("one second away")
    /// };
    /// assert_eq!(r.wait(), Duration::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_now(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        max_wait: Duration,
    ) -> Result<Reserved, StoreError> {
        let now = self.inner.clock.now_us();
        match self.book(policy, key, costs, Mode::Reserve(micros(max_wait)), now)? {
            Ok(wait) => Ok(Reserved::Slot(Reservation::new(costs, now, wait))),
            Err(Some(wait)) => Ok(Reserved::TooLong {
                wait: Duration::from_micros(wait),
            }),
            Err(None) => Ok(Reserved::Never),
        }
    }

    /// Charges synchronously what [`Reservations::charge_costs`] charges.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let policy = Policy::new("p", [Limit::gcra(10, Duration::from_secs(1))?])?;
    /// store.charge_costs_now(&policy, &Key::new("k"), &[15])?;
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_costs_now(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
    ) -> Result<(), StoreError> {
        let now = self.inner.clock.now_us();
        self.book(policy, key, costs, Mode::Charge, now).map(|_| ())
    }

    /// Gives back synchronously what [`Reservations::give_back`] gives back.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::with_clock(redlimit::store::ManualClock::new(1 << 40));
    /// let policy = Policy::new("p", [Limit::gcra(10, Duration::from_secs(1))?])?;
    /// store.charge_costs_now(&policy, &Key::new("k"), &[10])?;
    /// store.give_back_now(&policy, &Key::new("k"), &[1])?;
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn give_back_now(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
    ) -> Result<(), StoreError> {
        let now = self.inner.clock.now_us();
        self.book(policy, key, costs, Mode::GiveBack, now)
            .map(|_| ())
    }

    fn book(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        mode: Mode,
        now: u64,
    ) -> Result<Result<u64, Option<u64>>, StoreError> {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        if !reservable(policy) || key.has_limit_keys() {
            return Err(StoreError::Unsupported("reservations of this policy"));
        }
        let (at, mut shard) = self.shard(policy, key);
        let (booked, evicted) = with_entry(&mut shard, at, policy, key, now, |entry| match mode {
            Mode::Reserve(max) => entry.reserve(costs, Some(max), now),
            Mode::Charge => entry.reserve(costs, None, now),
            Mode::GiveBack => {
                entry.give_back(costs, now);
                Ok(0)
            }
        });
        drop(shard);
        self.count_evictions(u64::from(evicted));
        Ok(booked)
    }
}

impl Reservations for MemoryStore {
    fn reserve(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        max_wait: Duration,
    ) -> StoreFuture<Reserved> {
        Box::pin(std::future::ready(
            self.reserve_now(policy, key, costs, max_wait),
        ))
    }

    fn charge_costs(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()> {
        Box::pin(std::future::ready(
            self.charge_costs_now(policy, key, costs),
        ))
    }

    fn give_back(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()> {
        Box::pin(std::future::ready(self.give_back_now(policy, key, costs)))
    }
}
