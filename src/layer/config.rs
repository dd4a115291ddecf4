//! What a layer and all its services share: the store, the policy, the key, and how to answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use super::breaker::{Admission, Breaker};
use super::failure::{MissingKey, OnStoreError, Throttle};
use super::grpc::{self, GrpcStatus};
use super::headers::{render, HeaderStyle};
use crate::decision::{Decision, DecisionSource};
use crate::error::StoreError;
use crate::key::{Key, KeyExtractor, PeerIp};
use crate::policy::Policy;
use crate::store::{MemoryStore, Store, StoreFuture};

pub(crate) type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
pub(crate) type RejectFn = dyn Fn(&Decision) -> Response<Bytes> + Send + Sync;

/// The in-memory store and (scaled) policy of [`OnStoreError::Local`].
#[derive(Clone)]
pub(crate) struct Fallback {
    pub(crate) store: MemoryStore,
    pub(crate) policy: Arc<Policy>,
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing_key: MissingKey,
    pub(crate) cost: Option<Arc<CostFn>>,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) fallback: Option<Fallback>,
    pub(crate) deadline: Duration,
    pub(crate) breaker: Arc<Breaker>,
    pub(crate) headers: HeaderStyle,
    pub(crate) grpc_status: GrpcStatus,
    pub(crate) rejection: Option<Arc<RejectFn>>,
    pub(crate) throttle: Arc<Throttle>,
}

/// What a store call needs to be settled: its breaker admission, whether it is a gRPC call,
/// and for a local fallback the key and cost.
pub(crate) struct Pending {
    admission: Admission,
    grpc: bool,
    key: Key,
    cost: u64,
}

/// How a request starts.
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
    Proceed(Decision, HeaderMap),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Config {
    pub(crate) fn start(&self, parts: &Parts) -> Start {
        let grpc = grpc::is_grpc(parts);
        let key = match self.key.extract(parts) {
            Some(key) => key,
            None => match self.missing_key {
                MissingKey::PeerIp => match PeerIp.extract(parts) {
                    Some(key) => key,
                    None => {
                        self.log_unlimited("no key and no peer address (serve with connect info)");
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
            admission,
            grpc,
            key,
            cost,
        };
        if admission == Admission::Skip {
            return Start::Decided(self.store_failed(&StoreError::CircuitOpen, &pending));
        }
        Start::Check(self.store.check(&self.policy, &pending.key, cost), pending)
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
            let headers = render(&decision, self.headers);
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
        add_missing(response.headers_mut(), render(decision, self.headers));
        response
    }

    /// Every decision made without the store is logged: at `warn` at most once a second (the
    /// circuit breaker's transitions are logged too), at `debug` otherwise.
    fn store_failed(&self, error: &StoreError, pending: &Pending) -> Verdict {
        let policy = self.policy.name();
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
        match (&self.on_store_error, &self.fallback) {
            (OnStoreError::Closed, _) if pending.grpc => Verdict::Respond(grpc::status(
                grpc::UNAVAILABLE,
                "rate limiter unavailable",
                None,
            )),
            (OnStoreError::Closed, _) => Verdict::Respond(text(
                StatusCode::SERVICE_UNAVAILABLE,
                "rate limiter unavailable\n",
            )),
            (OnStoreError::Local { .. }, Some(fallback)) => {
                let decision = fallback
                    .store
                    .check_now(&fallback.policy, &pending.key, pending.cost)
                    .with_source(DecisionSource::Local);
                self.decided(decision, pending.grpc)
            }
            _ => Verdict::Proceed(
                Decision::fail_open(self.policy.name_arc()),
                HeaderMap::new(),
            ),
        }
    }

    fn log_unlimited(&self, why: &str) {
        if self.throttle.should_warn() {
            tracing::warn!(policy = self.policy.name(), why, "request not rate limited");
        }
    }
}

/// Adds the headers the response does not have yet: an inner (more specific) layer's
/// rate-limit headers win over an outer one's.
pub(crate) fn add_missing(target: &mut HeaderMap, headers: HeaderMap) {
    for (name, value) in headers {
        if let Some(name) = name {
            target.entry(name).or_insert(value);
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
