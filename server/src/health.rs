//! Health as envoyproxy/ratelimit reports it: healthy while every component is; the
//! components are Redis (the per-second Redis too, with `REDIS_PERSECOND`, as the Go service
//! watches both pools), the config (only with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`) and
//! SIGTERM (unhealthy from the signal on, so a load balancer stops sending before the listeners
//! drain). Served as `GET /healthcheck` and as the gRPC health service (`grpc.health.v1.Health`,
//! service names `""` and `ratelimit`).
//!
//! Redis is unhealthy until a probe (a decision on a key of its own, every second) is answered.
//! From then on, by default, it stays healthy: the Go service marks it healthy once its pool
//! has connected at start (`src/redis/driver_impl.go`) and never again looks, so a Redis outage
//! is answered by each domain's failure mode while every pod stays ready, and Kubernetes does
//! not restart them all at once. With `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION=true` health
//! follows Redis for good: unhealthy while a probe goes unanswered (within about two seconds),
//! healthy at the next answer; the Go service's pool trace turns it unhealthy when its last
//! connection closes and healthy when one opens.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redlimit::store::Store;
use redlimit::{Key, Limit, Policy};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The gRPC health service name the Go service registers.
const SERVICE_NAME: &str = "ratelimit";

/// How often Redis is probed, and how long a probe may take before Redis counts as down.
const PROBE_EVERY: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Which store a probe watches.
#[derive(Clone, Copy)]
enum Which {
    Main,
    PerSecond,
}

/// The components' states and where to report them.
#[derive(Clone)]
pub(crate) struct Health {
    inner: Arc<Inner>,
}

struct Inner {
    store_ok: AtomicBool,
    /// The per-second store's (healthy when there is none).
    per_second_ok: AtomicBool,
    config_ok: AtomicBool,
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: the stores' components follow every probe (else
    /// only the probes up to the first answer).
    follows_store: bool,
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: the config component follows whether the
    /// config in force has a domain (else it is always healthy).
    follows_config: bool,
    terminating: AtomicBool,
    reporter: HealthReporter,
    /// Taken to read the state and report it: the last report writes the last state, in
    /// whatever order the reports' tasks run.
    reporting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("healthy", &self.is_healthy())
            .finish()
    }
}

impl Health {
    /// Starts unhealthy until the store answers; with `follows_store`
    /// (`REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`), unhealthy again whenever it stops. With
    /// `follows_config` (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`) the config component is
    /// healthy while the config in force has a domain, starting with `has_domain` (the config
    /// at start); without, it always is.
    /// The gRPC health service reports the same from the start (tonic-health's own start is
    /// `SERVING`).
    pub(crate) async fn new(
        reporter: HealthReporter,
        follows_store: bool,
        follows_config: bool,
        has_domain: bool,
    ) -> Self {
        let health = Health {
            inner: Arc::new(Inner {
                store_ok: AtomicBool::new(false),
                per_second_ok: AtomicBool::new(true),
                config_ok: AtomicBool::new(has_domain || !follows_config),
                follows_store,
                follows_config,
                terminating: AtomicBool::new(false),
                reporter,
                reporting: tokio::sync::Mutex::new(()),
            }),
        };
        health.report().await;
        health
    }

    /// Whether every component is healthy.
    pub(crate) fn is_healthy(&self) -> bool {
        let inner = &self.inner;
        inner.store_ok.load(Ordering::Acquire)
            && inner.per_second_ok.load(Ordering::Acquire)
            && inner.config_ok.load(Ordering::Acquire)
            && !inner.terminating.load(Ordering::Acquire)
    }

    /// A config was put in force: with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, health
    /// follows whether it has a domain, as the Go service's does (a later config with none,
    /// an xDS server that sends an empty one, fails health again).
    pub(crate) fn config_applied(&self, has_domain: bool) {
        if self.inner.follows_config
            && self.inner.config_ok.swap(has_domain, Ordering::AcqRel) != has_domain
        {
            if has_domain {
                tracing::info!("a config with a domain is in force");
            } else {
                tracing::warn!("the config in force has no domain: /healthcheck fails");
            }
            self.publish();
        }
    }

    /// SIGTERM: unhealthy from now on.
    pub(crate) fn terminating(&self) {
        self.inner.terminating.store(true, Ordering::Release);
        self.publish();
    }

    fn set_store(&self, which: Which, ok: bool) {
        let (flag, name) = match which {
            Which::Main => (&self.inner.store_ok, "the store"),
            Which::PerSecond => (&self.inner.per_second_ok, "the per-second store"),
        };
        if flag.swap(ok, Ordering::AcqRel) != ok {
            if ok {
                tracing::info!("{name} answers");
            } else {
                tracing::warn!("{name} does not answer: /healthcheck fails");
            }
        }
        self.publish();
    }

    /// Reports the state to the gRPC health service, in a task of its own.
    fn publish(&self) {
        let health = self.clone();
        tokio::spawn(async move { health.report().await });
    }

    async fn report(&self) {
        let _turn = self.inner.reporting.lock().await;
        let status = if self.is_healthy() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in ["", SERVICE_NAME] {
            self.inner.reporter.set_service_status(name, status).await;
        }
    }

    /// Probes the store every second: one decision on a key of its own (so the probe takes the
    /// same road as a request: the topology, the scripts, the connection). For ever with
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`; else until it first answers.
    pub(crate) fn probe(&self, store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
        self.probe_store(Which::Main, store)
    }

    /// Probes the per-second store as [`probe`](Self::probe) does the main one: health fails
    /// from now until it answers, and while it does not.
    pub(crate) fn probe_per_second(&self, store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
        self.inner.per_second_ok.store(false, Ordering::Release);
        self.publish();
        self.probe_store(Which::PerSecond, store)
    }

    fn probe_store(&self, which: Which, store: Arc<dyn Store>) -> tokio::task::JoinHandle<()> {
        let health = self.clone();
        tokio::spawn(async move {
            let policy = match Limit::fixed_window(1_000_000, Duration::from_secs(1))
                .and_then(|limit| Policy::new("redlimit-server-health", [limit]))
            {
                Ok(policy) => policy,
                Err(e) => {
                    tracing::error!("the health probe's policy: {e}");
                    return;
                }
            };
            let key = Key::new("redlimit-server:health");
            let mut every = tokio::time::interval(PROBE_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let answered =
                    tokio::time::timeout(PROBE_TIMEOUT, store.check(&policy, &key, 1)).await;
                let answered = matches!(answered, Ok(Ok(_)));
                health.set_store(which, answered);
                if answered && !health.inner.follows_store {
                    tracing::info!(
                        "health follows Redis no longer (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION is not true): an outage is answered by each domain's failure mode"
                    );
                    return;
                }
            }
        })
    }
}
