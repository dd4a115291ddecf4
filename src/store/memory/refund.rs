//! Refunds in memory: the units of one admission given back to the key's entry, each refund's
//! token remembered for as long as it could matter, so that a refund applies once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::MemoryStore;
use super::entry::with_entry;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Refund;

/// The tokens of the refunds applied, each until its admission's state is moot (when a
/// repeat could no longer give anything back anyway).
#[derive(Default)]
pub(super) struct Tokens {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    until: HashMap<u64, u64>,
    /// The size after the last sweep: the next sweeps when the map has doubled, so the
    /// sweeps cost O(1) per refund.
    swept: usize,
}

impl Tokens {
    /// Records `token` until `until`; answers whether it is new.
    fn first(&self, token: u64, until: u64, now: u64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.until.len() >= 2 * seen.swept.max(64) {
            seen.until.retain(|_, t| *t > now);
            seen.swept = seen.until.len();
        }
        match seen.until.get(&token) {
            Some(&t) if t > now => false,
            _ => {
                seen.until.insert(token, until);
                true
            }
        }
    }
}

impl MemoryStore {
    /// Gives back synchronously what [`Refunds::refund`](crate::store::Refunds::refund) gives
    /// back: the units of the admission `refund` was made from, once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Refund};
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::token_bucket(2, Duration::from_secs(60))?])?;
    /// let key = Key::new("k");
    /// let refund = Refund::of(&store.check_now(&policy, &key, 2), 2).unwrap();
    /// assert!(store.refund_now(&policy, &key, refund));
    /// assert_eq!(store.inspect_now(&policy, &key).limits()[0].remaining(), 2);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn refund_now(&self, policy: &Policy, key: &Key, refund: Refund) -> bool {
        let inner = &*self.inner;
        let overridden = inner.overrides.effective(policy, key);
        let policy = overridden.as_ref().unwrap_or(policy);
        let now = inner.clock.now_us();
        // A sliding window's count weighs until the end of the window after its own.
        let longest = u64::try_from(policy.max_period().as_micros()).unwrap_or(u64::MAX);
        let until = refund.at_us().saturating_add(longest.saturating_mul(2));
        if until <= now || !inner.refunds.first(refund.token(), until, now) {
            return false;
        }
        if key.has_limit_keys() {
            return self.refund_parts(policy, key, (refund.cost(), refund.at_us()), now);
        }
        let (at, mut shard) = self.shard(policy, key);
        let (given, _) = with_entry(&mut shard, at, policy, key, now, |entry| {
            entry.refund(policy, refund.cost(), refund.at_us(), now)
        });
        given
    }
}
