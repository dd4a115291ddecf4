//! What a layer and all its services share: the store, the rules (policy and key per route),
//! and how to answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use super::breaker::{Admission, Breaker};
use super::failure::{MissingKey, OnStoreError, Throttle};
use super::grpc::{self, GrpcStatus};
use super::headers::{HeaderStyle, RateHeaders};
use super::rule::Rule;
use crate::decision::{Decision, DecisionSource};
use crate::error::StoreError;
use crate::key::{Key, KeyExtractor, PeerIp};
use crate::store::{MemoryStore, Store, StoreFuture};

pub(crate) type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
pub(crate) type RejectFn = dyn Fn(&Decision) -> Response<Bytes> + Send + Sync;
pub(crate) type AllowFn = dyn Fn(&Parts) -> bool + Send + Sync;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) store: Arc<dyn Store>,
    /// Route rules, tried in order; then the default rule, if any.
    pub(crate) routes: Vec<Arc<Rule>>,
    pub(crate) default: Option<Arc<Rule>>,
    /// Requests any of these accept skip limiting.
    pub(crate) allow: Vec<Arc<AllowFn>>,
    pub(crate) missing_key: MissingKey,
    pub(crate) cost: Option<Arc<CostFn>>,
    pub(crate) on_store_error: OnStoreError,
    /// The in-memory store of [`OnStoreError::Local`].
    pub(crate) local: Option<MemoryStore>,
    pub(crate) deadline: Duration,
    pub(crate) breaker: Arc<Breaker>,
    pub(crate) headers: HeaderStyle,
    pub(crate) grpc_status: GrpcStatus,
    pub(crate) rejection: Option<Arc<RejectFn>>,
    pub(crate) throttle: Arc<Throttle>,
}

/// What a store call needs to be settled: its rule and breaker admission, whether it is a
/// gRPC call, and for a local fallback the key and cost.
pub(crate) struct Pending {
    rule: Arc<Rule>,
    admission: Admission,
    grpc: bool,
    key: Key,
    cost: u64,
}

/// How a request starts.
// Lives on the stack for one call; boxing the large variant would allocate per request.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Start {
    /// Ask the store.
    Check(StoreFuture, Pending),
    /// Decided without waiting.
    Decided(Verdict),
    /// Call the inner service without limiting it.
    Unlimited,
}

/// What to do with the request.
pub(crate) enum Verdict {
    /// Call the inner service, with these headers for its response.
    Proceed(Decision, RateHeaders),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Config {
    /// How many instances share a limit in the local fallback (1 when there is none).
    pub(crate) fn local_instances(&self) -> u32 {
        match self.on_store_error {
            OnStoreError::Local { instances } => instances,
            _ => 1,
        }
    }

    pub(crate) fn start(&self, parts: &Parts) -> Start {
        if self.allow.iter().any(|allowed| allowed(parts)) {
            return Start::Unlimited;
        }
        let Some(rule) = self
            .routes
            .iter()
            .find(|rule| rule.matches(parts))
            .or(self.default.as_ref())
        else {
            return Start::Unlimited;
        };
        let grpc = grpc::is_grpc(parts);
        let key = match rule.key.extract(parts) {
            Some(key) => key,
            None => match self.missing_key {
                MissingKey::PeerIp => match PeerIp.extract(parts) {
                    Some(key) => key,
                    None => {
                        self.log_unlimited(
                            rule,
                            "no key and no peer address (serve with connect info)",
                        );
                        return Start::Unlimited;
                    }
                },
                MissingKey::Allow => return Start::Unlimited,
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
        let cost = self.cost.as_ref().map_or(1, |cost| cost(parts));
        let admission = self.breaker.admit(self.deadline);
        let pending = Pending {
            rule: Arc::clone(rule),
            admission,
            grpc,
            key,
            cost,
        };
        if admission == Admission::Skip {
            return Start::Decided(self.store_failed(&StoreError::CircuitOpen, &pending));
        }
        if let Some(outcome) = self.store.check_ready(&rule.policy, &pending.key, cost) {
            return Start::Decided(self.verdict(outcome, &pending));
        }
        Start::Check(self.store.check(&rule.policy, &pending.key, cost), pending)
    }

    pub(crate) fn verdict(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
    ) -> Verdict {
        self.breaker.record(pending.admission, outcome.is_ok());
        match outcome {
            Ok(decision) => self.decided(decision, pending.grpc),
            Err(error) => self.store_failed(&error, pending),
        }
    }

    fn decided(&self, decision: Decision, grpc: bool) -> Verdict {
        if decision.is_allowed() {
            let headers = RateHeaders::of(&decision, self.headers);
            return Verdict::Proceed(decision, headers);
        }
        tracing::debug!(policy = decision.policy(), denied_by = ?decision.denied_by(), "rate limited");
        Verdict::Respond(self.reject(&decision, grpc))
    }

    /// The denial: a gRPC status for gRPC calls (the custom rejection applies to the others),
    /// 429 otherwise; the rate-limit headers (gRPC metadata) on both.
    fn reject(&self, decision: &Decision, grpc: bool) -> Response<Bytes> {
        let mut response = match &self.rejection {
            _ if grpc => grpc::status(
                self.grpc_status.code(),
                &grpc::denial_message(decision),
                Some(decision),
            ),
            Some(custom) => custom(decision),
            None if decision.exceeds_capacity() => text(
                StatusCode::TOO_MANY_REQUESTS,
                "request cost exceeds the rate limit\n",
            ),
            None => text(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n"),
        };
        RateHeaders::of(decision, self.headers).write_missing(response.headers_mut());
        response
    }

    /// Every decision made without the store is logged: at `warn` at most once a second (the
    /// circuit breaker's transitions are logged too), at `debug` otherwise.
    fn store_failed(&self, error: &StoreError, pending: &Pending) -> Verdict {
        let policy = pending.rule.policy.name();
        let mode = match self.on_store_error {
            OnStoreError::Open => "allowing request (fail open)",
            OnStoreError::Closed => "answering 503 (fail closed)",
            OnStoreError::Local { .. } => "deciding in memory (local fallback)",
        };
        if self.throttle.should_warn() {
            tracing::warn!(policy, %error, "rate-limit store failed; {mode}");
        } else {
            tracing::debug!(policy, %error, "rate-limit store failed; {mode}");
        }
        match (&self.on_store_error, &self.local) {
            (OnStoreError::Closed, _) if pending.grpc => Verdict::Respond(grpc::status(
                grpc::UNAVAILABLE,
                "rate limiter unavailable",
                None,
            )),
            (OnStoreError::Closed, _) => Verdict::Respond(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "rate limiter unavailable\n",
            )),
            (OnStoreError::Local { .. }, Some(local)) => {
                let decision = local
                    .check_now(&pending.rule.local_policy, &pending.key, pending.cost)
                    .with_source(DecisionSource::Local);
                self.decided(decision, pending.grpc)
            }
            _ => Verdict::Proceed(
                Decision::fail_open(pending.rule.policy.name_arc()),
                RateHeaders::default(),
            ),
        }
    }

    fn log_unlimited(&self, rule: &Rule, why: &str) {
        if self.throttle.should_warn() {
            tracing::warn!(policy = rule.policy.name(), why, "request not rate limited");
        }
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
