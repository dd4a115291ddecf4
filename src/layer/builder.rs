//! The builder: every setting of a layer, checked once by [`RateLimitBuilder::build`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http::request::Parts;

use super::layer_settings::LayerSettings;
use super::rate_limit_layer::RateLimitLayer;
use super::rule::Rule;
use super::settings::{GrpcStatus, MissingKey, RejectBody, Shadow};
use super::usage::{self, BodyUsage, ReadFn, RealCost};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::failure::{CircuitBreaker, OnStoreError};
use crate::key::{IpRanges, KeyExtractor, PeerIp};
use crate::response::HeaderStyle;

/// The settings of a [`RateLimitLayer`]: made by [`RateLimitLayer::builder`] (a policy of the
/// layer's own, for every request no [`rule`](Self::rule) matches) or
/// [`RateLimitLayer::builder_per_route`] (only the rules' requests are limited), finished by
/// [`build`](Self::build). Every setter is infallible: what can be wrong with a value (a route
/// pattern, an address range, a header name) is refused where the value is made.
///
/// Cheap to clone: clones made before [`build`](Self::build) share the store, the circuit
/// breakers and the in-memory fallback, as clones of a layer do.
///
/// ```
/// use std::time::Duration;
/// use redlimit::key::{Header, IpRanges, PeerIp};
/// use redlimit::layer::{OnStoreError, Rule};
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
/// let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
/// let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
///     .rule(Rule::new("POST /login", login)?.key(PeerIp))
///     .rule(Rule::new("/v1/*", api)?.key(Header::new("x-api-key")?))
///     .allow_ips(IpRanges::parse(["10.0.0.0/8"])?)
///     .on_store_error(OnStoreError::Local { instances: 4 })
///     .store_deadline(Duration::from_millis(50))
///     .build()?;
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until built"]
pub struct RateLimitBuilder {
    config: LayerSettings,
    /// [`key`](Self::key) was called without a policy of the layer's own to key.
    key_without_policy: bool,
}

impl RateLimitBuilder {
    pub(super) fn new(config: LayerSettings) -> Self {
        RateLimitBuilder {
            config,
            key_without_policy: false,
        }
    }

    /// The layer. Fails on a [`key`](Self::key) given to a builder without a policy of its
    /// own ([`ConfigError::KeyWithoutPolicy`]: rules bring their own keys), and on
    /// [`refund_if`](Self::refund_if) over a store without refunds
    /// ([`ConfigError::RefundsUnsupported`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::PeerIp;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{ConfigError, Limit, Policy, RateLimitLayer};
    /// let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy).key(PeerIp).build()?;
    /// let err = RateLimitLayer::builder_per_route(MemoryStore::new()).key(PeerIp).build();
    /// assert_eq!(err.unwrap_err(), ConfigError::KeyWithoutPolicy);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<RateLimitLayer, ConfigError> {
        if self.key_without_policy {
            return Err(ConfigError::KeyWithoutPolicy);
        }
        if self.config.refund.is_some() && self.config.store.refunds().is_none() {
            return Err(ConfigError::RefundsUnsupported(self.config.store.kind()));
        }
        Ok(RateLimitLayer::from_settings(self.config))
    }

    /// How to key requests under the layer's own policy (default: [`PeerIp`]). Rules bring
    /// their own keys: on a [`builder_per_route`](RateLimitLayer::builder_per_route) builder,
    /// [`build`](Self::build) refuses a key.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::Header;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .key(Header::new("x-api-key")?)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn key(mut self, key: impl KeyExtractor) -> Self {
        match &mut self.config.default {
            Some(default) => default.key = Arc::new(key),
            None => self.key_without_policy = true,
        }
        self
    }

    #[doc = include_str!("../../docs/layer/rule.md")]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.config.routes.push(rule);
        self
    }

    /// Adds each of `rules` as [`rule`](Self::rule) does, in order: a config file's
    /// ([`ConfigFile::rules`](crate::config::ConfigFile::rules), feature `config`), say.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::layer::Rule;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    ///
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
    /// let rules = vec![Rule::new("POST /login", login)?, Rule::all(api)];
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).rules(rules).build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn rules(mut self, rules: impl IntoIterator<Item = Rule>) -> Self {
        self.config.routes.extend(rules);
        self
    }

    /// Shadow mode for the layer's own policy and every route rule without a mode of its own
    /// (default [`Shadow::Off`]): every decision is made and recorded, none denies. See
    /// [`Shadow`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::Shadow;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .shadow(Shadow::OnWithHeaders)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn shadow(mut self, shadow: Shadow) -> Self {
        self.config.shadow = shadow;
        self
    }

    /// Skips limiting for requests whose socket peer is in `ranges` (e.g. your own
    /// monitoring). Behind proxies, use [`allow_if`](Self::allow_if) with
    /// [`ClientIp::client`](crate::key::ClientIp::client). Ranges are parsed (and refused)
    /// by [`IpRanges::parse`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::key::IpRanges;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .allow_ips(IpRanges::parse(["10.0.0.0/8", "::1"])?)
    ///     .build()?;
    /// assert!(IpRanges::parse(["10.0.0.0/33"]).is_err());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn allow_ips(self, ranges: IpRanges) -> Self {
        self.allow_if(move |parts: &Parts| {
            PeerIp::addr(parts).is_some_and(|ip| ranges.contains(ip.to_canonical()))
        })
    }

    /// Skips limiting for requests `allowed` accepts (an internal header your gateway sets,
    /// a health-check path, a key on an allow-list, ...).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .allow_if(|parts: &http::request::Parts| parts.uri.path() == "/healthz")
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn allow_if(mut self, allowed: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.config.allow.push(Arc::new(allowed));
        self
    }

    /// What to do with requests that have no key (default: [`MissingKey::PeerIp`]: the peer's
    /// IP, and a `500` if the server records no peer address; see [`MissingKey`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use http::StatusCode;
    /// use redlimit::key::Header;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::MissingKey;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .key(Header::new("x-api-key")?)
    ///     .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED))
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn on_missing_key(mut self, missing: MissingKey) -> Self {
        self.config.missing_key = missing;
        self
    }

    #[doc = include_str!("../../docs/layer/refund_if.md")]
    pub fn refund_if(
        mut self,
        refund: impl Fn(&http::response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        let refund: Arc<super::refund::RefundFn> = Arc::new(refund);
        self.config.refund = Some(refund);
        self
    }

    /// The weight of a request (default 1), from its head: bytes, items in a batch, ...
    /// A cost above some limit's count is denied without consuming, with no `Retry-After`.
    /// For a cost known only once the response is made (an LLM call's tokens), an estimate
    /// ([`Estimate::of`](super::Estimate::of) reads one an
    /// [`EstimateFromBodyLayer`](super::EstimateFromBodyLayer) took from the body), settled by
    /// [`settle_with`](Self::settle_with) or [`settle_with_body`](Self::settle_with_body).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(100, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .cost(|parts: &http::request::Parts| {
    ///         parts.headers.get("x-batch-size")
    ///             .and_then(|v| v.to_str().ok()?.parse().ok())
    ///             .unwrap_or(1)
    ///     })
    /// .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn cost(mut self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.config.cost = Some(Arc::new(cost));
        self
    }

    #[doc = include_str!("../../docs/layer/settle_with.md")]
    pub fn settle_with(
        mut self,
        real_cost: impl Fn(&http::response::Parts) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        let read: Arc<ReadFn> =
            Arc::new(move |head: &http::response::Parts| match real_cost(head) {
                Some(cost) => RealCost::Known(cost),
                None => RealCost::Estimate,
            });
        self.config.reconcile = Some(usage::chain(self.config.reconcile.take(), read));
        self
    }

    #[doc = include_str!("../../docs/layer/settle_with_body.md")]
    pub fn settle_with_body<U: BodyUsage>(
        mut self,
        usage: impl Fn(&http::response::Parts) -> Option<U> + Send + Sync + 'static,
    ) -> Self {
        let read: Arc<ReadFn> = Arc::new(move |head: &http::response::Parts| match usage(head) {
            Some(usage) => RealCost::Body(Box::new(usage)),
            None => RealCost::Estimate,
        });
        self.config.reconcile = Some(usage::chain(self.config.reconcile.take(), read));
        self
    }

    #[doc = include_str!("../../docs/layer/on_store_error.md")]
    pub fn on_store_error(mut self, mode: OnStoreError) -> Self {
        self.config.on_store_error = mode;
        self
    }

    /// When to stop calling a failing store (default [`CircuitBreaker::new`]: when half of at
    /// least 20 calls within 10 s failed, for 1 s). While open, requests are decided at once by
    /// the store-error mode. A store with several failure domains (the shards of a Redis
    /// Cluster, see [`Store::failure_domain`](crate::store::Store::failure_domain)) gets a
    /// breaker per domain: one sick shard does not switch limiting off for the others.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::CircuitBreaker;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .circuit_breaker(CircuitBreaker::new().min_calls(50).cool_down(Duration::from_secs(2)))
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.config.engine.set_breaker(breaker);
        self
    }

    #[doc = include_str!("../../docs/layer/max_store_calls.md")]
    pub fn max_store_calls(mut self, calls: usize) -> Self {
        self.config.engine.set_max_calls(calls);
        self
    }

    #[doc = include_str!("../../docs/layer/deny_cache.md")]
    pub fn deny_cache(mut self, capacity: usize) -> Self {
        self.config.engine.set_deny_cache(capacity);
        self
    }

    #[doc = include_str!("../../docs/layer/store_deadline.md")]
    pub fn store_deadline(mut self, deadline: Duration) -> Self {
        self.config.engine.set_deadline(deadline);
        self
    }

    /// Which rate-limit headers to send (default [`HeaderStyle::XRateLimit`]).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::HeaderStyle;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .headers(HeaderStyle::Both)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn headers(mut self, style: HeaderStyle) -> Self {
        self.config.headers = style;
        self
    }

    /// The gRPC status of a gRPC call past its limit (default
    /// [`GrpcStatus::ResourceExhausted`]; some proxies retry only on `UNAVAILABLE`). gRPC calls
    /// (`content-type: application/grpc*`) are answered with a gRPC status in an HTTP 200
    /// response, since a bare 429 reaches gRPC clients as `UNAVAILABLE`; gRPC-Web calls
    /// (`application/grpc-web*`) get it as a trailers-only gRPC-Web response in their own
    /// content type; other requests through the same layer still get 429.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::GrpcStatus;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .grpc_status(GrpcStatus::Unavailable)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn grpc_status(mut self, status: GrpcStatus) -> Self {
        self.config.grpc_status = status;
        self
    }

    /// The body of the layer's HTTP errors (default [`RejectBody::Text`]):
    /// [`RejectBody::ProblemJson`] answers a denial with an RFC 9457 `application/problem+json`
    /// body naming the violated quota policies (draft-ietf-httpapi-ratelimit-headers-11 §5).
    /// A custom [`on_rejection`](Self::on_rejection) response still replaces the 429.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// use redlimit::layer::RejectBody;
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .reject_body(RejectBody::ProblemJson)
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn reject_body(mut self, body: RejectBody) -> Self {
        self.config.reject_body = body;
        self
    }

    /// The `domain` of the `google.rpc.ErrorInfo` a gRPC denial carries (default
    /// `"redlimit"`; AIP-193 suggests the service's name, e.g. `"api.example.com"`). The
    /// reason is always `RATE_LIMIT_EXCEEDED`. Details need the `grpc` feature; without it
    /// this setting has no effect.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// # let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(1))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .grpc_error_domain("api.example.com")
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn grpc_error_domain(mut self, domain: impl AsRef<str>) -> Self {
        self.config.grpc_domain = Arc::from(domain.as_ref());
        self
    }

    #[doc = include_str!("../../docs/layer/on_rejection.md")]
    pub fn on_rejection(
        mut self,
        respond: impl Fn(&Decision) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.config.rejection = Some(Arc::new(respond));
        self
    }
}

impl std::fmt::Debug for RateLimitBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = &self.config;
        f.debug_struct("RateLimitBuilder")
            .field(
                "policy",
                &config.default.as_ref().map(|rule| rule.policy.name()),
            )
            .field("rules", &config.routes)
            .field("on_store_error", &config.on_store_error)
            .field("deadline", &config.engine.deadline())
            .finish_non_exhaustive()
    }
}
