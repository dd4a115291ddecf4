//! The decision engine: what makes a decision safe, whatever asked for it. A front (the Tower
//! layer's decider, the RLS service, the client limiter) names a rule by its index, a key and
//! a cost; the engine asks the store through the deny cache, the circuit breaker of the key's
//! failure domain and the bound on calls in flight, within the deadline, and settles the
//! answer (the breaker counts it, the deny cache and the local fallback's mirror learn from
//! it), or decides without the store by the rule's failure mode ([`OnFailure`]). The front
//! turns the outcome into its own answer: an HTTP response, an RLS status, a permit.
//!
//! A rule is the engine's unit of identity on every front: its policy (or, for a keyed rule,
//! the policies its calls bring: an RLS domain), its failure mode, its deny-cache entries and
//! its share in the local fallback. A front makes one engine per generation of its rules (a
//! reload makes another: the deny cache belongs to exactly these rules) and shares what
//! outlives a reload ([`Shared`], made by [`Shared::new`] from [`Settings`]: the store, the
//! breakers, the bound on calls in flight, the local fallback's counts).
//!
//! The front door is this module: [`Shared`], [`Settings`], [`Rule`], [`Engine`] and its
//! outcomes. What is inside stays inside. Calls that wait are futures the front polls with its
//! deadline (no boxing: the layer's response future holds them), then hands back:
//! [`Engine::settle`] or [`Engine::missed_deadline`]. `begin.rs` starts a decision and
//! settles it, `fallback.rs` is the one failure path (the failure mode, lateness,
//! the local fallback), `call.rs` is the awaiting path of fronts that make several checks per
//! request (the RLS) or other calls (the limiter's reservations): the same breaker, deadline,
//! call budget and failure path.

mod begin;
mod breaker;
mod breaker_meters;
mod breakers;
mod call;
mod deadline;
mod deny_cache;
mod fallback;
mod held_lease;
mod in_flight;
mod local;
mod on_failure;
mod shared;
mod store_meter;
#[cfg(test)]
mod testing;
mod throttle;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

pub(crate) use deadline::Deadline;
pub(crate) use deny_cache::{DenyCache, Stamp};
pub(crate) use fallback::Failure;
pub(crate) use held_lease::{HeldLease, LeaseStore};
#[cfg(feature = "rls")]
pub(crate) use local::LocalShare;
pub(crate) use on_failure::OnFailure;
pub(crate) use shared::{Late, Settings, Shared};
pub(crate) use store_meter::LeaseMeter;
pub(crate) use throttle::Throttle;

use breaker::Admission;
use breakers::Breakers;
use in_flight::{CallSlot, InFlight};
use local::LocalFallback;
use store_meter::StoreMeter;

use crate::decision::Decision;
use crate::key::Key;
use crate::policy::Policy;
use crate::store::{CheckFuture, MemoryStore, Store};

/// How long a store call that missed the request's deadline may still answer before the
/// breaker counts it as lost (at least ten deadlines).
const LOST_AFTER: Duration = Duration::from_secs(1);

/// How many deadlines a probe of the store may take: a probe may dial a connection of its
/// own (a round trip or two more than a call on the open one), and no request waits for it.
const PROBE_DEADLINES: u32 = 2;

/// One rule as the engine knows it: the policy it checks (none for a keyed rule, whose calls
/// bring their own) and what a failing store means.
pub(crate) struct Rule {
    policy: Option<Policy>,
    on_failure: OnFailure,
    /// What the logs name it by: its policy's name, or a keyed rule's own (an RLS domain).
    name: Arc<str>,
    /// Whether the store loads the policy's check scripts ahead.
    prepare: bool,
}

impl Rule {
    /// A rule of `policy`.
    pub(crate) fn new(policy: &Policy, on_failure: impl Into<OnFailure>) -> Self {
        Rule {
            policy: Some(policy.clone()),
            on_failure: on_failure.into(),
            name: policy.name_arc(),
            prepare: true,
        }
    }

    /// The same rule, its policy's check scripts not loaded ahead: its calls are the
    /// front's own (the limiter's reservations, prepared by the limiter).
    pub(crate) fn unprepared(self) -> Self {
        Rule {
            prepare: false,
            ..self
        }
    }

    #[cfg(feature = "rls")]
    /// A keyed rule named `name`: its calls bring their policies (an RLS domain's counters).
    pub(crate) fn keyed(name: &str, on_failure: impl Into<OnFailure>) -> Self {
        Rule {
            policy: None,
            on_failure: on_failure.into(),
            name: Arc::from(name),
            prepare: false,
        }
    }
}

/// Decides by one generation of a front's rules.
pub(crate) struct Engine {
    store: Arc<dyn Store>,
    deadline: Duration,
    breakers: Arc<Breakers>,
    /// The bound on store calls in flight (none: nothing counted).
    in_flight: Option<Arc<InFlight>>,
    throttle: Arc<Throttle>,
    deny_cache: Arc<DenyCache>,
    local: LocalFallback,
    rules: Box<[Rule]>,
    meter: StoreMeter,
    late: Late,
}

/// A decision under way: its rule, key and cost, and what settling its store call needs (the
/// failure domain and breaker admission, its place among the calls in flight, its turn at the
/// deny cache's gate, when it was asked and under which store versions).
pub(crate) struct Ticket {
    pub(crate) rule: usize,
    pub(crate) key: Key,
    pub(crate) cost: u64,
    domain: u16,
    admission: Admission,
    permit: Option<CallSlot>,
    /// The turn at the deny cache's gate of this key, while its expired denial is refreshed:
    /// released once the answer is cached.
    _gate: Option<OwnedSemaphorePermit>,
    /// When the store call was made, before it was sent (a store future does nothing until
    /// polled): the deny cache counts from here. Only for calls that wait.
    asked: Option<Instant>,
    /// The store's versions when the call was made: a denial is cached under them.
    stamp: Stamp,
}

/// A decision waiting for another to refresh its key's expired denial.
pub(crate) struct Queued {
    pub(crate) rule: usize,
    pub(crate) key: Key,
    pub(crate) cost: u64,
}

/// How a decision starts.
pub(crate) enum Begin {
    /// Poll this (bounded by the deadline), then [`Engine::settle`] or
    /// [`Engine::missed_deadline`].
    Ask(CheckFuture, Ticket),
    /// Wait at the gate (at most the deadline), then [`Engine::resume`].
    Wait(Arc<tokio::sync::Semaphore>, Queued),
    /// Decided without waiting.
    Done(Settled, Ticket),
}

/// How a decision ended.
// Lives on the stack for one call; boxing the decision would allocate per request.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Settled {
    /// The store decided (`latency`: how long it took, when it was waited for): what it
    /// charged may be refunded.
    Store(Decision, Option<Duration>),
    /// Decided without the store: the deny cache, the local fallback, the failure mode.
    Decided(Decision),
    /// No decision can be made (failing closed has a decision; this is a rule unknown to the
    /// engine): the front answers as the store were unavailable.
    Unavailable,
}

impl Engine {
    /// The engine of `rules` (a rule's index is its id), with `shared`'s store, breakers and
    /// fallback state.
    pub(crate) fn new(shared: &Shared, rules: impl IntoIterator<Item = Rule>) -> Self {
        let rules: Box<[Rule]> = rules
            .into_iter()
            .inspect(|rule| {
                if let (Some(policy), true) = (&rule.policy, rule.prepare) {
                    shared.store.prepare(policy);
                }
            })
            .collect();
        let local = LocalFallback::new(
            shared.local_store.clone(),
            rules.iter().map(|r| (r.policy.as_ref(), r.on_failure)),
            shared.late,
        );
        Engine {
            store: Arc::clone(&shared.store),
            deadline: shared.deadline,
            breakers: Arc::clone(&shared.breakers),
            in_flight: shared.in_flight.clone(),
            throttle: Arc::clone(&shared.throttle),
            deny_cache: Arc::new(DenyCache::new(shared.deny_cache)),
            local,
            rules,
            meter: StoreMeter::new(shared.store.kind()),
            late: shared.late,
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// How long a decision may wait for the store.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The policy of rule `rule` (none for a keyed rule).
    pub(crate) fn policy(&self, rule: usize) -> Option<&Policy> {
        self.rules.get(rule)?.policy.as_ref()
    }

    /// The local fallback's store and rule `rule`'s share of its policy.
    pub(crate) fn local(&self, rule: usize) -> Option<(&MemoryStore, &Policy)> {
        self.local.get(rule)
    }

    /// The local fallback's store and the policy that mirrors rule `rule`'s admissions in it.
    pub(crate) fn mirror_target(&self, rule: usize) -> Option<(&MemoryStore, &Policy)> {
        self.local.mirror_target(rule)
    }

    /// The deny cache, for what outlives a decision: a refund made after the response lifts
    /// the key's cached denial (what it gave back may let the next request through).
    pub(crate) fn denials(&self) -> &Arc<DenyCache> {
        &self.deny_cache
    }

    /// How long a call past its deadline may still answer: [`LOST_AFTER`], at least ten
    /// deadlines.
    pub(crate) fn lost_after(&self) -> Duration {
        LOST_AFTER.max(10 * self.deadline)
    }

    /// Drops the cached denials of `key` under the rules of the policy named `policy` (its
    /// override changed: they may no longer stand).
    pub(crate) fn forget_denials(&self, policy: &str, key: &Key) {
        for (id, rule) in self.rules.iter().enumerate() {
            if rule.policy.as_ref().is_some_and(|p| p.name() == policy) {
                self.deny_cache.remove(id, key);
            }
        }
    }

    /// Forgets what the engine remembers of `key` under the policy named `policy`: the deny
    /// cache's denials and the local fallback's state, after the store's state was reset. A
    /// key with limit keys had shared levels reset too: every denial of the rule goes.
    pub(crate) fn forget(&self, policy: &str, key: &Key) {
        for (id, rule) in self.rules.iter().enumerate() {
            if rule.policy.as_ref().is_some_and(|p| p.name() == policy) {
                if key.has_limit_keys() {
                    self.deny_cache.remove_rule(id);
                } else {
                    self.deny_cache.remove(id, key);
                }
                if let Some((store, scaled)) = self.local.get(id) {
                    store.reset_now(scaled, key);
                }
            }
        }
    }
}

impl Ticket {
    /// A decision made without a store call.
    fn unasked(rule: usize, key: Key, cost: u64) -> Self {
        Ticket {
            rule,
            key,
            cost,
            domain: 0,
            admission: Admission::Call,
            permit: None,
            _gate: None,
            asked: None,
            stamp: Stamp::default(),
        }
    }
}
