//! The layer: the settings every service it wraps shares, and the cell a handle steers.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::builder::RateLimitBuilder;
use super::decide::Decider;
use super::handle::Handle;
use super::layer_settings::LayerSettings;
use super::layer_state::LayerState;
use crate::policy::Policy;
use crate::store::Store;

/// Applies a rate-limit [`Policy`] to every request of the wrapped service, or a policy per
/// route ([`Rule`](super::Rule)).
///
/// Defaults: key = the socket peer IP ([`PeerIp`](crate::key::PeerIp)); cost 1;
/// `X-RateLimit-*` headers; if the store errs, takes longer than 100 ms or its circuit is
/// open, limiting goes on in memory ([`OnStoreError::Local`](super::OnStoreError::Local)).
/// Made by a [`RateLimitBuilder`] ([`builder`](Self::builder),
/// [`builder_per_route`](Self::builder_per_route)), then immutable. Cheap to clone; every
/// service made from one layer (and every clone) shares one policy and one store, so they
/// share one limit, and one [`Handle`] steers them all.
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
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
///     .key(Header::new("x-api-key")?)
///     .build()?;
/// let app: Router = Router::new()
///     .route("/token", post(|| async { "token" }))
///     .layer(layer);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<LayerState>,
}

impl RateLimitLayer {
    /// A builder of a layer enforcing `policy` in `store` on every request no
    /// [`rule`](RateLimitBuilder::rule) matches, keyed by the socket peer's IP until
    /// [`key`](RateLimitBuilder::key) says otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::Header;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
    ///     .key(Header::new("x-api-key")?)
    ///     .store_deadline(Duration::from_millis(50))
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn builder(store: impl Store, policy: Policy) -> RateLimitBuilder {
        RateLimitBuilder::new(LayerSettings::new(crate::store::shared(store)).with_default(policy))
    }

    /// A builder of a layer with no policy of its own: only requests matching one of its
    /// [`rule`](RateLimitBuilder::rule)s are limited, each by its rule's policy and key. One
    /// layer on a whole router can so give every endpoint its own limit (as `route_layer` per
    /// route would).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::key::Header;
    /// use redlimit::layer::Rule;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    ///
    /// let login = Policy::new("login", [Limit::sliding_log(5, Duration::from_secs(60))?])?;
    /// let api = Policy::new("api", [Limit::gcra(1000, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
    ///     .rule(Rule::new("POST /login", login)?)
    ///     .rule(Rule::new("/v1/*", api)?.key(Header::new("x-api-key")?))
    ///     .build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn builder_per_route(store: impl Store) -> RateLimitBuilder {
        RateLimitBuilder::new(LayerSettings::new(crate::store::shared(store)))
    }

    /// A layer enforcing `policy` in `store` with every default: a shortcut for
    /// `RateLimitLayer::builder(store, policy).build()`, which cannot fail.
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
        RateLimitLayer::from_settings(
            LayerSettings::new(crate::store::shared(store)).with_default(policy),
        )
    }

    /// The decider in force (for the decider's unit tests).
    #[cfg(test)]
    pub(super) fn decider(&self) -> Arc<Decider> {
        self.shared.decider()
    }

    /// The cell of the decider in force, which every service made from this layer reads.
    pub(super) fn decider_cell(&self) -> Arc<ArcSwap<Decider>> {
        Arc::clone(self.shared.cell())
    }

    pub(super) fn from_settings(config: LayerSettings) -> Self {
        RateLimitLayer {
            shared: Arc::new(LayerState::new(config)),
        }
    }

    /// The handle of this layer, of its clones and of every service made from them: inspect
    /// and reset keys, set overrides, replace the rules. Take it whenever: the layer never
    /// changes after [`build`](RateLimitBuilder::build), so a handle cannot steer a stale copy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::{Limit, Policy, RateLimitLayer};
    /// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), policy);
    /// let handle = layer.handle();
    /// assert_eq!(handle.policy_named("api").unwrap().name(), "api");
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn handle(&self) -> Handle {
        Handle::new(Arc::clone(&self.shared))
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = self.shared.config();
        f.debug_struct("RateLimitLayer")
            .field("policy", &config.default.as_ref().map(|rule| &rule.policy))
            .field("rules", &config.routes.len())
            .field("on_store_error", &config.on_store_error)
            .field("deadline", &config.engine.deadline())
            .finish_non_exhaustive()
    }
}
