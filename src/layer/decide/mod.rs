//! The per-request logic: which rule applies, the key and cost, the deny cache, the breaker,
//! and the store call ([`Decider::start`], [`Decider::resume`], `ask`); then a request without a
//! key (`missing.rs`), the store's answer (`settle.rs`), decisions without the store
//! (`fallback.rs`) and the layer's own responses (`respond.rs`).

mod fallback;
mod missing;
mod respond;
mod settle;
#[cfg(test)]
mod testing;

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::{Key, KeyExtractor};
use crate::layer::breaker::{Admission, Outcome};
use crate::layer::config::Config;
use crate::layer::deny_cache::{DenyCache, Lookup, Stamp};
use crate::layer::grpc::Framing;
use crate::layer::headers::RateHeaders;
use crate::layer::held_lease::HeldLease;
use crate::layer::in_flight::Permit;
use crate::layer::local::LocalFallback;
use crate::layer::meters::Meters;
use crate::layer::refund::PendingRefund;
use crate::layer::settings::Shadow;
use crate::layer::throttle::Throttle;
use crate::policy::Policy;
use crate::store::{Check, CheckFuture, Store};

/// How long a store call that missed the request's deadline may still answer before the
/// breaker counts it as lost (at least ten deadlines).
const LOST_AFTER: Duration = Duration::from_secs(1);

/// How many deadlines a probe of the store may take: a probe may dial a connection of its
/// own (a round trip or two more than a call on the open one), and no request waits for it.
const PROBE_DEADLINES: u32 = 2;

/// Decides requests by a layer's settings, with the state derived from them once.
pub(crate) struct Decider {
    pub(crate) config: Arc<Config>,
    local: LocalFallback,
    deny_cache: DenyCache,
    meters: Meters,
    /// Each rule's mode, by rule id: its own, else the layer's.
    shadow: Box<[Shadow]>,
    /// The logs of requests without a key, throttled apart from the store's: a dead store
    /// must not hide a misconfigured server.
    keyless_log: Throttle,
}

/// What a store call needs to be settled: its rule, failure domain and breaker admission,
/// whether it is a gRPC call, for a local fallback the key and cost, and its place among the
/// calls in flight.
pub(crate) struct Pending {
    rule: usize,
    domain: u16,
    admission: Admission,
    grpc: Option<Framing>,
    key: Key,
    cost: u64,
    permit: Option<Permit>,
    /// The turn at the deny cache's gate of this key, while its expired denial is refreshed:
    /// released once the answer is cached.
    _gate: Option<OwnedSemaphorePermit>,
    /// When the store call was made, before it was sent (a store future does nothing until
    /// polled): the deny cache counts from here. Only for calls that wait.
    asked: Option<Instant>,
    /// The store's versions when the call was made: a denial is cached under them.
    stamp: Stamp,
}

/// A request waiting for another to refresh its key's expired denial.
pub(crate) struct Queued {
    rule: usize,
    grpc: Option<Framing>,
    key: Key,
    cost: u64,
}

/// How a request starts.
pub(crate) enum Start {
    /// Ask the store.
    Check(CheckFuture, Pending),
    /// Wait at the gate (at most the deadline), then [`Decider::resume`].
    Wait(Arc<Semaphore>, Queued),
    /// Decided without waiting.
    Decided(Verdict),
    /// Call the inner service without limiting it.
    Unlimited,
}

/// What to do with the request.
pub(crate) enum Verdict {
    /// Call the inner service, with the decision in the request's extensions and these
    /// headers for its response; the refund to send if the response asks for it, and the
    /// request's concurrency lease (if any), held until its response body ends or is dropped
    /// (boxed: only requests that refund or hold a lease pay for their size).
    Proceed(
        Decision,
        RateHeaders,
        Option<Box<PendingRefund>>,
        Option<Box<HeldLease>>,
    ),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Decider {
    /// Derives what the settings imply: the local fallback's store and scaled policies.
    pub(crate) fn new(config: Arc<Config>) -> Self {
        for rule in config.rules() {
            config.store.prepare(&rule.policy);
        }
        let local = LocalFallback::of(&config);
        let deny_cache = DenyCache::new(config.deny_cache);
        let meters = Meters::new(config.store.kind(), config.rules().map(|r| &r.policy));
        let shadow = config
            .rules()
            .map(|rule| rule.shadow.unwrap_or(config.shadow))
            .collect();
        Decider {
            config,
            local,
            deny_cache,
            meters,
            shadow,
            keyless_log: Throttle::default(),
        }
    }

    fn shadow(&self, rule: usize) -> Shadow {
        self.shadow.get(rule).copied().unwrap_or_default()
    }

    /// Drops this layer's cached denials of `key` under the policy named `policy` (its
    /// override changed: they may no longer stand).
    pub(crate) fn forget_denials(&self, policy: &str, key: &Key) {
        for (id, rule) in self.config.rules().enumerate() {
            if rule.policy.name() == policy {
                self.deny_cache.remove(id, key);
            }
        }
    }

    /// Forgets what this layer remembers of `key` under the policy named `policy`: the deny
    /// cache's denials and the local fallback's state, after the store's state was reset. A
    /// key with limit keys had shared levels reset too: every denial of the rule goes.
    pub(crate) fn forget(&self, policy: &str, key: &Key) {
        for (id, rule) in self.config.rules().enumerate() {
            if rule.policy.name() == policy {
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

    pub(crate) fn start(&self, parts: &Parts) -> Start {
        let config = &*self.config;
        if config.allow.iter().any(|allowed| allowed(parts)) {
            return Start::Unlimited;
        }
        let Some((rule_id, rule)) = config.rule_for(parts) else {
            return Start::Unlimited;
        };
        let grpc = Framing::of(parts);
        let key = match rule.key.extract(parts) {
            Some(key) => key,
            None => match self.keyless(rule_id, rule, parts, grpc) {
                Ok(key) => key,
                Err(start) => return start,
            },
        };
        let cost = config.cost.as_ref().map_or(1, |cost| cost(parts));
        let store = self.config.store.as_ref();
        let gate = match self
            .deny_cache
            .lookup(rule_id, &key, cost, false, |cached| {
                still_stands(store, &rule.policy, &key, cached)
            }) {
            Lookup::Miss => None,
            Lookup::Hit(denial) => {
                return Start::Decided(self.decided(rule_id, &key, denial, grpc, None));
            }
            Lookup::Refresh(turn) => Some(turn),
            Lookup::Wait(gate) => {
                let queued = Queued {
                    rule: rule_id,
                    grpc,
                    key,
                    cost,
                };
                return Start::Wait(gate, queued);
            }
        };
        self.ask(rule_id, &rule.policy, grpc, key, cost, gate)
    }

    /// After waiting at the gate: with `turn`, or without it if the deadline passed first.
    pub(crate) fn resume(&self, queued: Queued, turn: Option<OwnedSemaphorePermit>) -> Start {
        let Queued {
            rule,
            grpc,
            key,
            cost,
        } = queued;
        // The id comes from this decider's own (immutable) rules: always there.
        let Some(policy) = self.config.rule(rule).map(|r| &r.policy) else {
            return Start::Decided(Verdict::Respond(self.unavailable(grpc)));
        };
        let store = self.config.store.as_ref();
        if let Lookup::Hit(denial) = self.deny_cache.lookup(rule, &key, cost, true, |cached| {
            still_stands(store, policy, &key, cached)
        }) {
            return Start::Decided(self.decided(rule, &key, denial, grpc, None));
        }
        self.ask(rule, policy, grpc, key, cost, turn)
    }

    /// Asks the store (through the breaker and the bound on calls in flight).
    fn ask(
        &self,
        rule_id: usize,
        policy: &Policy,
        grpc: Option<Framing>,
        key: Key,
        cost: u64,
        gate: Option<OwnedSemaphorePermit>,
    ) -> Start {
        let config = &*self.config;
        let domain = config.store.failure_domain(policy, &key);
        let admission = config.breakers.admit(domain, config.deadline);
        let mut pending = Pending {
            rule: rule_id,
            domain,
            admission,
            grpc,
            key,
            cost,
            permit: None,
            _gate: gate,
            asked: None,
            stamp: stamp(self.config.store.as_ref()),
        };
        if admission == Admission::Skip || (admission == Admission::Probe && self.probe(domain)) {
            return Start::Decided(self.store_failed(&StoreError::CircuitOpen, &pending));
        }
        match config.store.check(policy, &pending.key, cost) {
            // An answer without I/O cannot hang: the breaker only watches calls that wait,
            // unless this one was its probe.
            Check::Ready(outcome) => {
                if admission == Admission::Probe {
                    self.record(&pending, &outcome);
                }
                Start::Decided(self.settle(outcome, &pending, None))
            }
            waiting => match config.in_flight.try_acquire() {
                Some(permit) => {
                    pending.permit = Some(permit);
                    pending.asked = Some(Instant::now());
                    Start::Check(waiting.into_future(), pending)
                }
                // The call is dropped unsent (a store future does nothing until polled).
                None => {
                    config.breakers.abandon(domain, admission);
                    crate::telemetry::store_failure(self.meters.store(), "overload");
                    Start::Decided(self.in_memory(
                        &pending,
                        "too many rate-limit store calls in flight; deciding in memory",
                    ))
                }
            },
        }
    }

    /// Probes the store behind `domain` in the background, for its open breaker, if the store
    /// can be probed (and a runtime runs): the request that drew the probe is then decided as
    /// while the breaker is open, and no request waits for a store that may still be gone.
    fn probe(&self, domain: u16) -> bool {
        let config = &*self.config;
        let (Some(probe), Ok(runtime)) = (
            config.store.probe(domain),
            tokio::runtime::Handle::try_current(),
        ) else {
            return false;
        };
        let breakers = Arc::clone(&config.breakers);
        let within = PROBE_DEADLINES * config.deadline;
        runtime.spawn(async move {
            let outcome = match tokio::time::timeout(within, probe).await {
                Ok(Ok(())) => Outcome::Success,
                Ok(Err(_)) => Outcome::Failure,
                Err(_) => Outcome::Timeout,
            };
            breakers.record(domain, Admission::Probe, outcome);
        });
        true
    }
}

/// The store's versions now.
fn stamp(store: &dyn Store) -> Stamp {
    Stamp {
        overrides: crate::store::overrides_version(store),
        resets: crate::store::resets_version(store),
    }
}

/// The store's versions now, if a denial of `key` under `policy` cached under `cached` still
/// stands: no override changed since, and the key was not reset.
fn still_stands(store: &dyn Store, policy: &Policy, key: &Key, cached: Stamp) -> Option<Stamp> {
    let now = stamp(store);
    if now.overrides != cached.overrides {
        return None;
    }
    let reset = now.resets != cached.resets
        && store
            .admin()
            .is_none_or(|admin| admin.reset_since(policy, key, cached.resets));
    (!reset).then_some(now)
}

#[cfg(test)]
mod tests {
    use http::request::Parts;

    use super::Start;
    use super::testing::{decider, keyed, name, parts, policy, proceeds, with_key};
    use crate::key::Header;
    use crate::layer::{RateLimitLayer, Rule};
    use crate::store::MemoryStore;

    #[test]
    fn the_first_matching_rule_decides_then_the_layers_own_policy() {
        let api_key = || Header::new("x-api-key").unwrap();
        let d = decider(
            RateLimitLayer::builder(MemoryStore::new(), policy("api", 5))
                .key(api_key())
                .rule(
                    Rule::new("POST /login", policy("login", 1))
                        .unwrap()
                        .key(api_key()),
                )
                .rule(Rule::new("/v1/*", policy("v1", 1)).unwrap().key(api_key())),
        );
        let of = |method, path| {
            let start = d.start(&parts(method, path, &[("x-api-key", "k")]));
            proceeds(start).policy().to_owned()
        };
        assert_eq!(of("POST", "/login"), "login");
        assert_eq!(of("GET", "/login"), "api");
        assert_eq!(of("GET", "/v1/users"), "v1");
        assert_eq!(of("GET", "/other"), "api");
    }

    #[test]
    fn a_per_route_layer_leaves_unmatched_requests_unlimited() {
        let rule = Rule::new("POST /login", policy("login", 1)).unwrap();
        let d = decider(
            RateLimitLayer::builder_per_route(MemoryStore::new())
                .rule(rule.key(Header::new("x-api-key").unwrap())),
        );
        let start = d.start(&parts("GET", "/", &[("x-api-key", "k")]));
        assert!(matches!(start, Start::Unlimited), "{}", name(&start));
    }

    #[test]
    fn allow_rules_skip_limiting() {
        let d = decider(
            keyed(MemoryStore::new(), policy("p", 1))
                .allow_if(|parts: &Parts| parts.uri.path() == "/healthz"),
        );
        for _ in 0..3 {
            let start = d.start(&parts("GET", "/healthz", &[("x-api-key", "k")]));
            assert!(matches!(start, Start::Unlimited), "{}", name(&start));
        }
    }

    #[test]
    fn the_cost_is_charged() {
        let d = decider(keyed(MemoryStore::new(), policy("p", 5)).cost(|_: &Parts| 2));
        assert_eq!(proceeds(d.start(&with_key("k"))).remaining(), Some(3));
    }
}
