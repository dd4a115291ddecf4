//! Envoy's Rate Limit Quota Service (RLQS v3):
//! `envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas`, the
//! server of Envoy's `envoy.filters.http.rate_limit_quota` filter, with one quota per bucket
//! shared by the whole fleet of gateways and of server instances.
//!
//! With RLQS the gateway decides every request itself, from a token bucket this service
//! assigns it per bucket, and reports its usage per bucket periodically: no call on the
//! request's path. This service:
//!
//! - takes the **domain** from a stream's first report, and a **bucket**'s first report as a
//!   watch: its first assignment is pushed at once (after one sync with the fleet's store when
//!   the bucket is new to this instance);
//! - finds each bucket's **rule** in the domain's descriptor tree of envoyproxy/ratelimit's
//!   YAML ([`RlsDomain::find_unordered`](crate::rls::config::RlsDomain::find_unordered)): a
//!   `rate_limit` is the fleet-wide rate of that bucket (each distinct `BucketId` its own
//!   quota; of several `rate_limits` the lowest rate); `requests_per_unit: 0` is
//!   `blanket_rule: DENY_ALL`; `unlimited`, `shadow_mode` and no rule are `ALLOW_ALL`;
//! - measures each stream's **demand** per bucket (admitted and denied requests per second)
//!   on its own clock (Envoy's `time_elapsed` is whole seconds, and 0 at first), but takes a
//!   reconnecting client's first report (usage since its last report, `time_elapsed` ≥ 1 s)
//!   as its demand at once; its earlier report intervals are kept, weighed less, through
//!   Poisson noise, and dropped on a shift (3 standard deviations);
//! - every **sync interval**, makes one call per bucket to the fleet's store (Redis:
//!   `lua/rlqs_sync.lua`, one key per bucket) with this instance's demand, and reads back every
//!   live instance's (and what their clients admit): the bucket's rate is split among the
//!   instances by demand (max-min fairness with a minimum share), then this instance's part
//!   among its streams the same way, in whole tokens that sum to the limit; then a stream
//!   below its fair part gets headroom over its demand (Poisson arrivals through a bucket
//!   refilled at their mean rate lose 10–20 % of it), and the others a slow correction closed
//!   on what the fleet admitted, so that the fleet's *expected* admission is the limit: the
//!   shares sum to at most 1.25 times it;
//! - assigns each stream a **`token_bucket`** (never `requests_per_time_unit`, which Envoy does
//!   not enforce): `tokens_per_fill` over a whole-second `fill_interval` (lengthened for a small
//!   limit so that it splits into at least 1000 tokens), `max_tokens` half a second of the
//!   share ([`burst`](RlqsServiceBuilder::burst), at least 3, and 10 below the fair part; a
//!   fifth of it before the stream's demand is measured, since Envoy starts a bucket full);
//!   pushed again only when it moves materially (3 %, and 2 tokens, or twice or half as deep),
//!   since Envoy replaces the limiter on every change, and re-sent unchanged at half its TTL
//!   to extend it (`assignment_time_to_live`, whole seconds);
//! - sends `abandon_action` for a bucket a stream reported no usage of for the idle timeout;
//! - on [`shutdown`](RlqsService::shutdown), sends every stream its buckets with TTL 0 and
//!   ends the streams;
//! - ends a stream with `INVALID_ARGUMENT` for a first report with no domain, a bucket with no
//!   id, an empty id, key or value, or an id over
//!   [`max_bucket_id_bytes`](RlqsServiceBuilder::max_bucket_id_bytes), and
//!   `RESOURCE_EXHAUSTED` past [`max_buckets_per_stream`](RlqsServiceBuilder::max_buckets_per_stream).
//!
//! While the fleet's store cannot be reached an instance assigns from the last view it read,
//! with its own demand now, never more than the share it last had; a bucket it never synced
//! gets the limit divided by the most instances it has seen. The next sync that succeeds
//! merges it back. The accuracy is bounded by one sync interval (shares follow demand an
//! interval late) and by each client's report interval (Envoy: 5 s).
//!
//! Metrics (feature `metrics`): [`metrics::STREAMS`], [`metrics::BUCKETS`],
//! [`metrics::ASSIGNMENTS`], [`metrics::REPORTS`], [`metrics::REQUESTS`],
//! [`metrics::SYNC_ERRORS`].
//!
//! ```
//! use redlimit::rlqs::RlqsService;
//! use redlimit::rls::config::RlsConfig;
//!
//! let config = RlsConfig::parse([("quota.yaml", "
//! domain: edge
//! descriptors:
//!   - key: tenant
//!     rate_limit: {unit: second, requests_per_unit: 100}
//! ")], false)?;
//! // Alone: this instance holds each bucket's whole rate. `.redis(store)` shares it with
//! // every instance on that Redis.
//! let service = RlqsService::builder().config(config).build()?;
//! let _server = service.clone().into_server(); // mount it in a tonic server
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assign;
mod bucket_id;
mod demand;
mod expect;
mod fleet;
mod ghost;
mod hub;
pub mod metrics;
mod quota;
mod share;
mod stream;
mod tick;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use crate::error::ConfigError;
use crate::rls::config::RlsConfig;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaServiceServer;
use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

pub use stream::ResponseStream;

use fleet::Fleet;
use hub::Hub;

/// The default `assignment_time_to_live`.
pub const DEFAULT_ASSIGNMENT_TTL: Duration = Duration::from_secs(15);
/// The default sync interval with the fleet's store.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// The default idle time after which a stream's bucket is abandoned.
pub const DEFAULT_BUCKET_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The default most buckets one stream may watch.
pub const DEFAULT_MAX_BUCKETS_PER_STREAM: usize = 10_000;
/// The default burst of an assignment: `max_tokens` holds this much of its share's rate.
pub const DEFAULT_BURST: Duration = Duration::from_millis(500);
/// The default largest `BucketId` (its protobuf encoding), in bytes.
pub const DEFAULT_MAX_BUCKET_ID_BYTES: usize = 4096;

/// The service's settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) assignment_ttl: Duration,
    pub(crate) sync_interval: Duration,
    pub(crate) bucket_idle_timeout: Duration,
    pub(crate) max_buckets_per_stream: usize,
    pub(crate) max_bucket_id_bytes: usize,
    pub(crate) burst: Duration,
}

/// The RLQS service; cloning is cheap and every clone is the same service (one state).
/// Mount [`into_server`](Self::into_server) in a tonic server.
#[derive(Debug, Clone)]
pub struct RlqsService {
    hub: Arc<Hub>,
}

impl RlqsService {
    /// Starts configuring a service.
    ///
    /// ```
    /// let service = redlimit::rlqs::RlqsService::builder().build()?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn builder() -> RlqsServiceBuilder {
        RlqsServiceBuilder::default()
    }

    /// The tonic service to mount.
    pub fn into_server(self) -> RateLimitQuotaServiceServer<RlqsService> {
        RateLimitQuotaServiceServer::new(self)
    }

    /// Replaces the rules: each bucket's quota is read again at the next sync round.
    ///
    /// ```
    /// use redlimit::{rlqs::RlqsService, rls::config::RlsConfig};
    /// let service = RlqsService::builder().build()?;
    /// service.reload(RlsConfig::parse([("d.yaml", "domain: d\n")], false)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reload(&self, config: RlsConfig) {
        self.hub.config.store(Arc::new(config));
    }

    /// A graceful shutdown: every open stream is sent each bucket it watches with
    /// `assignment_time_to_live` 0 (Envoy then applies its `expired_assignment_behavior`), and
    /// ends; new streams are refused with `UNAVAILABLE`. Answers how many streams were told.
    ///
    /// ```
    /// let service = redlimit::rlqs::RlqsService::builder().build()?;
    /// assert_eq!(service.shutdown(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn shutdown(&self) -> usize {
        let mut state = self.hub.lock();
        state.closed = true;
        let streams = std::mem::take(&mut state.streams);
        let mut told = 0;
        for stream in streams.into_values() {
            let actions: Vec<_> = stream
                .watches
                .iter()
                .filter_map(|(key, watch)| {
                    let bucket = state.buckets.get(key)?;
                    let strategy = watch
                        .pushed
                        .map(|(strategy, _)| strategy)
                        .unwrap_or_else(|| quota::blanket(BlanketRule::AllowAll));
                    Some(assign::assignment(bucket.bucket.id.clone(), strategy, 0))
                })
                .collect();
            metrics::expire(actions.len());
            if !actions.is_empty() {
                let _ = stream.outbox.send(Ok(RateLimitQuotaResponse {
                    bucket_action: actions,
                }));
            }
            told += 1;
        }
        state.buckets.clear();
        metrics::streams(0);
        metrics::buckets(0);
        drop(state);
        self.hub.closing.send_replace(true);
        told
    }
}

/// Settings for an [`RlqsService`].
#[derive(Debug, Clone)]
pub struct RlqsServiceBuilder {
    config: RlsConfig,
    fleet: Fleet,
    settings: Settings,
    instance: Option<String>,
}

impl Default for RlqsServiceBuilder {
    fn default() -> Self {
        RlqsServiceBuilder {
            config: RlsConfig::default(),
            fleet: Fleet::Alone,
            settings: Settings {
                assignment_ttl: DEFAULT_ASSIGNMENT_TTL,
                sync_interval: DEFAULT_SYNC_INTERVAL,
                bucket_idle_timeout: DEFAULT_BUCKET_IDLE_TIMEOUT,
                max_buckets_per_stream: DEFAULT_MAX_BUCKETS_PER_STREAM,
                max_bucket_id_bytes: DEFAULT_MAX_BUCKET_ID_BYTES,
                burst: DEFAULT_BURST,
            },
            instance: None,
        }
    }
}

impl RlqsServiceBuilder {
    /// The rules (envoyproxy/ratelimit's YAML, as [`rls`](crate::rls) reads it); none by
    /// default, so every bucket is `ALLOW_ALL` until [`reload`](RlqsService::reload).
    pub fn config(mut self, config: RlsConfig) -> Self {
        self.config = config;
        self
    }

    /// Shares every bucket's quota with the other instances on this Redis (its prefix names
    /// the keys: `PREFIX:rlqs:DIGEST`, one hash per bucket). Without it this instance is alone.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis(mut self, store: crate::store::RedisStore) -> Self {
        self.fleet = Fleet::Redis(store);
        self
    }

    /// `assignment_time_to_live` of every assignment, in whole seconds (rounded down, at least
    /// 1: Envoy reads the seconds alone); [`DEFAULT_ASSIGNMENT_TTL`] by default.
    pub fn assignment_ttl(mut self, ttl: Duration) -> Self {
        self.settings.assignment_ttl = ttl;
        self
    }

    /// How often this instance syncs each bucket with the fleet and re-decides the shares;
    /// [`DEFAULT_SYNC_INTERVAL`] by default.
    pub fn sync_interval(mut self, interval: Duration) -> Self {
        self.settings.sync_interval = interval;
        self
    }

    /// A stream's bucket with no usage reported for this long is abandoned;
    /// [`DEFAULT_BUCKET_IDLE_TIMEOUT`] by default.
    pub fn bucket_idle_timeout(mut self, idle: Duration) -> Self {
        self.settings.bucket_idle_timeout = idle;
        self
    }

    /// The most buckets one stream may watch ([`DEFAULT_MAX_BUCKETS_PER_STREAM`]); one more
    /// ends it with `RESOURCE_EXHAUSTED`.
    pub fn max_buckets_per_stream(mut self, max: usize) -> Self {
        self.settings.max_buckets_per_stream = max;
        self
    }

    /// The largest `BucketId`, its protobuf encoding in bytes
    /// ([`DEFAULT_MAX_BUCKET_ID_BYTES`]); a larger one ends the stream with `INVALID_ARGUMENT`.
    pub fn max_bucket_id_bytes(mut self, max: usize) -> Self {
        self.settings.max_bucket_id_bytes = max;
        self
    }

    /// How much of its share's rate an assignment's bucket holds (`max_tokens`, at least 3):
    /// what a client may admit at once after a quiet spell, and, where Envoy starts a changed
    /// assignment's bucket full, the most one change lets through over the rate.
    /// [`DEFAULT_BURST`] (half a second) by default: the fleet's admissions in any second stay
    /// within half a second of its limit over it, while Poisson arrivals at a client's share
    /// rarely find its bucket empty.
    pub fn burst(mut self, burst: Duration) -> Self {
        self.settings.burst = burst;
        self
    }

    /// This instance's name in the fleet's store (unique per running instance); a random one
    /// by default.
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.instance = Some(name.into());
        self
    }

    /// The service; a [`ConfigError::InvalidSetting`] for a zero sync interval or idle
    /// timeout, a TTL under 1 s, or a zero bound.
    pub fn build(self) -> Result<RlqsService, ConfigError> {
        let s = &self.settings;
        let bad = |setting: &'static str, value: String, expected: &'static str| {
            Err(ConfigError::InvalidSetting {
                setting,
                value,
                expected,
            })
        };
        if s.sync_interval.is_zero() {
            return bad("RLQS sync interval", "0s".into(), "a positive duration");
        }
        if s.assignment_ttl < Duration::from_secs(1) {
            let value = format!("{:?}", s.assignment_ttl);
            return bad(
                "RLQS assignment TTL",
                value,
                "1s or more (Envoy reads whole seconds)",
            );
        }
        if s.bucket_idle_timeout.is_zero() {
            return bad(
                "RLQS bucket idle timeout",
                "0s".into(),
                "a positive duration",
            );
        }
        if s.max_buckets_per_stream == 0 {
            return bad("RLQS max buckets per stream", "0".into(), "1 or more");
        }
        if s.max_bucket_id_bytes == 0 {
            return bad("RLQS max BucketId bytes", "0".into(), "1 or more");
        }
        let instance = self.instance.unwrap_or_else(random_instance);
        Ok(RlqsService {
            hub: Arc::new(Hub::new(self.settings, self.config, self.fleet, instance)),
        })
    }
}

/// A name no other running instance has: the process id and a random number.
fn random_instance() -> String {
    use std::hash::BuildHasher;
    let random = foldhash::fast::RandomState::default().hash_one(std::time::SystemTime::now());
    format!("{}-{random:016x}", std::process::id())
}
