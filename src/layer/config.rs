//! What a layer and all its services share: the store, the policy, the key, and how to answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use super::failure::{MissingKey, OnStoreError, Throttle};
use super::headers::{render, HeaderStyle};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Policy;
use crate::store::{Store, StoreFuture};

pub(crate) type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
pub(crate) type RejectFn = dyn Fn(&Decision) -> Response<Bytes> + Send + Sync;

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) policy: Arc<Policy>,
    pub(crate) key: Arc<dyn KeyExtractor>,
    pub(crate) missing_key: MissingKey,
    pub(crate) cost: Option<Arc<CostFn>>,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) deadline: Duration,
    pub(crate) headers: HeaderStyle,
    pub(crate) rejection: Option<Arc<RejectFn>>,
    pub(crate) throttle: Arc<Throttle>,
}

/// How a request starts.
pub(crate) enum Start {
    /// Ask the store.
    Check(StoreFuture),
    /// Call the inner service without limiting it.
    Pass(Option<Decision>),
    /// Answer at once.
    Respond(Response<Bytes>),
}

/// What to do once the store has answered (or failed).
pub(crate) enum Verdict {
    /// Call the inner service, with these headers for its response.
    Proceed(Decision, HeaderMap),
    /// Answer with this response.
    Respond(Response<Bytes>),
}

impl Config {
    pub(crate) fn start(&self, parts: &Parts) -> Start {
        let key = match self.key.extract(parts) {
            Some(key) => key,
            None => match self.missing_key {
                MissingKey::PeerIp => match PeerIp.extract(parts) {
                    Some(key) => key,
                    None => {
                        self.log_unlimited("no key and no peer address (serve with connect info)");
                        return Start::Pass(None);
                    }
                },
                MissingKey::Allow => return Start::Pass(None),
                MissingKey::Reject(status) => {
                    return Start::Respond(text(status, "missing rate-limit key\n"))
                }
            },
        };
        let cost = self.cost.as_ref().map_or(1, |cost| cost(parts));
        Start::Check(self.store.check(&self.policy, &key, cost))
    }

    pub(crate) fn verdict(&self, outcome: Result<Decision, StoreError>) -> Verdict {
        match outcome {
            Ok(decision) if decision.is_allowed() => {
                let headers = render(&decision, self.headers);
                Verdict::Proceed(decision, headers)
            }
            Ok(decision) => {
                tracing::debug!(policy = decision.policy(), denied_by = ?decision.denied_by(), "rate limited");
                Verdict::Respond(self.reject(&decision))
            }
            Err(error) => self.store_failed(&error),
        }
    }

    fn reject(&self, decision: &Decision) -> Response<Bytes> {
        let mut response = match &self.rejection {
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

    fn store_failed(&self, error: &StoreError) -> Verdict {
        let policy = self.policy.name();
        let warn = self.throttle.should_warn();
        match self.on_store_error {
            OnStoreError::Open => {
                if warn {
                    tracing::warn!(policy, %error, "rate-limit store failed; allowing request (fail open)");
                } else {
                    tracing::debug!(policy, %error, "rate-limit store failed; allowing request (fail open)");
                }
                Verdict::Proceed(
                    Decision::fail_open(self.policy.name_arc()),
                    HeaderMap::new(),
                )
            }
            OnStoreError::Closed => {
                if warn {
                    tracing::warn!(policy, %error, "rate-limit store failed; answering 503 (fail closed)");
                } else {
                    tracing::debug!(policy, %error, "rate-limit store failed; answering 503 (fail closed)");
                }
                Verdict::Respond(text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "rate limiter unavailable\n",
                ))
            }
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
