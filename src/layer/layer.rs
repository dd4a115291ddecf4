//! The layer: the settings every service it wraps shares.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::request::Parts;
use http::Response;
use tower_layer::Layer;

use super::breakers::Breakers;
use super::config::Config;
use super::decide::Decider;
use super::in_flight::InFlight;
use super::route_pattern::RoutePattern;
use super::rule::Rule;
use super::service::RateLimit;
use super::settings::CircuitBreaker;
use super::settings::GrpcStatus;
use super::settings::HeaderStyle;
use super::settings::MissingKey;
use super::settings::OnStoreError;
use super::settings::Shadow;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::key::{KeyExtractor, PeerIp};
use crate::policy::Policy;
use crate::store::Store;

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
/// use redlimit::key::Header;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let policy = Policy::new("auth.create_token", [
///     Limit::sliding_log(20, Duration::from_secs(60))?,
///     Limit::sliding_log(5, Duration::from_secs(3))?,
/// ])?;
/// let app: Router = Router::new()
///     .route("/token", post(|| async { "token" }))
///     .layer(RateLimitLayer::new(MemoryStore::new(), policy).key(Header::new("x-api-key")?));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct RateLimitLayer {
    pub(super) config: Arc<Config>,
    /// The cell holding the decider for `config`, made by the first [`Layer::layer`] call and
    /// shared by every service and clone since; a builder call starts a new one. A reload
    /// (feature `config`) swaps the decider in the cell, so every service sees it at once.
    decider: Arc<OnceLock<Arc<ArcSwap<Decider>>>>,
}

impl RateLimitLayer {
    /// A layer enforcing `policy` in `store`, keyed by the socket peer's IP until
    /// [`key`](Self::key) says otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(store: impl Store, policy: Policy) -> Self {
        RateLimitLayer::per_route(store).edit(|c| {
            c.default = Some(Rule {
                pattern: None,
                policy,
                key: Arc::new(PeerIp),
                shadow: None,
            });
        })
    }

    /// A layer with no policy of its own: only requests matching a [`route`](Self::route) rule
    /// are limited, each by its rule's policy and key. One layer on a whole router can so give
    /// every endpoint its own limit (as `route_layer` per route would).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::{Header, PeerIp};
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    ///
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::per_route(MemoryStore::new())
    ///     .route("POST /login", login, PeerIp)?
    ///     .route("/v1/*", api, Header::new("x-api-key")?)?
    ///     .allow_ips(["10.0.0.0/8"])?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn per_route(store: impl Store) -> Self {
        RateLimitLayer {
            config: Arc::new(Config::new(Arc::new(store))),
            decider: Arc::default(),
        }
    }

    pub(super) fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self.decider = Arc::default();
        self
    }

    /// The cell of the current decider, derived once.
    pub(crate) fn cell(&self) -> Arc<ArcSwap<Decider>> {
        let cell = self.decider.get_or_init(|| {
            Arc::new(ArcSwap::from_pointee(Decider::new(Arc::clone(
                &self.config,
            ))))
        });
        Arc::clone(cell)
    }

    /// The decider in force now.
    pub(super) fn decider(&self) -> Arc<Decider> {
        self.cell().load_full()
    }

    /// How to key requests under the layer's own policy (default: [`PeerIp`]). Route rules
    /// bring their own keys; on a [`per_route`](Self::per_route) layer this does nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::Header;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).key(Header::new("x-api-key")?);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn key(self, key: impl KeyExtractor) -> Self {
        let key: Arc<dyn KeyExtractor> = Arc::new(key);
        self.edit(|c| {
            if let Some(default) = &mut c.default {
                default.key = key;
            }
        })
    }

    /// Limits requests matching `route` by `policy`, keyed by `key`, instead of by the layer's
    /// own policy. Rules are tried in the order they were added; the first match applies.
    ///
    /// `route` is `[METHOD] PATH`: `"POST /login"`, `"/v1/*"`, `"/grpc.health.v1.Health/Check"`.
    /// A path ending in `*` matches every URI path with that prefix; any other path matches the
    /// route the request matched in axum (`"/users/{id}"`, as written in the router) or, outside
    /// axum, the URI path exactly (for tonic, `/package.Service/Method`). A malformed pattern
    /// is a [`ConfigError`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::PeerIp;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let api = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), api).route("POST /login", login.clone(), PeerIp)?;
    /// assert!(RateLimitLayer::per_route(MemoryStore::new()).route("login", login, PeerIp).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn route(
        self,
        route: &str,
        policy: Policy,
        key: impl KeyExtractor,
    ) -> Result<Self, ConfigError> {
        self.add_route(route, policy, Arc::new(key), None)
    }

    /// Like [`route`](Self::route), with a shadow mode of the rule's own (whatever the
    /// layer's [`shadow`](Self::shadow) is): roll out one route's new limit in shadow while the
    /// others enforce theirs.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::PeerIp;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer, Shadow};
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::per_route(MemoryStore::new())
    ///     .route_shadow("POST /login", login, PeerIp, Shadow::On)?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn route_shadow(
        self,
        route: &str,
        policy: Policy,
        key: impl KeyExtractor,
        shadow: Shadow,
    ) -> Result<Self, ConfigError> {
        self.add_route(route, policy, Arc::new(key), Some(shadow))
    }

    fn add_route(
        self,
        route: &str,
        policy: Policy,
        key: Arc<dyn KeyExtractor>,
        shadow: Option<Shadow>,
    ) -> Result<Self, ConfigError> {
        let rule = Rule {
            pattern: Some(RoutePattern::parse(route)?),
            policy,
            key,
            shadow,
        };
        Ok(self.edit(|c| c.routes.push(rule)))
    }

    /// Shadow mode for the layer's own policy and every route rule without a mode of its own
    /// (default [`Shadow::Off`]): every decision is made and recorded, none denies. See
    /// [`Shadow`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer, Shadow};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).shadow(Shadow::OnWithHeaders);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn shadow(self, shadow: Shadow) -> Self {
        self.edit(|c| c.shadow = shadow)
    }

    /// Skips limiting for requests whose socket peer is in one of `ranges` (addresses or CIDRs,
    /// e.g. your own monitoring). Behind proxies, use [`allow_if`](Self::allow_if) with
    /// [`ClientIp::client`](crate::key::ClientIp::client). An invalid range is a
    /// [`ConfigError`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).allow_ips(["10.0.0.0/8", "::1"])?;
    /// assert!(layer.allow_ips(["10.0.0.0/33"]).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn allow_ips<I>(self, ranges: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let ranges = crate::key::ip_net::Ranges::parse(ranges)?;
        Ok(self.allow_if(move |parts: &Parts| {
            PeerIp::addr(parts).is_some_and(|ip| ranges.contains(ip.to_canonical()))
        }))
    }

    /// Skips limiting for requests `allowed` accepts (an internal header your gateway sets,
    /// a health-check path, a key on an allow-list, ...).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .allow_if(|parts: &http::request::Parts| parts.uri.path() == "/healthz");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn allow_if(self, allowed: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.edit(|c| c.allow.push(Arc::new(allowed)))
    }

    /// What to do with requests that have no key (default: [`MissingKey::PeerIp`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use redlimit::key::Header;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, MissingKey, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .key(Header::new("x-api-key")?)
    ///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        self.edit(|c| c.missing_key = missing)
    }

    /// Gives a request's units back to the store after its response when `refund` holds for
    /// the response's head (status, headers): a 5xx that did no work, a cache hit that cost
    /// nothing. Only requests the store admitted are refunded (not those allowed by a failure
    /// policy or the local fallback), each at most once, never taking a limit below its state
    /// before the request ([`Refund`](crate::store::Refund) says what that means per
    /// algorithm). The refund is one store call sent after the response is ready, off its
    /// path: it never delays or fails the response, and its failure is only logged (debug).
    /// A response the inner service fails to produce (its `Err`) is not refunded.
    ///
    /// A denial that another replica cached in its deny cache may outlast a refund by up to
    /// its retry time: refunds make the cache conservative (it may deny what the store would
    /// now admit), never lenient.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .refund_if(|response: &http::response::Parts| response.status.is_server_error());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn refund_if(
        self,
        refund: impl Fn(&http::response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        let refund: Arc<super::refund::RefundFn> = Arc::new(refund);
        self.edit(|c| c.refund = Some(refund))
    }

    /// The weight of a request (default 1), from its head: bytes, items in a batch, ...
    /// A cost above some limit's count is denied without consuming, with no `Retry-After`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).cost(|parts: &http::request::Parts| {
    ///     parts.headers.get("x-batch-size")
    ///         .and_then(|v| v.to_str().ok()?.parse().ok())
    ///         .unwrap_or(1)
    /// });
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn cost(self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.edit(|c| c.cost = Some(Arc::new(cost)))
    }

    /// What to do when the store fails, misses the deadline, or its circuit is open (default:
    /// [`OnStoreError::Local`] with one instance: each replica enforces the whole limit in
    /// memory, so N replicas falling back together admit up to N times the limit; say how
    /// many share it, or choose [`OnStoreError::Open`] to admit everything).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, OnStoreError, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone()).on_store_error(OnStoreError::Closed);
    /// // Four replicas: each enforces a quarter of the limit in memory while Redis is away.
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .on_store_error(OnStoreError::Local { instances: 4 });
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn on_store_error(self, mode: OnStoreError) -> Self {
        self.edit(|c| c.on_store_error = mode)
    }

    /// When to stop calling a failing store (default [`CircuitBreaker::new`]: when half of at
    /// least 20 calls within 10 s failed, for 1 s). While open, requests are decided at once by
    /// the store-error mode. A store with several failure domains (the shards of a Redis
    /// Cluster, see [`Store::failure_domain`]) gets a breaker per domain: one sick shard does
    /// not switch limiting off for the others.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{CircuitBreaker, Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .circuit_breaker(CircuitBreaker::new().min_calls(50).cool_down(Duration::from_secs(2)));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn circuit_breaker(self, breaker: CircuitBreaker) -> Self {
        self.edit(|c| c.breakers = Arc::new(Breakers::new(breaker)))
    }

    /// The most store calls this layer (all its clones) keeps in flight (default 256; at
    /// least 1). A request past it is decided in memory with this instance's share of its
    /// policy (as [`OnStoreError::Local`] would, whatever the failure mode), with the source
    /// [`DecisionSource::Local`](crate::DecisionSource::Local): under a flood, calls do not
    /// queue behind the store until they all miss the deadline, and load never turns limiting
    /// off. Stores that answer without I/O (the [`MemoryStore`](crate::store::MemoryStore)) are not
    /// counted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).max_store_calls(1024);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn max_store_calls(self, calls: usize) -> Self {
        self.edit(|c| c.in_flight = Arc::new(InFlight::new(calls)))
    }

    /// How many denials the layer remembers (default 10 000; 0 turns the cache off). When the
    /// store denies a key, later requests for it with at least the same cost are answered in
    /// memory until the store's retry time, with its headers counted down
    /// ([`DecisionSource::DenyCache`](crate::DecisionSource::DenyCache)): a client hammering a
    /// denied key costs the store nothing until it may pass again.
    ///
    /// This is exact, not an approximation: a denied request consumes nothing, and other
    /// requests (here or on other replicas) can only consume more, so the store would have
    /// denied every one of them too. The retry time is counted from before the store call was
    /// sent, so the cache never outlasts the store's own denial. Denials that can never pass
    /// (a cost above a limit's capacity) and decisions the store did not make are not cached.
    /// Stores that answer without I/O (the [`MemoryStore`](crate::store::MemoryStore)) never
    /// fill it. Memory stays bounded: past the capacity, expired entries and then those
    /// expiring soonest are evicted.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).deny_cache(0); // off
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn deny_cache(self, capacity: usize) -> Self {
        self.edit(|c| c.deny_cache = capacity)
    }

    /// The longest a request waits on the store (default 100 ms; at least 1 ms). Past it, the
    /// request is decided in memory with this instance's share of its policy (source
    /// [`DecisionSource::Local`](crate::DecisionSource::Local)), whatever the failure mode: a
    /// store that is late may be one a flood queues calls for, and failing open on load would
    /// hand the flood an unlimited window. The late call is never replayed; it may finish in
    /// the background (for up to 1 s, at least ten deadlines) so the circuit breaker learns
    /// whether the store is slow or gone.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
    ///     .store_deadline(Duration::from_millis(25));
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn store_deadline(self, deadline: Duration) -> Self {
        self.edit(|c| c.deadline = deadline.max(Duration::from_millis(1)))
    }

    /// Which rate-limit headers to send (default [`HeaderStyle::XRateLimit`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{HeaderStyle, Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).headers(HeaderStyle::Both);
    /// # Ok::<(), redlimit::ConfigError>(())
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
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{GrpcStatus, Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).grpc_status(GrpcStatus::Unavailable);
    /// # Ok::<(), redlimit::ConfigError>(())
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
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Decision, Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy).on_rejection(|d: &Decision| {
    ///     let body = format!(r#"{{"error":"rate_limited","policy":"{}"}}"#, d.policy());
    ///     Response::builder()
    ///         .status(StatusCode::TOO_MANY_REQUESTS)
    ///         .header("content-type", "application/json")
    ///         .body(Bytes::from(body))
    ///         .unwrap()
    /// });
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn on_rejection(
        self,
        respond: impl Fn(&Decision) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.edit(|c| c.rejection = Some(Arc::new(respond)))
    }

    /// The layer's own policy (`None` for a [`per_route`](Self::per_route) layer).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
    /// assert_eq!(layer.policy().unwrap().name(), "p");
    /// assert!(RateLimitLayer::per_route(MemoryStore::new()).policy().is_none());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn policy(&self) -> Option<&Policy> {
        self.config.default.as_ref().map(|rule| &rule.policy)
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("policy", &self.policy())
            .field("routes", &self.config.routes.len())
            .field("on_store_error", &self.config.on_store_error)
            .field("deadline", &self.config.deadline)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_cell(inner, self.cell())
    }
}
