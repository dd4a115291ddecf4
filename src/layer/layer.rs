//! The layer: configuration shared by every service it wraps.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::Response;
use tower_layer::Layer;

use super::breaker::{Breaker, CircuitBreaker};
use super::config::{Config, Fallback};
use super::failure::{MissingKey, OnStoreError, Throttle};
use super::grpc::GrpcStatus;
use super::headers::HeaderStyle;
use super::service::RateLimit;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Policy;
use crate::store::{MemoryStore, Store};

/// The default store deadline: no request waits longer than this on the store.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

/// Applies a rate-limit [`Policy`] to every request of the wrapped service.
///
/// Defaults: key = the socket peer IP ([`PeerIp`]); cost 1; `X-RateLimit-*` headers; fail
/// open if the store errs or takes longer than 100 ms. Cheap to clone; every service made from
/// one layer (and every clone) shares one policy and one store, so they share one limit.
///
/// Needs a Tokio runtime with the time driver (as axum and tonic servers have) for the deadline.
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::post, Router};
/// use redlimit::{Header, Limit, MemoryStore, Policy, RateLimitLayer};
///
/// let policy = Policy::new("auth.create_token")
///     .limit(Limit::sliding_log(20, Duration::from_secs(60)))
///     .limit(Limit::sliding_log(5, Duration::from_secs(3)));
/// let app: Router = Router::new()
///     .route("/token", post(|| async { "token" }))
///     .layer(RateLimitLayer::new(MemoryStore::new(), policy).key(Header::new("x-api-key")));
/// ```
#[derive(Clone)]
#[must_use]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

impl RateLimitLayer {
    /// A layer enforcing `policy` in `store`.
    ///
    /// # Panics
    ///
    /// If the policy is invalid (see [`Policy::validate`]); use [`RateLimitLayer::try_new`] for
    /// policies built from configuration.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
    /// let layer = RateLimitLayer::new(
    ///     MemoryStore::new(),
    ///     Policy::new("api").limit(Limit::gcra(100, Duration::from_secs(60))),
    /// );
    /// ```
    pub fn new(store: impl Store, policy: Policy) -> Self {
        match RateLimitLayer::try_new(store, policy) {
            Ok(layer) => layer,
            Err(error) => panic!("invalid rate-limit policy: {error}"),
        }
    }

    /// A layer enforcing `policy` in `store`, or why the policy cannot be enforced.
    ///
    /// ```
    /// use redlimit::{ConfigError, MemoryStore, Policy, RateLimitLayer};
    /// let err = RateLimitLayer::try_new(MemoryStore::new(), Policy::new("empty")).err().unwrap();
    /// assert_eq!(err, ConfigError::NoLimits("empty".into()));
    /// ```
    pub fn try_new(store: impl Store, policy: Policy) -> Result<Self, ConfigError> {
        policy.validate()?;
        Ok(RateLimitLayer {
            config: Arc::new(Config {
                store: Arc::new(store),
                policy: Arc::new(policy),
                key: Arc::new(PeerIp),
                missing_key: MissingKey::default(),
                cost: None,
                on_store_error: OnStoreError::default(),
                fallback: None,
                deadline: DEFAULT_DEADLINE,
                breaker: Arc::new(Breaker::new(CircuitBreaker::default())),
                headers: HeaderStyle::default(),
                grpc_status: GrpcStatus::default(),
                rejection: None,
                throttle: Arc::new(Throttle::default()),
            }),
        })
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// How to key requests (default: [`PeerIp`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Header, Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).key(Header::new("x-api-key"));
    /// ```
    pub fn key(self, key: impl KeyExtractor) -> Self {
        self.edit(|c| c.key = Arc::new(key))
    }

    /// What to do with requests that have no key (default: [`MissingKey::PeerIp`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use redlimit::{Header, Limit, MemoryStore, MissingKey, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .key(Header::new("x-api-key"))
    ///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED));
    /// ```
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        self.edit(|c| c.missing_key = missing)
    }

    /// The weight of a request (default 1), from its head: bytes, items in a batch, ...
    /// A cost above some limit's count is denied without consuming, with no `Retry-After`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(100, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).cost(|parts: &http::request::Parts| {
    ///     parts.headers.get("x-batch-size")
    ///         .and_then(|v| v.to_str().ok()?.parse().ok())
    ///         .unwrap_or(1)
    /// });
    /// ```
    pub fn cost(self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.edit(|c| c.cost = Some(Arc::new(cost)))
    }

    /// What to do when the store fails, misses the deadline, or its circuit is open (default:
    /// [`OnStoreError::Open`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, MemoryStore, OnStoreError, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone()).on_store_error(OnStoreError::Closed);
    /// // Four replicas: each enforces a quarter of the limit in memory while Redis is away.
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .on_store_error(OnStoreError::Local { instances: 4 });
    /// ```
    pub fn on_store_error(self, mode: OnStoreError) -> Self {
        self.edit(|c| {
            c.on_store_error = mode;
            c.fallback = match mode {
                OnStoreError::Local { instances } => Some(Fallback {
                    store: MemoryStore::new(),
                    policy: Arc::new(c.policy.scaled(instances)),
                }),
                _ => None,
            };
        })
    }

    /// When to stop calling a failing store (default: after 5 consecutive failures, for 1 s).
    /// While open, requests are decided at once by the store-error mode.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{CircuitBreaker, Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .circuit_breaker(CircuitBreaker::new(3, Duration::from_secs(2)));
    /// ```
    pub fn circuit_breaker(self, breaker: CircuitBreaker) -> Self {
        self.edit(|c| c.breaker = Arc::new(Breaker::new(breaker)))
    }

    /// The longest a request waits on the store (default 100 ms; at least 1 ms). Past it, the
    /// store-error mode decides; the store call is abandoned, never replayed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .store_deadline(Duration::from_millis(25));
    /// ```
    pub fn store_deadline(self, deadline: Duration) -> Self {
        self.edit(|c| c.deadline = deadline.max(Duration::from_millis(1)))
    }

    /// Which rate-limit headers to send (default [`HeaderStyle::XRateLimit`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{HeaderStyle, Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).headers(HeaderStyle::Both);
    /// ```
    pub fn headers(self, style: HeaderStyle) -> Self {
        self.edit(|c| c.headers = style)
    }

    /// The gRPC status of a gRPC call past its limit (default
    /// [`GrpcStatus::ResourceExhausted`]; some proxies retry only on `UNAVAILABLE`). gRPC calls
    /// (`content-type: application/grpc*`) are answered with a gRPC status in an HTTP 200
    /// response, since a bare 429 reaches gRPC clients as `UNAVAILABLE`; other requests through
    /// the same layer still get 429.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{GrpcStatus, Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).grpc_status(GrpcStatus::Unavailable);
    /// ```
    pub fn grpc_status(self, status: GrpcStatus) -> Self {
        self.edit(|c| c.grpc_status = status)
    }

    /// A custom rejection response. The rate-limit headers and `Retry-After` are added unless
    /// the response already has them.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use bytes::Bytes;
    /// use http::{Response, StatusCode};
    /// use redlimit::{Decision, Limit, MemoryStore, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).on_rejection(|d: &Decision| {
    ///     let body = format!(r#"{{"error":"rate_limited","policy":"{}"}}"#, d.policy());
    ///     Response::builder()
    ///         .status(StatusCode::TOO_MANY_REQUESTS)
    ///         .header("content-type", "application/json")
    ///         .body(Bytes::from(body))
    ///         .unwrap()
    /// });
    /// ```
    pub fn on_rejection(
        self,
        respond: impl Fn(&Decision) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.edit(|c| c.rejection = Some(Arc::new(respond)))
    }

    /// The policy this layer enforces.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::{Limit, MemoryStore, Policy, RateLimitLayer};
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(1))));
    /// assert_eq!(layer.policy().name(), "p");
    /// ```
    pub fn policy(&self) -> &Policy {
        &self.config.policy
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("policy", &self.config.policy)
            .field("on_store_error", &self.config.on_store_error)
            .field("deadline", &self.config.deadline)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_config(inner, Arc::clone(&self.config))
    }
}
