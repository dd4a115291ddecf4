//! The per-request logic: which rule applies, the key and cost, the breaker, the store's answer
//! (or its failure), and what to do with the request.

use std::future::IntoFuture;
use std::sync::Arc;

use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use crate::decision::{Decision, DecisionSource};
use crate::error::{Chain, StoreError};
use crate::key::{Key, KeyExtractor, PeerIp};
use crate::layer::breaker::{Admission, Outcome};
use crate::layer::config::Config;
use crate::layer::deny_cache::{DenyCache, Lookup};
use crate::layer::grpc;
use crate::layer::headers::RateHeaders;
use crate::layer::held_lease::{HeldLease, LeaseStore};
use crate::layer::in_flight::Permit;
use crate::layer::local::LocalFallback;
use crate::layer::meters::Meters;
use crate::layer::refund::PendingRefund;
use crate::layer::settings::MissingKey;
use crate::layer::settings::OnStoreError;
use crate::layer::settings::Shadow;
use crate::lease::Lease;
use crate::policy::Policy;
use crate::store::{Check, CheckFuture};

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
}

/// What a store call needs to be settled: its rule, failure domain and breaker admission,
/// whether it is a gRPC call, for a local fallback the key and cost, and its place among the
/// calls in flight.
pub(crate) struct Pending {
    rule: usize,
    domain: u16,
    admission: Admission,
    grpc: bool,
    key: Key,
    cost: u64,
    permit: Option<Permit>,
    /// The turn at the deny cache's gate of this key, while its expired denial is refreshed:
    /// released once the answer is cached.
    _gate: Option<OwnedSemaphorePermit>,
    /// When the store call was made, before it was sent (a store future does nothing until
    /// polled): the deny cache counts from here. Only for calls that wait.
    asked: Option<Instant>,
    /// The store's overrides version when the call was made: a denial is cached under it.
    overrides: u64,
}

/// A request waiting for another to refresh its key's expired denial.
pub(crate) struct Queued {
    rule: usize,
    grpc: bool,
    key: Key,
    cost: u64,
}

/// How a request starts.
// Lives on the stack for one call; boxing the large variant would allocate per request.
#[allow(clippy::large_enum_variant)]
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
// Lives on the stack for one call; boxing the decision would allocate per request.
#[allow(clippy::large_enum_variant)]
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
        let grpc = grpc::is_grpc(parts);
        let key = match rule.key.extract(parts) {
            Some(key) => key,
            None => match config.missing_key {
                MissingKey::PeerIp => match PeerIp.extract(parts) {
                    Some(key) => key,
                    None => {
                        self.log_unlimited(
                            rule.policy.name(),
                            "no key and no peer address (serve with connect info)",
                        );
                        return Start::Unlimited;
                    }
                },
                MissingKey::Allow => return Start::Unlimited,
                // Shadow mode denies nothing, not even a request without a key.
                MissingKey::Reject(_) if self.shadow(rule_id).is_on() => return Start::Unlimited,
                MissingKey::Reject(status) => {
                    let response = if grpc {
                        grpc::status(grpc::code_for(status), "missing rate-limit key", None)
                    } else {
                        text(status, "missing rate-limit key\n")
                    };
                    return Start::Decided(Verdict::Respond(response));
                }
            },
        };
        let cost = config.cost.as_ref().map_or(1, |cost| cost(parts));
        let store = &self.config.store;
        let gate = match self
            .deny_cache
            .lookup(rule_id, &key, cost, false, || store.overrides_version())
        {
            Lookup::Miss => None,
            Lookup::Hit(denial) => {
                return Start::Decided(self.decided(rule_id, &key, denial, grpc, None))
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
        let store = &self.config.store;
        if let Lookup::Hit(denial) = self
            .deny_cache
            .lookup(rule, &key, cost, true, || store.overrides_version())
        {
            return Start::Decided(self.decided(rule, &key, denial, grpc, None));
        }
        // The id comes from this decider's own (immutable) rules: always there.
        let Some(policy) = self.config.rule(rule).map(|r| &r.policy) else {
            return Start::Decided(Verdict::Respond(self.unavailable(grpc)));
        };
        self.ask(rule, policy, grpc, key, cost, turn)
    }

    /// Asks the store (through the breaker and the bound on calls in flight).
    fn ask(
        &self,
        rule_id: usize,
        policy: &Policy,
        grpc: bool,
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
            overrides: self.config.store.overrides_version(),
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

    /// A call of `pending`'s domain missed its deadline: if nothing in the domain answered
    /// since it was asked, finds out (with a probe past the calls in flight, where the store
    /// offers one) whether the store is gone, and if so opens the domain's breaker at once,
    /// so that the requests after this one are decided at memory speed at any request rate.
    fn confirm_silence(&self, pending: &Pending) {
        let config = &*self.config;
        let Some(asked) = pending.asked else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !config.breakers.start_confirming(pending.domain, asked) {
            return;
        }
        let (breakers, domain) = (Arc::clone(&config.breakers), pending.domain);
        let probe = config.store.probe(domain);
        let within = PROBE_DEADLINES * config.deadline;
        runtime.spawn(async move {
            let gone = match probe {
                Some(probe) => !matches!(tokio::time::timeout(within, probe).await, Ok(Ok(()))),
                None => true,
            };
            breakers.confirmed(domain, asked, gone);
        });
    }

    /// Settles a store call that waited: the breaker counts it, then its decision or the
    /// failure mode's.
    pub(crate) fn verdict(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
    ) -> Verdict {
        self.record(pending, &outcome);
        let latency = pending.asked.map(|asked| asked.elapsed());
        if let Some(latency) = latency {
            self.meters.store_latency(latency);
        }
        if let (Ok(decision), Some(asked)) = (&outcome, pending.asked) {
            self.deny_cache.insert(
                pending.rule,
                &pending.key,
                pending.cost,
                (asked, pending.overrides),
                decision,
            );
        }
        self.settle(outcome, pending, latency)
    }

    /// The store did not answer within the deadline. That alone does not show it failed: a
    /// flood that queues calls (here or in the store) looks the same for a while, and failing
    /// open on it would hand an attacker an unlimited window. So the request is decided in
    /// memory, and the call is left to finish in the background (holding its place among the
    /// calls in flight) for the breaker to learn whether the store answered late (alive,
    /// busy) or not within [`LOST_AFTER`] (gone).
    pub(crate) fn missed_deadline(&self, check: CheckFuture, pending: &mut Pending) -> Verdict {
        let breakers = Arc::clone(&self.config.breakers);
        let (domain, admission, permit) =
            (pending.domain, pending.admission, pending.permit.take());
        let lost_after = LOST_AFTER.max(10 * self.config.deadline);
        let (latency, asked) = (self.meters.latency_handle(), pending.asked);
        // A late admission may have taken a concurrency lease that no response will hold:
        // given back at once (through a `HeldLease` dropped as soon as it is made).
        let lease_of = self.config.rule(pending.rule).map(|rule| {
            (
                Arc::clone(&self.config.store),
                rule.policy.clone(),
                pending.key.clone(),
            )
        });
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let outcome = tokio::time::timeout(lost_after, check).await;
                    breakers.record(domain, admission, outcome_of(outcome.as_ref().ok()));
                    if let (Ok(_), Some(asked)) = (&outcome, asked) {
                        latency.record(asked.elapsed());
                    }
                    if let (Ok(Ok(decision)), Some((store, policy, key))) = (&outcome, lease_of) {
                        if let Some(lease) = decision.lease() {
                            drop(HeldLease::new(
                                LeaseStore::Shared(store),
                                policy,
                                key,
                                lease,
                            ));
                        }
                    }
                    drop(permit);
                });
            }
            Err(_) => breakers.record(domain, admission, Outcome::Timeout),
        }
        self.confirm_silence(pending);
        crate::telemetry::store_failure(self.meters.store(), "deadline");
        self.in_memory(
            pending,
            "rate-limit store missed the deadline; deciding in memory",
        )
    }

    fn record(&self, pending: &Pending, outcome: &Result<Decision, StoreError>) {
        self.config
            .breakers
            .record(pending.domain, pending.admission, outcome_of(Some(outcome)));
    }

    fn settle(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
        latency: Option<Duration>,
    ) -> Verdict {
        match outcome {
            Ok(decision) => {
                if decision.is_allowed() && decision.source() == DecisionSource::Store {
                    self.local.mirror(pending.rule, &pending.key, pending.cost);
                }
                let refund = self.refund_of(&decision, pending);
                match self.decided(pending.rule, &pending.key, decision, pending.grpc, latency) {
                    Verdict::Proceed(decision, headers, _, held) => {
                        Verdict::Proceed(decision, headers, refund, held)
                    }
                    respond => respond,
                }
            }
            Err(error) => self.store_failed(&error, pending),
        }
    }

    /// What `decision` would give back after the response, if the layer refunds.
    fn refund_of(&self, decision: &Decision, pending: &Pending) -> Option<Box<PendingRefund>> {
        let config = &*self.config;
        let policy = &config.rule(pending.rule)?.policy;
        PendingRefund::of(
            config.refund.as_ref(),
            &config.store,
            policy,
            &pending.key,
            decision,
            pending.cost,
            LOST_AFTER.max(10 * config.deadline),
        )
        .map(Box::new)
    }

    /// Every decision ends here: counted, traced, then enforced (or, in shadow mode, only
    /// recorded). `latency`: how long the store took, when it was asked and waited for.
    fn decided(
        &self,
        rule: usize,
        key: &Key,
        decision: Decision,
        grpc: bool,
        latency: Option<Duration>,
    ) -> Verdict {
        let decision = decision.naming(key);
        let shadow = self.shadow(rule);
        let shadowed = shadow.is_on() && !decision.is_allowed();
        self.meters.decision(rule, &decision, shadowed);
        if tracing::enabled!(tracing::Level::DEBUG) {
            crate::telemetry::trace(key, &decision, shadowed, latency);
        }
        let style = self.config.headers;
        if decision.is_allowed() || shadowed {
            let headers = match shadow {
                Shadow::Off => RateHeaders::of(&decision, style),
                Shadow::On => RateHeaders::default(),
                _ => RateHeaders::of(&decision, style).without_retry_after(),
            };
            let held = decision
                .lease()
                .and_then(|lease| self.hold(rule, key, &decision, lease));
            return Verdict::Proceed(decision, headers, None, held);
        }
        if decision.source() == DecisionSource::FailClosed {
            let mut response = self.unavailable(grpc);
            response.extensions_mut().insert(decision);
            return Verdict::Respond(response);
        }
        Verdict::Respond(self.reject(decision, grpc))
    }

    /// The lease of an admitted request, to be given back to the store that took it.
    fn hold(
        &self,
        rule: usize,
        key: &Key,
        decision: &Decision,
        lease: Lease,
    ) -> Option<Box<HeldLease>> {
        let (store, policy) = match decision.source() {
            DecisionSource::Local => {
                let (store, scaled) = self.local.get(rule)?;
                (LeaseStore::Local(store.clone()), scaled.clone())
            }
            _ => (
                LeaseStore::Shared(Arc::clone(&self.config.store)),
                self.config.rule(rule)?.policy.clone(),
            ),
        };
        Some(Box::new(HeldLease::new(store, policy, key.clone(), lease)))
    }

    /// The denial: a gRPC status for gRPC calls (the custom rejection applies to the others),
    /// 429 otherwise; the rate-limit headers (gRPC metadata) on both, and the decision in the
    /// response's extensions for the layers outside.
    fn reject(&self, decision: Decision, grpc: bool) -> Response<Bytes> {
        let config = &*self.config;
        let mut response = match &config.rejection {
            _ if grpc => grpc::status(
                config.grpc_status.code(),
                &grpc::denial_message(&decision),
                Some(&decision),
            ),
            Some(custom) => custom(&decision),
            None if decision.exceeds_capacity() => text(
                StatusCode::TOO_MANY_REQUESTS,
                "request cost exceeds the rate limit\n",
            ),
            None => text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n"),
        };
        RateHeaders::of(&decision, config.headers).write_missing(response.headers_mut());
        response.extensions_mut().insert(decision);
        response
    }

    /// Every decision made without the store is logged: at `warn` at most once a second (the
    /// circuit breaker's transitions are logged too), at `debug` otherwise.
    fn store_failed(&self, error: &StoreError, pending: &Pending) -> Verdict {
        let config = &*self.config;
        // A reply that did not come in time may be load as well as failure: see
        // `missed_deadline`. Only errors and an open circuit say the store is gone.
        if error.is_timeout() {
            return self.in_memory(pending, "rate-limit store timed out; deciding in memory");
        }
        // The id comes from this decider's own (immutable) rules: always there.
        let Some(rule) = config.rule(pending.rule) else {
            return Verdict::Respond(self.unavailable(pending.grpc));
        };
        let policy = rule.policy.name();
        let mode = match config.on_store_error {
            OnStoreError::Open => "allowing request (fail open)",
            OnStoreError::Closed => "answering 503 (fail closed)",
            OnStoreError::Local { .. } => "deciding in memory (local fallback)",
        };
        if config.throttle.should_warn() {
            tracing::warn!(policy, error = %Chain(error), "rate-limit store failed; {mode}");
        } else {
            tracing::debug!(policy, error = %Chain(error), "rate-limit store failed; {mode}");
        }
        crate::telemetry::store_failure(
            self.meters.store(),
            crate::telemetry::failure_reason(error),
        );
        let local = self.local.get(pending.rule);
        let decision = match (config.on_store_error, local) {
            (OnStoreError::Closed, _) => Decision::fail_closed(rule.policy.name_arc()),
            (OnStoreError::Local { .. }, Some((store, scaled))) => store
                .check_now(scaled, &pending.key, pending.cost)
                .with_source(DecisionSource::Local),
            _ => Decision::fail_open(rule.policy.name_arc()),
        };
        self.decided(pending.rule, &pending.key, decision, pending.grpc, None)
    }

    /// Load, not failure: more store calls in flight than the layer allows, or a call that
    /// missed its deadline while the store answers others. Decided in memory with this
    /// instance's share of the limits, whatever the failure mode, so that load never buys an
    /// unlimited window (and never a 503: the store is busy, not gone).
    fn in_memory(&self, pending: &Pending, why: &str) -> Verdict {
        let config = &*self.config;
        let Some((store, scaled)) = self.local.get(pending.rule) else {
            return Verdict::Respond(self.unavailable(pending.grpc));
        };
        if config.throttle.should_warn() {
            tracing::warn!(
                policy = scaled.name(),
                max = config.in_flight.max(),
                "{why}"
            );
        } else {
            tracing::debug!(
                policy = scaled.name(),
                max = config.in_flight.max(),
                "{why}"
            );
        }
        let decision = store
            .check_now(scaled, &pending.key, pending.cost)
            .with_source(DecisionSource::Local);
        self.decided(pending.rule, &pending.key, decision, pending.grpc, None)
    }

    /// Fail closed: 503, or gRPC `UNAVAILABLE`; never 429, the client did nothing wrong.
    fn unavailable(&self, grpc: bool) -> Response<Bytes> {
        if grpc {
            grpc::status(grpc::UNAVAILABLE, "rate limiter unavailable", None)
        } else {
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "rate limiter unavailable\n",
            )
        }
    }

    fn log_unlimited(&self, policy: &str, why: &str) {
        if self.config.throttle.should_warn() {
            tracing::warn!(policy, why, "request not rate limited");
        }
    }
}

/// How the breaker counts a call's end (`None`: no answer at all).
fn outcome_of(outcome: Option<&Result<Decision, StoreError>>) -> Outcome {
    match outcome {
        Some(Ok(_)) => Outcome::Success,
        Some(Err(error)) if error.is_timeout() => Outcome::Timeout,
        Some(Err(_)) => Outcome::Failure,
        None => Outcome::Timeout,
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
