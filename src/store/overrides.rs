//! Per-key overrides: one key of one policy counted under other numbers (`1000/1m` instead of
//! `100/1m`), set while the service runs. The state is kept: a key that used 90 of 100 and
//! gets 1000 has 910 left.

use std::fmt;
use std::time::Duration;

use super::StoreFuture;
use crate::error::ConfigError;
use crate::key::Key;
use crate::limit::Limit;
use crate::policy::Policy;

/// The rates one key of a policy is counted under instead of the policy's own: one `N/period`
/// per limit of the policy, in its order, each enforced by that limit's algorithm (an override
/// changes numbers, never algorithms, so the key's state carries over).
///
/// Set it with [`Overrides::set_override`](super::Overrides::set_override) (or through a layer,
/// [`Handle::set_override`](crate::layer::Handle::set_override), which also drops the
/// key's cached denial). A policy whose limits change later (a reload) ignores an override
/// that no longer fits it (another number of limits, or a rate its algorithm cannot enforce).
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::Override;
/// use redlimit::{Limit, Policy};
/// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
/// let raised = Override::parse(&policy, "1000/1m\n")?;
/// assert_eq!(raised.rates(), [(1000, Duration::from_secs(60))]);
/// assert_eq!(raised.to_string(), "1000/1m");
/// assert!(Override::parse(&policy, "1000/1m\n5/1s").is_err(), "one rate per limit");
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    rates: Box<[(u64, Duration)]>,
}

impl Override {
    /// An override of `policy` with these rates (`(N, period)`, one per limit, in order), or
    /// why it does not fit the policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::Override;
    /// use redlimit::{ConfigError, Limit, Policy};
    /// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let o = Override::new(&policy, [(5, Duration::from_secs(1))])?;
    /// assert_eq!(o.limits_for(&policy)?, [Limit::gcra(5, Duration::from_secs(1))?]);
    /// assert!(matches!(
    ///     Override::new(&policy, [(0, Duration::from_secs(1))]),
    ///     Err(ConfigError::InvalidOverride { .. })
    /// ));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(
        policy: &Policy,
        rates: impl IntoIterator<Item = (u64, Duration)>,
    ) -> Result<Self, ConfigError> {
        let o = Override {
            rates: rates.into_iter().take(crate::MAX_LIMITS + 1).collect(),
        };
        o.limits_for(policy)?;
        Ok(o)
    }

    /// Parses one `N/DURATION` per line (`1000/1m`; blank lines and surrounding spaces are
    /// ignored), as flags and text files write an override; for a calendar window, `N/UNIT`
    /// with its unit (`5000000/month`: its calendar is kept, the override sets its count).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::Override;
    /// use redlimit::{Limit, Policy};
    /// let policy = Policy::new("api", [
    ///     Limit::gcra(10, Duration::from_secs(1))?,
    ///     Limit::fixed_window(1000, Duration::from_secs(3600))?,
    /// ])?;
    /// let o = Override::parse(&policy, "20/1s\n 5000/1h \n")?;
    /// assert_eq!(o.rates().len(), 2);
    /// let err = Override::parse(&policy, "20 per second\n5000/1h").unwrap_err();
    /// assert!(err.to_string().contains("line 1"), "{err}");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn parse(policy: &Policy, text: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidOverride {
            policy: policy.name().to_owned(),
            reason,
        };
        let mut rates = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if rates.len() > crate::MAX_LIMITS {
                return Err(invalid(format!("more than {} rates", crate::MAX_LIMITS)));
            }
            let limit = policy
                .limits()
                .get(rates.len())
                .copied()
                .unwrap_or_else(|| policy.limits()[0]);
            let parsed = limit
                .parse_rate_like(line)
                .map_err(|e| invalid(format!("line {}: {e}", i + 1)))?;
            rates.push(parsed);
        }
        Override::new(policy, rates)
    }

    /// The rates, one per limit of the policy, in its order.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{store::Override, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let o = Override::new(&policy, [(3, Duration::from_secs(1))])?;
    /// assert_eq!(o.rates(), [(3, Duration::from_secs(1))]);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn rates(&self) -> &[(u64, Duration)] {
        &self.rates
    }

    /// The limits `policy` has under this override: its algorithms with these rates, or why
    /// they do not fit it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::{store::Override, Limit, Policy};
    /// let one = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let o = Override::new(&one, [(3, Duration::from_secs(1))])?;
    /// let two = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?; 2])?;
    /// assert!(o.limits_for(&two).is_err(), "the policy changed: the override no longer fits");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn limits_for(&self, policy: &Policy) -> Result<Vec<Limit>, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidOverride {
            policy: policy.name().to_owned(),
            reason,
        };
        if self.rates.len() != policy.limits().len() {
            return Err(invalid(format!(
                "{} rates for {} limits: give one N/DURATION per limit",
                self.rates.len(),
                policy.limits().len()
            )));
        }
        policy
            .limits()
            .iter()
            .zip(self.rates.iter())
            .map(|(limit, &(count, period))| {
                // A calendar window keeps its calendar: an override sets its count.
                match limit.aligned_to() {
                    Some(_) => limit.with_count(count),
                    None => Limit::new(limit.algorithm(), count, period),
                }
                .map_err(|e| invalid(e.to_string()))
            })
            .collect()
    }

    /// `policy` under this override, if it fits.
    pub(crate) fn apply(&self, policy: &Policy) -> Option<Policy> {
        let limits = self.limits_for(policy).ok()?;
        policy.with_limits(limits).ok()
    }

    /// The stored form: `N period_µs` per rate, separated by spaces.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Only Redis stores it.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        for (count, period) in self.rates.iter() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&format!("{count} {}", period.as_micros()));
        }
        out
    }

    /// Reads the stored form back (`None` if it is not one; checked against a policy only
    /// when applied).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Only Redis stores it.
    pub(crate) fn decode(text: &str) -> Option<Self> {
        let numbers: Vec<u64> = text
            .split(' ')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        if numbers.is_empty()
            || !numbers.len().is_multiple_of(2)
            || numbers.len() > 2 * crate::MAX_LIMITS
        {
            return None;
        }
        Some(Override {
            rates: numbers
                .chunks(2)
                .map(|pair| (pair[0], Duration::from_micros(pair[1])))
                .collect(),
        })
    }
}

/// Per-key overrides of a policy's rates: a store's optional power, reached through
/// [`Store::overrides`](super::Store::overrides). `MemoryStore` keeps them in memory;
/// `RedisStore` keeps them in Redis, so every replica applies them (within its poll interval)
/// and they survive restarts.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::store::{MemoryStore, Override, Overrides};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::fixed_window(1, Duration::from_secs(60)).unwrap()]).unwrap();
/// let key = Key::new("k");
/// assert!(store.check_now(&policy, &key, 1).is_allowed());
/// assert!(!store.check_now(&policy, &key, 1).is_allowed());
/// let raised = Override::parse(&policy, "3/1m").unwrap();
/// store.set_override(&policy, &key, raised.clone()).await.unwrap();
/// assert_eq!(store.get_override(&policy, &key).await.unwrap(), Some(raised));
/// assert_eq!(store.check_now(&policy, &key, 1).limits()[0].remaining(), 1);
/// # });
/// ```
pub trait Overrides: Send + Sync {
    /// Sets an override for `key` under `policy`: from now on the key is counted under the
    /// override's rates instead of the policy's ([`Override`]), keeping its state (90 used of
    /// 100 leaves 910 of 1000).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override, Overrides};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let five = Override::parse(&policy, "5/1m").unwrap();
    /// store.set_override(&policy, &Key::new("k"), five).await.unwrap();
    /// # });
    /// ```
    fn set_override(&self, policy: &Policy, key: &Key, value: Override) -> StoreFuture<()>;

    /// The override of `key` under `policy`, if any (as the store holds it: in Redis for a
    /// Redis store).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Overrides};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// assert_eq!(MemoryStore::new().get_override(&policy, &Key::new("k")).await.unwrap(), None);
    /// # });
    /// ```
    fn get_override(&self, policy: &Policy, key: &Key) -> StoreFuture<Option<Override>>;

    /// Removes the override of `key` under `policy`; answers whether there was one. The key
    /// is counted under the policy's own limits again, its state kept.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override, Overrides};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// store.set_override(&policy, &key, Override::parse(&policy, "5/1m").unwrap()).await.unwrap();
    /// assert!(store.remove_override(&policy, &key).await.unwrap());
    /// assert!(!store.remove_override(&policy, &key).await.unwrap());
    /// # });
    /// ```
    fn remove_override(&self, policy: &Policy, key: &Key) -> StoreFuture<bool>;

    /// A number that changes whenever the overrides this store applies change (set, removed,
    /// or, for a Redis store, seen changed in Redis by its poller). A layer asks the store
    /// again, rather than answer from its deny cache, for denials cached before a change.
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Overrides};
    /// assert_eq!(MemoryStore::new().overrides_version(), 0);
    /// ```
    fn overrides_version(&self) -> u64;

    /// The override of the key `key` under the policy named `policy` that this store applies
    /// now, read from memory (no I/O: a Redis store's copy of what Redis holds, as its last
    /// poll found it). For fronts that apply overrides themselves (the Envoy rate limit
    /// service's per-descriptor limits). The default: none.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Override, Overrides};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let five = Override::parse(&policy, "5/1m").unwrap();
    /// store.set_override(&policy, &Key::new("k"), five.clone()).await.unwrap();
    /// assert_eq!(store.override_in_force("p", &Key::new("k")), Some(five));
    /// assert_eq!(store.override_in_force("p", &Key::new("other")), None);
    /// # });
    /// ```
    fn override_in_force(&self, policy: &str, key: &Key) -> Option<Override> {
        let _ = (policy, key);
        None
    }

    /// Until this store has read the overrides [`override_in_force`](Self::override_in_force)
    /// answers from (a Redis store made with `connect_lazy`, before its poller's first
    /// read): a future that reads them, or waits for the read under way, and fails as a check
    /// would while the store cannot be read. `None` once they are read, and always for a store
    /// that keeps them in memory (the default). A front that applies overrides itself waits on
    /// it before its first decision, as a store's own checks do.
    ///
    /// ```
    /// use redlimit::store::{MemoryStore, Overrides};
    /// assert!(MemoryStore::new().read_overrides().is_none());
    /// ```
    fn read_overrides(&self) -> Option<StoreFuture<()>> {
        None
    }
}

impl fmt::Display for Override {
    /// One `N/DURATION` per line, as [`Override::parse`] reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (count, period)) in self.rates.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{count}/{}", crate::duration::format(*period))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_of_a_calendar_window_sets_its_count_and_keeps_its_calendar() {
        let month = crate::calendar::Calendar::month()
            .on_day(15)
            .in_zone("Europe/Berlin")
            .unwrap();
        let policy = Policy::new("tokens", [Limit::calendar(100, month).unwrap()]).unwrap();
        let o = Override::parse(&policy, "5000/month").unwrap();
        let applied = o.apply(&policy).unwrap();
        let limit = applied.limits()[0];
        assert_eq!(limit.count(), 5000);
        assert_eq!(limit.aligned_to(), policy.limits()[0].aligned_to());
        let stored = Override::decode(&o.encode()).unwrap();
        assert_eq!(stored.apply(&policy).unwrap().limits()[0], limit);
        for bad in ["5000/1h", "5000/day", "0/month", "many/month"] {
            assert!(Override::parse(&policy, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_stored_form_reads_back_and_garbage_does_not() {
        let policy = Policy::new(
            "p",
            [
                Limit::gcra(1, Duration::from_secs(1)).unwrap(),
                Limit::sliding_log(5, Duration::from_secs(60)).unwrap(),
            ],
        )
        .unwrap();
        let o = Override::parse(&policy, "10/1s\n50/1m").unwrap();
        assert_eq!(o.encode(), "10 1000000 50 60000000");
        assert_eq!(Override::decode(&o.encode()), Some(o));
        for garbage in ["", "1", "1 x", "1 2 3", "-1 5"] {
            assert_eq!(Override::decode(garbage), None, "{garbage}");
        }
    }

    #[test]
    fn hostile_bodies_are_errors() {
        let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1)).unwrap()]).unwrap();
        let long = "1/1s\n".repeat(10_000);
        for body in [
            "",
            "\n\n",
            "0/1s",
            "1/0s",
            "99999999999999999999/1s",
            &long,
            "1/1s\u{0}",
        ] {
            assert!(Override::parse(&policy, body).is_err(), "{body:?}");
        }
    }
}
