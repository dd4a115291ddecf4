//! What a refund gives back: the units one admitted request consumed, identified so that the
//! store applies it at most once ([`Refunds::refund`](super::Refunds::refund)).

use std::time::{SystemTime, UNIX_EPOCH};

use super::StoreFuture;
use crate::decision::{Decision, DecisionSource};
use crate::key::Key;
use crate::policy::Policy;

/// The units one admitted request consumed, to give back to the limits of its policy after
/// all (its response was a 5xx, a cache hit, ...): [`Refunds::refund`](super::Refunds::refund).
///
/// Made from the store's decision ([`Refund::of`]), so it carries what the decision committed:
/// the cost, the store's time of the decision (which window, which log entry, which part of a
/// GCRA backlog the units went to), and the decision's token, unique to it (and its clones).
/// A store applies a token once: refunds of one decision, however many are made and sent
/// (twice, or by two replicas), give back once.
///
/// What giving back means, per algorithm (never below the state before the request):
///
/// | algorithm | a refund |
/// |---|---|
/// | fixed window | takes `cost` off the count of the window the request was counted in, not below 0; nothing once that window has ended |
/// | sliding window | the same, for the current count, or the previous one once the window has moved on (it still weighs); nothing after that |
/// | sliding log | removes the request's units from the log entry of its time (later entries keep theirs); nothing once it left every span |
/// | token bucket | puts `cost` tokens back, the bucket never fuller than its capacity |
/// | GCRA | moves the TAT back by `cost` emission intervals, never before now |
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::{MemoryStore, Refund, Refunds};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::fixed_window(3, Duration::from_secs(60)).unwrap()]).unwrap();
/// let key = Key::new("k");
/// let decision = store.check_now(&policy, &key, 2);
/// assert_eq!(decision.remaining(), Some(1));
/// let refund = Refund::of(&decision, 2).expect("an admission by the store");
/// assert!(store.refund(&policy, &key, refund).await.unwrap());
/// assert_eq!(store.inspect_now(&policy, &key).limits()[0].remaining(), 3);
/// # });
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct Refund {
    cost: u64,
    at_us: u64,
    token: u64,
}

impl Refund {
    /// The refund of a request of `cost` that `decision` admitted, or `None` when there is
    /// nothing to give back: the decision denied it, did not come from the store (fail open,
    /// the local fallback), or `cost` is 0. A local-first store's decisions in memory
    /// ([`DecisionSource::LocalFirst`]) are the store's: they count into the state in Redis,
    /// and are refunded there. `cost`
    /// must be the cost the request was checked with (the layer passes it): the guarantee
    /// "never below the state before the request" rests on it. A larger one may give back units of other requests, though never beyond
    /// a fresh state (a count at 0, a bucket full, a TAT at now, a log entry empty).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Refund};
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60))?])?;
    /// let allowed = store.check_now(&policy, &Key::new("k"), 1);
    /// assert_eq!(Refund::of(&allowed, 1).unwrap().cost(), 1);
    /// let denied = store.check_now(&policy, &Key::new("k"), 1);
    /// assert!(Refund::of(&denied, 1).is_none());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn of(decision: &Decision, cost: u64) -> Option<Refund> {
        if !decision.is_allowed()
            || !matches!(
                decision.source(),
                DecisionSource::Store | DecisionSource::LocalFirst
            )
            || decision.limits().is_empty()
            || cost == 0
        {
            return None;
        }
        let at_us = decision
            .evaluated_at()
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_micros()).ok())?;
        Some(Refund {
            cost,
            at_us,
            token: decision.id().0,
        })
    }

    /// A refund of `cost` units committed at `at_us` (store time), applied once per `token`.
    pub(crate) fn new(cost: u64, at_us: u64, token: u64) -> Refund {
        Refund { cost, at_us, token }
    }

    /// The units to give back.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::store::{MemoryStore, Refund};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(60))?])?;
    /// let decision = MemoryStore::new().check_now(&policy, &Key::new("k"), 3);
    /// assert_eq!(Refund::of(&decision, 3).unwrap().cost(), 3);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// When the store admitted the request, on the store's clock.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::store::{MemoryStore, Refund};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(60))?])?;
    /// let decision = MemoryStore::new().check_now(&policy, &Key::new("k"), 1);
    /// let refund = Refund::of(&decision, 1).unwrap();
    /// assert_eq!(refund.evaluated_at(), decision.evaluated_at());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn evaluated_at(&self) -> SystemTime {
        UNIX_EPOCH + std::time::Duration::from_micros(self.at_us)
    }

    /// The store's time of the decision, in Unix µs.
    pub(crate) fn at_us(&self) -> u64 {
        self.at_us
    }

    /// The token a store applies at most once: the decision's, so every refund of one
    /// decision has the same.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use redlimit::store::{MemoryStore, Refund};
    /// # use redlimit::{Key, Limit, Policy};
    /// # let policy = Policy::new("p", [Limit::gcra(5, Duration::from_secs(60))?])?;
    /// # let store = MemoryStore::new();
    /// let first = store.check_now(&policy, &Key::new("k"), 1);
    /// let a = Refund::of(&first, 1).unwrap();
    /// let b = Refund::of(&store.check_now(&policy, &Key::new("k"), 1), 1).unwrap();
    /// assert_ne!(a.token(), b.token());
    /// assert_eq!(a.token(), Refund::of(&first, 1).unwrap().token());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn token(&self) -> u64 {
        self.token
    }
}

/// Gives back what one admitted request consumed: a store's optional power, reached through
/// [`Store::refunds`](super::Store::refunds). A layer with
/// [`refund_if`](crate::layer::RateLimitBuilder::refund_if) calls it after the response; its
/// builder refuses a store without it.
///
/// ```
/// # use std::time::Duration;
/// use redlimit::store::{MemoryStore, Refund, Refunds};
/// use redlimit::{Key, Limit, Policy};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryStore::new();
/// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
/// let key = Key::new("k");
/// let refund = Refund::of(&store.check_now(&policy, &key, 1), 1).unwrap();
/// assert!(!store.check_now(&policy, &key, 1).is_allowed());
/// assert!(store.refund(&policy, &key, refund).await.unwrap());
/// assert!(store.check_now(&policy, &key, 1).is_allowed());
/// # });
/// ```
pub trait Refunds: Send + Sync {
    /// Gives back what one admitted request of `key` under `policy` consumed ([`Refund`],
    /// made from the store's decision), at most once per refund: answers whether anything was
    /// given back (`false` for a refund already applied, or too late to matter: its window
    /// ended, its log entry left every span). Never takes any limit below its state before
    /// that request. A Redis store does it in one script call.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::{MemoryStore, Refund, Refunds};
    /// use redlimit::{Key, Limit, Policy};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    /// let key = Key::new("k");
    /// let decision = store.check_now(&policy, &key, 1);
    /// let refund = Refund::of(&decision, 1).unwrap();
    /// assert!(store.refund(&policy, &key, refund).await.unwrap());
    /// let again = Refund::of(&decision, 1).unwrap();
    /// assert!(!store.refund(&policy, &key, again).await.unwrap(), "once per decision");
    /// # });
    /// ```
    fn refund(&self, policy: &Policy, key: &Key, refund: Refund) -> StoreFuture<bool>;
}
