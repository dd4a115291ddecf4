//! [`RateLimitService`]: `ShouldRateLimit` over a store, with a configuration a reload swaps.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tonic::{Request, Response, Status};

use super::FailureMode;
use super::HashTag;
use super::LimitHeaders;
use super::RateLimitServiceBuilder;
use super::config::{RlsConfig, Unit};
use super::failure_mode::Modes;
use super::fallback::failed;
use super::live_overrides::{LiveOverrides, domain_key, read_first};
use super::metadata::dynamic_metadata;
use super::plan::plan;
use super::proto::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use super::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use super::respond::{Global, respond, unknown_domain};
use super::run::{Runner, Via};
use super::settle::{self, SettleKey};
use super::stats;
use crate::engine::{self, Engine, Rule};
use crate::error::StoreError;
use crate::response::HeaderStyle;
use crate::store::{Commit, Store};

/// Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`) over a
/// [`Store`]: mount [`into_server`](Self::into_server) in a tonic server, beside your own
/// services. Clones share the store, the configuration, the circuit breakers, the deny cache and
/// the local fallback: the engine the layer decides with, this service its
/// front for Envoy's protocol.
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
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) shared: engine::Shared,
    /// The per-second store's (`REDIS_PERSECOND`): counters of unit `second` live there.
    pub(super) per_second: Option<engine::Shared>,
    pub(super) generation: ArcSwap<Generation>,
    /// Each domain's failure mode.
    pub(super) modes: Modes,
    pub(super) headers: HeaderStyle,
    pub(super) global_shadow: bool,
    /// `QUOTA_MODE`: every descriptor in quota mode.
    pub(super) global_quota: bool,
    /// `RESPONSE_DYNAMIC_METADATA`.
    pub(super) dynamic_metadata: bool,
    pub(super) max_descriptors: usize,
    pub(super) near_limit_ratio: f64,
    pub(super) limit_headers: Option<LimitHeaders>,
    /// The hash tag of domains without their own.
    pub(super) hash_tag: HashTag,
    /// How hits are counted: every one landing, or all or none.
    pub(super) commit: Commit,
    /// Signs and checks the receipts of reservations.
    pub(super) settle_key: SettleKey,
}

/// One configuration and the engine that decides by it, a rule per domain (its position in
/// the configuration; its failure mode): a reload makes both anew (a cached denial belongs to
/// the limits it was made under), keeping the breakers and the fallback's counts.
pub(super) struct Generation {
    pub(super) config: Arc<RlsConfig>,
    pub(super) engine: Engine,
    /// The per-second store's engine, with a deny cache of its own.
    pub(super) per_second: Option<Engine>,
}

impl Generation {
    pub(super) fn new(
        shared: &engine::Shared,
        per_second: Option<&engine::Shared>,
        config: Arc<RlsConfig>,
        modes: &Modes,
    ) -> Self {
        // Each limit's script is loaded ahead into the store that will run it: otherwise the
        // first check of each after a start or a reload pays a `NOSCRIPT` and a reload, two more
        // round trips, which with Redis 10 ms away is past the store deadline (a request's
        // combined script of several limits is still loaded on first use).
        let limits = config
            .domains()
            .flat_map(|d| d.rules())
            .flat_map(|r| r.limits());
        for limit in limits {
            let Some(policy) = limit.policy() else {
                continue;
            };
            match per_second {
                Some(per_second) if limit.unit() == Unit::Second => {
                    per_second.store().prepare(policy);
                }
                _ => shared.store().prepare(policy),
            }
        }
        let rules = || {
            config
                .domains()
                .map(|domain| Rule::keyed(domain.name(), modes.of(&config, domain.name())))
        };
        Generation {
            engine: Engine::new(shared, rules()),
            per_second: per_second.map(|shared| Engine::new(shared, rules())),
            config,
        }
    }
}

impl Inner {
    /// The failure mode of `domain`: the builder's for it, else its configuration's, else the
    /// service's.
    pub(super) fn mode(&self, config: &RlsConfig, domain: &str) -> FailureMode {
        self.modes.of(config, domain)
    }

    /// The hash tag of `domain`: its configuration's, else the service's.
    pub(super) fn hash_tag(&self, config: &RlsConfig, domain: &str) -> HashTag {
        config
            .domain(domain)
            .and_then(|d| d.hash_tag)
            .unwrap_or(self.hash_tag)
    }
}

impl fmt::Debug for RateLimitService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("store", &self.inner.shared.store().kind())
            .field(
                "per_second_store",
                &self.inner.per_second.as_ref().map(|s| s.store().kind()),
            )
            .field("deadline", &self.inner.shared.deadline())
            .field("on_store_error", &self.inner.modes.default)
            .field("headers", &self.inner.headers)
            .field("global_shadow", &self.inner.global_shadow)
            .field("hash_tag", &self.inner.hash_tag)
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
        RateLimitServiceBuilder::new(crate::store::shared(store))
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
        let generation = Generation::new(
            &self.inner.shared,
            self.inner.per_second.as_ref(),
            Arc::new(config),
            &self.inner.modes,
        );
        self.inner.generation.store(Arc::new(generation));
    }

    /// The configuration in force.
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// assert!(service.config().is_empty());
    /// ```
    pub fn config(&self) -> Arc<RlsConfig> {
        Arc::clone(&self.inner.generation.load().config)
    }

    /// The failure mode of `domain` in force: the builder's for it, else its configuration's
    /// `on_store_error`, else the service's.
    ///
    /// ```
    /// use redlimit::rls::{config::RlsConfig, FailureMode, RateLimitService};
    /// let config = RlsConfig::parse([("d.yaml", "domain: d\non_store_error: open\n")], false)?;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .config(config)
    ///     .build();
    /// assert_eq!(service.failure_mode("d"), FailureMode::Open);
    /// assert_eq!(service.failure_mode("other"), FailureMode::Unavailable);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn failure_mode(&self, domain: &str) -> FailureMode {
        self.inner.mode(&self.config(), domain)
    }

    /// The hash tag of `domain` in force: its configuration's `hash_tag`, else the service's.
    ///
    /// ```
    /// use redlimit::rls::{config::RlsConfig, HashTag, RateLimitService};
    /// let config = RlsConfig::parse([("d.yaml", "domain: d\nhash_tag: descriptor\n")], false)?;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .config(config)
    ///     .build();
    /// assert_eq!(service.hash_tag("d"), HashTag::Descriptor);
    /// assert_eq!(service.hash_tag("other"), HashTag::Domain);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn hash_tag(&self, domain: &str) -> HashTag {
        self.inner.hash_tag(&self.config(), domain)
    }

    /// Answers one `ShouldRateLimit` request (what the gRPC service calls): a request that is
    /// not valid is `INVALID_ARGUMENT`; a store that fails, is late past the store deadline, or
    /// whose circuit is open gets the domain's [`FailureMode`] (by default `UNAVAILABLE`, so
    /// that Envoy's `failure_mode_deny` decides).
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
        mut request: RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let inner = &*self.inner;
        // The reserve and settle entries come off before the descriptors are matched.
        let marks = settle::take(&mut request, &inner.settle_key);
        let generation = inner.generation.load_full();
        let config = &generation.config;
        let deadline = inner.shared.deadline();
        let until = tokio::time::Instant::now() + deadline;
        let store = &**inner.shared.store();
        let mut runtime = LiveOverrides::of(store);
        let planned = plan(
            config,
            &request,
            inner.max_descriptors,
            &runtime,
            inner.hash_tag,
        )
        .inspect_err(|_| {
            stats::error("service_error");
        })?;
        let Some(mut plan) = planned else {
            stats::domain_not_found(&request.domain, request.descriptors.len());
            let mut response = unknown_domain(request.descriptors.len());
            if inner.dynamic_metadata {
                response.dynamic_metadata =
                    Some(dynamic_metadata(config, &request, None, &response.statuses));
            }
            return Ok(response);
        };
        if inner.global_quota {
            quota_mode_everywhere(&mut plan);
        }
        // Within the store deadline, as any store call: past it, the failure mode. A request
        // without counters (unmatched or unlimited descriptors) has nothing an override can
        // change and never waits for the store.
        let first = if plan.counters.is_empty() {
            Ok(false)
        } else {
            match tokio::time::timeout_at(until, read_first(store)).await {
                Ok(read) => read,
                Err(_) => Err(StoreError::Timeout(deadline)),
            }
        };
        if let Ok(true) = first {
            runtime = LiveOverrides::of(store);
            // The same request and configuration: valid, and of a known domain, again.
            if let Some(again) =
                super::plan::plan(config, &request, usize::MAX, &runtime, inner.hash_tag)?
            {
                plan = again;
                if inner.global_quota {
                    quota_mode_everywhere(&mut plan);
                }
            }
        }
        let via = Via::Engine {
            engine: &generation.engine,
            per_second: generation.per_second.as_ref(),
            until,
        };
        // A settlement is a cost incurred: it lands whatever the service's mode.
        let commit = if marks.settles() {
            Commit::Always
        } else {
            inner.commit
        };
        let runner = Runner { via, commit };
        let ran = match first {
            Ok(_) => runner.run(&plan).await,
            Err(error) => Err(error),
        };
        let (results, receipt) = match ran {
            Ok(results) => {
                runner.give_back(&marks, &plan);
                let receipt = settle::receipt(&marks, &request, &plan, &results, &inner.settle_key);
                (results, receipt)
            }
            Err(error) => {
                stats::error("redis_error");
                let results = failed(&generation.engine, &plan, inner.commit, &error).await?;
                (results, None)
            }
        };
        // Shadow mode set for the domain through the admin API wins over the service's.
        let shadow = runtime
            .active()
            .then(|| runtime.shadow(&domain_key(&request.domain)))
            .flatten()
            .unwrap_or(inner.global_shadow);
        let global = Global {
            shadow,
            quota: inner.global_quota,
        };
        let mut response = respond(
            &plan,
            &results,
            global,
            inner.headers,
            inner.near_limit_ratio,
        );
        if let Some(names) = &inner.limit_headers {
            response
                .response_headers_to_add
                .extend(names.render(&response.statuses));
        }
        if inner.dynamic_metadata {
            response.dynamic_metadata = Some(dynamic_metadata(
                config,
                &request,
                Some(&plan),
                &response.statuses,
            ));
        }
        if let Some(receipt) = receipt {
            let metadata = response
                .dynamic_metadata
                .get_or_insert_with(Default::default);
            metadata.fields.insert(
                settle::RECEIPT_FIELD.to_owned(),
                prost_types::Value {
                    kind: Some(prost_types::value::Kind::StringValue(receipt)),
                },
            );
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

/// `QUOTA_MODE`: every enforced descriptor is a quota one (shadow ones stay shadow: always OK),
/// so each is counted on its own and the request is over only when all are.
fn quota_mode_everywhere(plan: &mut super::plan::Plan) {
    for resolved in &mut plan.descriptors {
        if let super::plan::Resolved::Limited { mode, .. } = resolved
            && *mode == super::plan::Mode::Enforce
        {
            *mode = super::plan::Mode::Quota;
        }
    }
}
