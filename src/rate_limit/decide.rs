//! The per-request logic: which rule applies, the key and cost, the breaker, the store's answer
//! (or its failure), and what to do with the request.

use std::future::IntoFuture;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use super::breaker::Admission;
use super::config::Config;
use super::grpc;
use super::headers::RateHeaders;
use super::local::LocalFallback;
use super::missing_key::MissingKey;
use super::on_store_error::OnStoreError;
use crate::decision::{Decision, DecisionSource};
use crate::error::{Chain, StoreError};
use crate::key::{Key, KeyExtractor, PeerIp};
use crate::store::{Check, CheckFuture};

/// Decides requests by a layer's settings, with the state derived from them once.
pub(crate) struct Decider {
    pub(crate) config: Arc<Config>,
    local: Option<LocalFallback>,
}

/// What a store call needs to be settled: its rule and breaker admission, whether it is a
/// gRPC call, and for a local fallback the key and cost.
pub(crate) struct Pending {
    rule: usize,
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
    Check(CheckFuture, Pending),
    /// Decided without waiting.
    Decided(Verdict),
    /// Call the inner service without limiting it.
    Unlimited,
}

/// What to do with the request.
pub(crate) enum Verdict {
    /// Call the inner service, with the decision in the request's extensions and these
    /// headers for its response.
    Proceed(Decision, RateHeaders),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Decider {
    /// Derives what the settings imply: the local fallback's store and scaled policies.
    pub(crate) fn new(config: Arc<Config>) -> Self {
        let local = LocalFallback::of(&config);
        Decider { config, local }
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
        let admission = config.breaker.admit(config.deadline);
        let pending = Pending {
            rule: rule_id,
            admission,
            grpc,
            key,
            cost,
        };
        if admission == Admission::Skip {
            return Start::Decided(self.store_failed(&StoreError::CircuitOpen, &pending));
        }
        match config.store.check(&rule.policy, &pending.key, cost) {
            Check::Ready(outcome) => Start::Decided(self.verdict(outcome, &pending)),
            pending_check => Start::Check(pending_check.into_future(), pending),
        }
    }

    /// Settles a store call: its decision, or the failure mode's.
    pub(crate) fn verdict(
        &self,
        outcome: Result<Decision, StoreError>,
        pending: &Pending,
    ) -> Verdict {
        self.config
            .breaker
            .record(pending.admission, outcome.is_ok());
        match outcome {
            Ok(decision) => self.decided(decision, pending.grpc),
            Err(error) => self.store_failed(&error, pending),
        }
    }

    fn decided(&self, decision: Decision, grpc: bool) -> Verdict {
        if decision.is_allowed() {
            let headers = RateHeaders::of(&decision, self.config.headers);
            return Verdict::Proceed(decision, headers);
        }
        tracing::debug!(policy = decision.policy(), denied_by = ?decision.denied_by(), "rate limited");
        Verdict::Respond(self.reject(decision, grpc))
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
        let local = self
            .local
            .as_ref()
            .and_then(|local| local.get(pending.rule));
        match (config.on_store_error, local) {
            (OnStoreError::Closed, _) => {
                let mut response = self.unavailable(pending.grpc);
                response
                    .extensions_mut()
                    .insert(Decision::fail_closed(rule.policy.name_arc()));
                Verdict::Respond(response)
            }
            (OnStoreError::Local { .. }, Some((store, scaled))) => {
                let decision = store
                    .check_now(scaled, &pending.key, pending.cost)
                    .with_source(DecisionSource::Local);
                self.decided(decision, pending.grpc)
            }
            _ => Verdict::Proceed(
                Decision::fail_open(rule.policy.name_arc()),
                RateHeaders::default(),
            ),
        }
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

fn text(status: StatusCode, body: &'static str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(body.as_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
