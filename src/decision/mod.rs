//! The outcome of one check: allowed or not, and what each limit says about it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smallvec::SmallVec;

use crate::error::StoreError;
use crate::identity::DecisionId;
use crate::key::Key;
use crate::lease::Lease;

use crate::policy::Policy;

mod limit_state;
mod source;
mod spare;

pub use limit_state::LimitState;
pub use source::DecisionSource;

/// Per-limit states, inline for the common one- and two-limit policies.
pub(crate) type LimitStates = SmallVec<[LimitState; 2]>;

/// The outcome of checking one key against one policy.
///
/// The layer puts it in the request's extensions (and in the extensions of the rejections it
/// answers with, so an outer layer can see why), so a handler can read it:
///
/// ```
/// use redlimit::Decision;
///
/// async fn handler(decision: Option<Decision>) -> String {
///     match decision {
///         Some(d) => match d.remaining() {
///             Some(n) => format!("{n} left"),
///             None => "not limited right now (store unavailable)".into(),
///         },
///         None => "not limited".into(),
///     }
/// }
/// ```
// Shared, not inline: a decision moves from the store through the layer into the request's
// extensions, and a handler's extractor clones it; a pointer moves and clones for nothing, where
// the few hundred bytes of its limit states were copied at every step.
#[derive(Clone, PartialEq, Eq)]
pub struct Decision(Arc<Inner>);

/// What a [`Decision`] says.
#[derive(Clone, PartialEq, Eq)]
struct Inner {
    policy: Arc<str>,
    allowed: bool,
    /// When it was evaluated since the Unix epoch (zero before it): what the headers' reset
    /// second counts from.
    unix: Duration,
    /// When it was evaluated, if before the Unix epoch (never on a store's clock; zero
    /// `unix`); else it is `UNIX_EPOCH + unix`, a sum made only when asked for, not per
    /// decision.
    before_epoch: Option<SystemTime>,
    limits: LimitStates,
    governing: Option<usize>,
    source: DecisionSource,
    denied_key: Option<Key>,
    penalized: bool,
    id: DecisionId,
    lease: Option<Lease>,
}

impl Decision {
    /// Combines the states of every limit of `policy`, in the policy's order, evaluated at
    /// `evaluated_at` on the store's clock: for a [`Store`](crate::store::Store) of your own.
    ///
    /// The decision allows the request iff every state does. A store must commit the request's
    /// cost to every limit when (and only when) all allow it. Refused with
    /// [`StoreError::UnexpectedReply`] when the states do not match the policy's limits one to
    /// one, or report more remaining units than a limit's count.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use redlimit::{Decision, Limit, LimitState, Policy};
    ///
    /// let limit = Limit::fixed_window(5, Duration::from_secs(60))?;
    /// let policy = Policy::new("p", [limit])?;
    /// let state = LimitState::allowed(limit, 4, Duration::from_secs(60));
    /// let decision = Decision::new(&policy, SystemTime::now(), [state]).unwrap();
    /// assert!(decision.is_allowed());
    /// assert_eq!(decision.remaining(), Some(4));
    /// assert!(Decision::new(&policy, SystemTime::now(), []).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(
        policy: &Policy,
        evaluated_at: SystemTime,
        states: impl IntoIterator<Item = LimitState>,
    ) -> Result<Self, StoreError> {
        let states: LimitStates = states.into_iter().take(policy.limits().len() + 1).collect();
        if states.len() != policy.limits().len() {
            return Err(StoreError::UnexpectedReply(format!(
                "{} limit states for the {} limits of policy `{}`",
                states.len(),
                policy.limits().len(),
                policy.name()
            )));
        }
        for (state, limit) in states.iter().zip(policy.limits()) {
            if state.limit != *limit || state.remaining > limit.count() {
                return Err(StoreError::UnexpectedReply(format!(
                    "state {state:?} does not fit limit `{limit}` of policy `{}`",
                    policy.name()
                )));
            }
        }
        let mut inner = Inner::new(policy.name_arc(), 0, states);
        inner.combine();
        (inner.unix, inner.before_epoch) = since_epoch(evaluated_at);
        Ok(Decision(Arc::new(inner)))
    }

    /// Combines per-limit states evaluated at `now_us` (Unix µs, on the store's clock).
    pub(crate) fn from_states(policy: Arc<str>, now_us: u64, limits: LimitStates) -> Self {
        let (inner, ()) = spare::filled(policy, now_us, |inner| {
            inner.limits = limits;
            inner.combine();
        });
        Decision(inner)
    }

    /// A decision evaluated at `now_us` whose states `fill` pushes, in the policy's order: they
    /// are written where the decision keeps them, not built elsewhere and copied in.
    pub(crate) fn filled<T>(
        policy: Arc<str>,
        now_us: u64,
        fill: impl FnOnce(&mut LimitStates) -> T,
    ) -> (Self, T) {
        let (inner, out) = spare::filled(policy, now_us, |inner| {
            let out = fill(&mut inner.limits);
            inner.combine();
            out
        });
        (Decision(inner), out)
    }

    /// A decision the layer makes without the store: allowed, no limit state.
    pub(crate) fn fail_open(policy: Arc<str>) -> Self {
        Decision(Arc::new(Inner::fail_open(
            policy,
            true,
            DecisionSource::FailOpen,
        )))
    }

    /// A decision the layer makes without the store when it fails closed: denied, no limit
    /// state.
    pub(crate) fn fail_closed(policy: Arc<str>) -> Self {
        Decision(Arc::new(Inner::fail_open(
            policy,
            false,
            DecisionSource::FailClosed,
        )))
    }

    /// What this decision says, to change: copied first only if it is shared (a fresh one,
    /// changed before the layer hands it on, never is).
    fn edit(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.0)
    }
    /// The same decision `elapsed` later, as nothing but time changed it: every wait shorter
    /// by `elapsed` (never below zero), evaluated `elapsed` later.
    pub(crate) fn aged(&self, elapsed: Duration) -> Decision {
        let mut aged = self.clone();
        let inner = aged.edit();
        inner.before_epoch = inner.before_epoch.map(|at| at + elapsed);
        inner.unix = inner.unix.saturating_add(elapsed);
        for state in inner.limits.iter_mut() {
            state.reset_after = state.reset_after.saturating_sub(elapsed);
            state.retry_after = state.retry_after.map(|r| r.saturating_sub(elapsed));
        }
        aged
    }

    /// The same decision, marked as coming from `source`.
    pub(crate) fn with_source(mut self, source: DecisionSource) -> Self {
        self.edit().source = source;
        self
    }

    /// The same decision, denied because the key is in its policy's penalty box.
    pub(crate) fn penalized(mut self) -> Self {
        let inner = self.edit();
        inner.penalized = !inner.allowed;
        self
    }

    /// The same decision holding `lease`: the slot of the policy's concurrency limit that the
    /// store took for this request, which the layer gives back
    /// ([`Store::release`](crate::store::Store::release)) when the response ends. For a
    /// [`Store`](crate::store::Store) of your own that supports concurrency limits.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use redlimit::{Decision, Lease, Limit, LimitState, Policy};
    /// let limit = Limit::concurrency(4, Duration::from_secs(60))?;
    /// let policy = Policy::new("p", [limit])?;
    /// let state = LimitState::allowed(limit, 3, Duration::from_secs(60));
    /// let decision = Decision::new(&policy, SystemTime::now(), [state]).unwrap();
    /// assert_eq!(decision.with_lease(Lease::new(9)).lease(), Some(Lease::new(9)));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    #[must_use]
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.edit().lease = Some(lease);
        self
    }

    /// The slot this request holds under the policy's concurrency limit, if it has one and
    /// the request was admitted with a cost above 0. The layer releases it; a handler only
    /// reads it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let store = MemoryStore::new();
    /// let policy = Policy::new("p", [Limit::concurrency(1, Duration::from_secs(30))?])?;
    /// let first = store.check_now(&policy, &Key::new("k"), 1);
    /// assert!(first.lease().is_some());
    /// assert!(!store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn lease(&self) -> Option<Lease> {
        self.0.lease
    }

    /// Whether the key is in its policy's penalty box ([`Policy::penalty`](crate::Policy::penalty)):
    /// this denial either put it there or found it there, and
    /// [`retry_after`](Decision::retry_after) is at least the time left in the box.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Key, Limit, Policy};
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?
    ///     .penalty(Duration::from_secs(60))?;
    /// let store = MemoryStore::new();
    /// assert!(store.check_now(&policy, &Key::new("k"), 1).is_allowed());
    /// let denied = store.check_now(&policy, &Key::new("k"), 1);
    /// assert!(denied.is_penalized());
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn is_penalized(&self) -> bool {
        self.0.penalized
    }

    /// The decision's identity, for refunds.
    pub(crate) fn id(&self) -> DecisionId {
        self.0.id
    }

    /// Whether the request may proceed.
    pub fn is_allowed(&self) -> bool {
        self.0.allowed
    }

    /// The name of the policy that decided.
    pub fn policy(&self) -> &str {
        &self.0.policy
    }

    /// The name of the policy that decided, shared.
    #[cfg(feature = "rls")]
    pub(crate) fn policy_arc(&self) -> Arc<str> {
        Arc::clone(&self.0.policy)
    }

    /// Where the decision came from (the store, or the failure policy).
    pub fn source(&self) -> DecisionSource {
        self.0.source
    }

    /// Every limit's state, in the policy's order. Empty when the store was not consulted.
    pub fn limits(&self) -> &[LimitState] {
        &self.0.limits
    }

    /// The index of the limit that denied (the longest wait among the denying ones), or `None`
    /// when allowed.
    pub fn denied_by(&self) -> Option<usize> {
        if self.0.allowed {
            None
        } else {
            self.0.governing
        }
    }

    /// The key the denying limit counts under (its own, [`Key::with_limit_key`], or the
    /// request's), when the layer decided a request: with a hierarchical policy, whether the
    /// client, its tenant or everyone ran out. `None` when allowed, and for a decision a store
    /// returned straight to you.
    ///
    /// ```
    /// use redlimit::Decision;
    ///
    /// async fn handler(decision: Option<Decision>) -> String {
    ///     match decision.as_ref().and_then(Decision::denied_key) {
    ///         Some(key) => format!("out of quota: {key}"),
    ///         None => "ok".into(),
    ///     }
    /// }
    /// ```
    pub fn denied_key(&self) -> Option<&Key> {
        self.0.denied_key.as_ref()
    }

    /// Names the key of its denying limit (`key`'s, for a position).
    #[inline]
    pub(crate) fn name_denied_key(&mut self, key: &Key) {
        if let Some(position) = self.denied_by() {
            self.edit().denied_key = Some(key.limit_key(position).clone());
        }
    }

    /// The limit the headers report: the denying one, or else the one with the fewest units
    /// remaining.
    pub fn governing(&self) -> Option<&LimitState> {
        self.0.governing.map(|i| &self.0.limits[i])
    }

    /// `N` of the governing limit; `None` when the store was not consulted (fail open).
    pub fn limit(&self) -> Option<u64> {
        self.governing().map(|s| s.limit.count())
    }

    /// Units remaining on the governing limit; `None` when the store was not consulted.
    pub fn remaining(&self) -> Option<u64> {
        self.governing().map(|s| s.remaining)
    }

    /// When the governing limit is fully free again; `None` when the store was not consulted.
    pub fn reset_at(&self) -> Option<SystemTime> {
        self.governing()
            .map(|s| self.evaluated_at() + s.reset_after)
    }

    /// [`reset_at`](Decision::reset_at) in whole Unix seconds, rounded up (a decision
    /// evaluated before the epoch counts from it): what `X-RateLimit-Reset` says.
    pub(crate) fn reset_unix_secs(&self) -> Option<u64> {
        self.governing().map(|s| {
            let at = self.0.unix.saturating_add(s.reset_after);
            at.as_secs() + u64::from(at.subsec_nanos() > 0)
        })
    }

    /// When the store evaluated the request, on the store's clock (Redis `TIME`).
    pub fn evaluated_at(&self) -> SystemTime {
        (self.0.before_epoch).unwrap_or_else(|| UNIX_EPOCH + self.0.unix)
    }

    /// How long until this request would be allowed: the longest wait among the denying
    /// limits. `None` when allowed, and when the cost exceeds what some limit could ever admit.
    #[inline]
    pub fn retry_after(&self) -> Option<Duration> {
        if self.0.allowed || self.exceeds_capacity() {
            return None;
        }
        self.0
            .limits
            .iter()
            .filter_map(LimitState::retry_after)
            .max()
    }

    /// Whether the request's cost exceeds what some limit could ever admit: retrying is futile.
    pub fn exceeds_capacity(&self) -> bool {
        self.0.limits.iter().any(LimitState::exceeds_capacity)
    }
}

/// `at` since the Unix epoch, and `at` itself if it is before (zero since then).
fn since_epoch(at: SystemTime) -> (Duration, Option<SystemTime>) {
    match at.duration_since(UNIX_EPOCH) {
        Ok(since) => (since, None),
        Err(_) => (Duration::ZERO, Some(at)),
    }
}

impl Inner {
    /// Whether every limit allows, and which limit governs.
    #[inline(always)]
    fn combine(&mut self) {
        let limits = &self.limits;
        // One limit (most policies): it decides and governs alone.
        if let [only] = limits.as_slice() {
            self.allowed = only.is_allowed();
            self.governing = Some(0);
            return;
        }
        self.allowed = limits.iter().all(LimitState::is_allowed);
        self.governing = if self.allowed {
            // Most restrictive: fewest remaining, then the longest wait until fully free.
            (0..limits.len()).min_by_key(|&i| {
                (
                    limits[i].remaining,
                    std::cmp::Reverse(limits[i].reset_after),
                )
            })
        } else {
            // The denial names the limit the client must wait for longest; one that can never
            // admit the cost wins over any finite wait.
            (0..limits.len())
                .filter(|&i| !limits[i].allowed)
                .max_by_key(|&i| (limits[i].never, limits[i].retry_after))
        };
    }

    fn fail_open(policy: Arc<str>, allowed: bool, source: DecisionSource) -> Self {
        let (unix, before_epoch) = since_epoch(SystemTime::now());
        Inner {
            policy,
            allowed,
            unix,
            before_epoch,
            limits: LimitStates::new(),
            governing: None,
            source,
            denied_key: None,
            penalized: false,
            id: DecisionId(0),
            lease: None,
        }
    }
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &*self.0;
        f.debug_struct("Decision")
            .field("policy", &inner.policy)
            .field("allowed", &inner.allowed)
            .field("now", &self.evaluated_at())
            .field("limits", &inner.limits)
            .field("governing", &inner.governing)
            .field("source", &inner.source)
            .field("denied_key", &inner.denied_key)
            .field("penalized", &inner.penalized)
            .field("id", &inner.id)
            .field("lease", &inner.lease)
            .finish()
    }
}
