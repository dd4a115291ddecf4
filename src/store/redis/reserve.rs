//! How a [`RedisStore`] books slots ([`Reservations`]): one call of `lua/reserve.lua` per
//! reservation, charge or give back, on the key's connection (its slot in a Cluster), never
//! replayed.

use std::sync::Arc;
use std::time::Duration;

use super::script::{ReserveMode, reserve_command, reserve_script};
use super::{RedisStore, error::store_error};
use crate::error::StoreError;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{Reservation, Reservations, Reserved, StoreFuture, micros, reservable};

impl RedisStore {
    /// The call of [`Reservations::reserve`] (with a `max_wait`), [`Reservations::charge_costs`]
    /// (`None`) or [`Reservations::give_back`] (`give_back`), at the store's time.
    pub(crate) fn book(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        max_wait: Option<Duration>,
        give_back: bool,
    ) -> StoreFuture<Reserved> {
        let overridden = self.inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        if !reservable(policy) || key.has_limit_keys() {
            return crate::store::unsupported("reservations of this policy");
        }
        let mode = match (give_back, max_wait) {
            (true, _) => ReserveMode::GiveBack,
            (false, Some(max)) => ReserveMode::Reserve(micros(max)),
            (false, None) => ReserveMode::Charge,
        };
        let command = reserve_command(&self.inner.prefix, policy, key, costs, mode, self.clock);
        let inner = Arc::clone(&self.inner);
        let costs: Box<[u64]> = costs.into();
        Box::pin(async move {
            let reply: Vec<i64> = inner.backend.run(&command).await.map_err(store_error)?;
            let unexpected = || StoreError::UnexpectedReply(format!("{reply:?} to a reservation"));
            // `lua/reserve.lua`: two values for a slot, three otherwise.
            let (now, status, wait) = match reply[..] {
                [now, wait] => (now, 1, wait),
                [now, status @ (0 | -1), wait] => (now, status, wait),
                _ => return Err(unexpected()),
            };
            let (Ok(now), Ok(wait)) = (u64::try_from(now), u64::try_from(wait)) else {
                return Err(unexpected());
            };
            match status {
                1 => Ok(Reserved::Slot(Reservation::new(&costs, now, wait))),
                0 => Ok(Reserved::TooLong {
                    wait: Duration::from_micros(wait),
                }),
                -1 => Ok(Reserved::Never),
                _ => Err(unexpected()),
            }
        })
    }
}

impl Reservations for RedisStore {
    fn reserve(
        &self,
        policy: &Policy,
        key: &Key,
        costs: &[u64],
        max_wait: Duration,
    ) -> StoreFuture<Reserved> {
        self.book(policy, key, costs, Some(max_wait), false)
    }

    fn charge_costs(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()> {
        let booked = self.book(policy, key, costs, None, false);
        Box::pin(async move { booked.await.map(|_| ()) })
    }

    fn give_back(&self, policy: &Policy, key: &Key, costs: &[u64]) -> StoreFuture<()> {
        let booked = self.book(policy, key, costs, None, true);
        Box::pin(async move { booked.await.map(|_| ()) })
    }

    fn prepare_reservations(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = Arc::clone(&self.inner);
        runtime.spawn(async move {
            if let Err(err) = inner.backend.load(&[reserve_script()]).await {
                // The first reservations load it on `NOSCRIPT` instead.
                tracing::debug!(%err, "loading the reservation script ahead failed");
            }
        });
    }
}
