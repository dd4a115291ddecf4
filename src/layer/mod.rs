//! The Tower middleware: [`RateLimitLayer`] → [`RateLimit`] → [`ResponseFuture`], whose
//! responses carry a [`ResponseBody`]; the [`RateLimitBuilder`] that makes the layer, the
//! [`Rule`]s that give routes policies of their own, the [`Handle`] that steers a running layer,
//! and the settings (one type each).
//!
//! For each request: skip it if an allow rule accepts it; pick the first matching [`Rule`]
//! (else the layer's own policy); extract the key; ask the circuit breaker; check the policy in
//! the store, bounded by the deadline. Then either call the inner service, with the
//! [`Decision`](crate::Decision) in the request's extensions and `X-RateLimit-*` headers added
//! to its response, or answer at once: 429 with `Retry-After` or a gRPC status, with the
//! decision in the response's extensions for the layers outside; 503 when failing closed. A
//! rejection is a response: the service's error type is the inner service's.
//!
//! # One policy for every request
//!
//! ```
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use redlimit::key::Header;
//! use redlimit::layer::OnStoreError;
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! let policy = Policy::new("api", [Limit::gcra(10, Duration::from_secs(1))?])?;
//! let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
//!     .key(Header::new("x-api-key")?)
//!     .on_store_error(OnStoreError::Local { instances: 4 })
//!     .build()?;
//! let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(layer);
//! # Ok::<(), redlimit::ConfigError>(())
//! ```
//!
//! [`RateLimitLayer::new`] is the shortcut for a layer with every default.
//!
//! # A policy per route
//!
//! A [`Rule`] is a route pattern, its policy, and the key it counts under (and, if it wants
//! one, a shadow mode of its own). Rules are tried in order; the first match applies.
//!
//! ```
//! use std::time::Duration;
//! use redlimit::key::{Header, IpRanges, PeerIp};
//! use redlimit::layer::{Rule, Shadow};
//! use redlimit::store::MemoryStore;
//! use redlimit::{Limit, Policy, RateLimitLayer};
//!
//! let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
//! let search = Policy::new("search", [Limit::gcra(20, Duration::from_secs(1))?])?;
//! let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
//! let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
//!     .rule(Rule::new("POST /login", login)?.key(PeerIp))
//!     .rule(Rule::new("/v1/search", search)?.key(Header::new("x-api-key")?).shadow(Shadow::On))
//!     .rule(Rule::new("/v1/*", api)?.key(Header::new("x-api-key")?))
//!     .allow_ips(IpRanges::parse(["10.0.0.0/8"])?)
//!     .build()?;
//! # Ok::<(), redlimit::ConfigError>(())
//! ```
//!
//! # Costs known after the response: estimate, then reconcile
//!
//! A request admitted at an estimate ([`RateLimitBuilder::cost`], from its head or, through
//! an [`EstimateFromBodyLayer`], its body) is settled to the real cost its response reports:
//! [`RateLimitBuilder::settle_with`] from the head, [`RateLimitBuilder::settle_with_body`]
//! from the body when it ends (a [`BodyUsage`], such as [`SseUsage`] for a server-sent event
//! stream). The guide `docs/guide/token-budgets.md` tells the whole story.
//!
//! # Steering a running layer
//!
//! [`RateLimitLayer::handle`] gives the [`Handle`] of the layer, its clones and every service
//! made from them: inspect and reset keys, set overrides, put new rules in force (a config
//! file's watcher does, feature `config`).
//!
//! ```
//! use std::time::Duration;
//! use redlimit::layer::Rule;
//! use redlimit::store::MemoryStore;
//! use redlimit::{Key, Limit, Policy, RateLimitLayer};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let policy = Policy::new("api", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
//! let layer = RateLimitLayer::new(MemoryStore::new(), policy.clone());
//! let handle = layer.handle();
//! handle.reset(&policy, &Key::new("ip:203.0.113.7")).await.unwrap();
//! let raised = Policy::new("api", [Limit::gcra(10, Duration::from_secs(60)).unwrap()]).unwrap();
//! handle.replace_rules(vec![Rule::all(raised)]);
//! # });
//! ```

mod body;
mod builder;
mod charge;
mod decide;
mod estimate;
#[cfg(feature = "axum")]
mod extract;
mod future;
mod handle;
mod key_missing;
mod layer_settings;
mod layer_state;
mod meters;
mod rate_limit_layer;
mod reconcile;
mod refund;
mod route_pattern;
mod rule;
mod service;
mod settings;
mod sse_usage;
mod usage;

pub use body::ResponseBody;
pub use builder::RateLimitBuilder;
pub use estimate::{Estimate, EstimateFromBody, EstimateFromBodyLayer, EstimateFuture};
pub use future::ResponseFuture;
pub use handle::Handle;
pub use key_missing::KeyMissing;
pub use rate_limit_layer::RateLimitLayer;
pub use rule::Rule;
pub use service::RateLimit;
pub use settings::{
    CircuitBreaker, GrpcStatus, HeaderStyle, MissingKey, OnStoreError, RejectBody, Shadow,
};
pub use sse_usage::SseUsage;
pub use usage::BodyUsage;
