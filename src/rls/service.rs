//! [`RateLimitService`]: `ShouldRateLimit` over a store, with a configuration a reload swaps.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tonic::{Request, Response, Status};

use super::LimitHeaders;
use super::RateLimitServiceBuilder;
use super::config::RlsConfig;
use super::plan::plan;
use super::proto::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::respond::{respond, unknown_domain};
use super::run::Runner;
use super::stats;
use crate::engine::breakers::Breakers;
use crate::layer::HeaderStyle;
use crate::store::Store;

/// Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`) over a
/// [`Store`]: mount [`into_server`](Self::into_server) in a tonic server, beside your own
/// services. Clones share the store, the configuration and the circuit breakers.
///
/// ```
/// use redlimit::rls::{config::RlsConfig, RateLimitService};
/// use redlimit::store::MemoryStore;
///
/// let config = RlsConfig::parse([("envoy.yaml", "
/// domain: envoy
/// descriptors:
///   - key: remote_address
///     rate_limit: {unit: second, requests_per_unit: 10}
/// ")], false)?;
/// let service = RateLimitService::builder(MemoryStore::new()).config(config).build();
/// let server = service.clone().into_server();
/// // tonic::transport::Server::builder().add_service(server).serve(addr).await?;
/// # let _ = server;
/// // A reload (a changed file) swaps the rules for every clone at once:
/// service.reload(RlsConfig::default());
/// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
/// ```
#[derive(Clone)]
pub struct RateLimitService {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) store: Arc<dyn Store>,
    pub(super) config: ArcSwap<RlsConfig>,
    pub(super) breakers: Breakers,
    pub(super) deadline: Duration,
    pub(super) headers: HeaderStyle,
    pub(super) global_shadow: bool,
    pub(super) max_descriptors: usize,
    pub(super) near_limit_ratio: f64,
    pub(super) limit_headers: Option<LimitHeaders>,
}

impl fmt::Debug for RateLimitService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("store", &self.inner.store.kind())
            .field("deadline", &self.inner.deadline)
            .field("headers", &self.inner.headers)
            .field("global_shadow", &self.inner.global_shadow)
            .finish_non_exhaustive()
    }
}

impl RateLimitService {
    /// A builder over `store`; see [`RateLimitServiceBuilder`] for the settings and defaults.
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// ```
    pub fn builder(store: impl Store) -> RateLimitServiceBuilder {
        RateLimitServiceBuilder::new(Arc::new(store))
    }

    pub(super) fn from_inner(inner: Inner) -> Self {
        RateLimitService {
            inner: Arc::new(inner),
        }
    }

    /// The tonic service to mount (`Server::builder().add_service(...)`).
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// let server = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .build()
    ///     .into_server();
    /// ```
    pub fn into_server(self) -> RateLimitServiceServer<RateLimitService> {
        RateLimitServiceServer::new(self)
    }

    /// Replaces the configuration for every clone; requests under way finish with the one
    /// they started with.
    ///
    /// ```
    /// use redlimit::rls::{config::RlsConfig, RateLimitService};
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// service.reload(RlsConfig::parse([("d.yaml", "domain: d\n")], false)?);
    /// assert!(service.config().domain("d").is_some());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn reload(&self, config: RlsConfig) {
        self.inner.config.store(Arc::new(config));
    }

    /// The configuration in force.
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// assert!(service.config().is_empty());
    /// ```
    pub fn config(&self) -> Arc<RlsConfig> {
        self.inner.config.load_full()
    }

    /// Answers one `ShouldRateLimit` request (what the gRPC service calls): a request that is
    /// not valid is `INVALID_ARGUMENT`; a store that fails, is late past the store deadline, or
    /// whose circuit is open is `UNAVAILABLE`, so that Envoy's `failure_mode_deny` decides.
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// let status = service.should_rate_limit(RateLimitRequest::default()).await.unwrap_err();
    /// assert_eq!(status.code(), tonic::Code::InvalidArgument);
    /// # });
    /// ```
    pub async fn should_rate_limit(
        &self,
        request: RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let inner = &*self.inner;
        let config = inner.config.load();
        let planned = plan(&config, &request, inner.max_descriptors).inspect_err(|_| {
            stats::error("service_error");
        })?;
        let Some(plan) = planned else {
            return Ok(unknown_domain(request.descriptors.len()));
        };
        drop(config);
        let runner = Runner {
            store: &inner.store,
            breakers: &inner.breakers,
            deadline: inner.deadline,
            until: tokio::time::Instant::now() + inner.deadline,
        };
        let results = runner.run(&plan).await.map_err(|error| {
            stats::error("redis_error");
            Status::unavailable(format!("rate limit store: {error}"))
        })?;
        let mut response = respond(
            &plan,
            &results,
            inner.global_shadow,
            inner.headers,
            inner.near_limit_ratio,
        );
        if let Some(names) = &inner.limit_headers {
            response
                .response_headers_to_add
                .extend(names.render(&response.statuses));
        }
        Ok(response)
    }
}

#[tonic::async_trait]
impl Rls for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        RateLimitService::should_rate_limit(self, request.into_inner())
            .await
            .map(Response::new)
    }
}
