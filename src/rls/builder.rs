//! [`RateLimitServiceBuilder`]: the settings of a [`RateLimitService`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::config::RlsConfig;
use super::failure_mode::Modes;
use super::service::{Generation, Inner, RateLimitService};
use super::settle::SettleKey;
use super::{FailureMode, HashTag, LimitHeaders};
use crate::engine::{self, Late};
use crate::failure::CircuitBreaker;
use crate::response::HeaderStyle;
use crate::store::{Commit, Store};

/// The default store deadline: well under Envoy's default RLS timeout of 20 ms, so that a slow
/// store gets the domain's [`FailureMode`] (by default `UNAVAILABLE`, and Envoy's
/// `failure_mode_deny` decides) before Envoy gives up.
pub const DEFAULT_RLS_DEADLINE: Duration = Duration::from_millis(15);

/// The default most descriptors a request may carry.
pub const DEFAULT_MAX_DESCRIPTORS: usize = 64;

/// The default share of a limit past which hits count as near it (envoyproxy/ratelimit's
/// `NEAR_LIMIT_RATIO` default).
pub const DEFAULT_NEAR_LIMIT_RATIO: f64 = 0.8;

/// Builds a [`RateLimitService`]: `RateLimitService::builder(store)`.
///
/// ```
/// use std::time::Duration;
/// use redlimit::response::HeaderStyle;
/// use redlimit::rls::RateLimitService;
///
/// let service = RateLimitService::builder(redlimit::store::MemoryStore::new())
///     .store_deadline(Duration::from_millis(10))
///     .response_headers(HeaderStyle::Both)
///     .build();
/// ```
#[must_use]
pub struct RateLimitServiceBuilder {
    store: Arc<dyn Store>,
    per_second: Option<Arc<dyn Store>>,
    config: RlsConfig,
    /// The engine's settings: the deadline, the breaker, the deny cache, the calls in flight.
    engine: engine::Settings,
    headers: HeaderStyle,
    global_shadow: bool,
    global_quota: bool,
    dynamic_metadata: bool,
    max_descriptors: usize,
    near_limit_ratio: f64,
    limit_headers: Option<LimitHeaders>,
    on_store_error: FailureMode,
    domain_modes: HashMap<String, FailureMode>,
    hash_tag: HashTag,
    commit: Commit,
    settle_key: SettleKey,
}

impl std::fmt::Debug for RateLimitServiceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitServiceBuilder")
            .field("store", &self.store.kind())
            .field("deadline", &self.engine.deadline)
            .finish_non_exhaustive()
    }
}

impl RateLimitServiceBuilder {
    pub(super) fn new(store: Arc<dyn Store>) -> Self {
        RateLimitServiceBuilder {
            store,
            per_second: None,
            config: RlsConfig::default(),
            engine: engine::Settings {
                // Envoy bounds what waits on this service (its own timeout); the call budget
                // is the operator's choice, off by default: a request is never refused for it.
                max_calls: None,
                late: Late::ByMode,
                ..engine::Settings::new(DEFAULT_RLS_DEADLINE)
            },
            headers: HeaderStyle::None,
            global_shadow: false,
            global_quota: false,
            dynamic_metadata: false,
            max_descriptors: DEFAULT_MAX_DESCRIPTORS,
            near_limit_ratio: DEFAULT_NEAR_LIMIT_RATIO,
            limit_headers: None,
            on_store_error: FailureMode::default(),
            domain_modes: HashMap::new(),
            hash_tag: HashTag::Domain,
            commit: Commit::Always,
            settle_key: SettleKey::random(),
        }
    }

    /// The domains and their rules (default: none, so every request's domain is unknown and
    /// every descriptor OK). [`RateLimitService::reload`] replaces it later.
    ///
    /// ```
    /// use redlimit::rls::{config::RlsConfig, RateLimitService};
    /// let config = RlsConfig::parse([("d.yaml", "domain: d\n")], false)?;
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).config(config).build();
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn config(mut self, config: RlsConfig) -> Self {
        self.config = config;
        self
    }

    /// How long the store calls of one request may take in all ([`DEFAULT_RLS_DEADLINE`],
    /// 15 ms; at least 1 ms); past it the domain's [`FailureMode`] answers.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .store_deadline(Duration::from_millis(8));
    /// ```
    pub fn store_deadline(mut self, deadline: Duration) -> Self {
        self.engine.deadline = deadline.max(Duration::from_millis(1));
        self
    }

    /// The circuit breakers over the store's failure domains (the layer's default): while a
    /// domain's circuit is open, requests get their [`FailureMode`] at once.
    ///
    /// ```
    /// use redlimit::failure::CircuitBreaker;
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .circuit_breaker(CircuitBreaker::disabled());
    /// ```
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.engine.breaker = breaker;
        self
    }

    /// Rate-limit headers in `response_headers_to_add` (default [`HeaderStyle::None`]: Envoy
    /// builds its own `X-RateLimit-*` from the statuses when asked to).
    /// [`HeaderStyle::XRateLimit`] renders Envoy's draft-03 headers, [`HeaderStyle::Ietf`] the
    /// IETF draft's `RateLimit-Policy` and `RateLimit` (one item per limit, named after the
    /// limit's `name`, else the descriptor's position from 1).
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .response_headers(redlimit::response::HeaderStyle::Ietf);
    /// ```
    pub fn response_headers(mut self, style: HeaderStyle) -> Self {
        self.headers = style;
        self
    }

    /// The Go service's `SHADOW_MODE`: every request is answered OK overall, its statuses
    /// saying what would have been over (default off).
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .shadow_mode(true);
    /// ```
    pub fn shadow_mode(mut self, on: bool) -> Self {
        self.global_shadow = on;
        self
    }

    /// The Go service's `QUOTA_MODE`: every descriptor is in quota mode, as if each rule said
    /// `quota_mode: true` (default off). A request is then OVER_LIMIT only when every
    /// descriptor that is not `unlimited` is over (a descriptor no rule matches is never over,
    /// so it keeps the request OK); each descriptor is counted on its own.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .quota_mode(true);
    /// ```
    pub fn quota_mode(mut self, on: bool) -> Self {
        self.global_quota = on;
        self
    }

    /// How a request's hits are counted: [`Commit::Always`] (the default, as envoyproxy/ratelimit
    /// counts with its default `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false`) or
    /// [`Commit::AllOrNone`] (`STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true`, done exactly).
    ///
    /// - [`Commit::Always`]: every counter is charged its descriptor's hits, whatever the
    ///   others say and past its own limit (debt, up to twice the limit), in one atomic store
    ///   call per store and hash tag (all made at once, nothing refunded). A descriptor is
    ///   `OVER_LIMIT` when a counter's hits did not fit (its count after them past the
    ///   limit) or the counter was past its limit already; `hits_addend: 0` on a counter at
    ///   its limit exactly is `OK` with 0 left. So a charge after the response (Envoy's
    ///   `apply_on_stream_done`) lands even when it does not fit, and the checks after it are
    ///   refused until the debt is paid: a token budget cannot be overrun.
    /// - [`Commit::AllOrNone`]: a request is admitted only if every counter admits its hits,
    ///   and only then is any charged: a refused request charges nothing (across hash tags or
    ///   stores, its charges are refunded about a round trip later); a check of nothing is
    ///   over when one unit more would be refused. A charge that does not fit is refused and
    ///   never counted.
    ///
    /// ```
    /// use redlimit::store::Commit;
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .commit(Commit::AllOrNone);
    /// ```
    pub fn commit(mut self, commit: Commit) -> Self {
        self.commit = commit;
        self
    }

    /// The secret that signs the receipts of reservations (`redlimit.reserve`) and checks them
    /// when they are settled (`redlimit.settle`): see [`SETTLE_ENTRY`](super::SETTLE_ENTRY).
    /// Every replica an Envoy may reach must share it: a receipt issued by one replica and
    /// brought back to another settles nothing there (the real cost is charged in full).
    /// Default: a random key of this process.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .settle_key(b"a secret every replica shares");
    /// ```
    pub fn settle_key(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.settle_key = SettleKey::new(secret.as_ref());
        self
    }

    /// The Go service's `RESPONSE_DYNAMIC_METADATA`: each response carries `dynamic_metadata`
    /// (default off), a `Struct` of the request's `domain`, its `descriptors` (each with its
    /// `entries` as `key=value`, its own `limit` and `hitsAddend` when set), the request's
    /// `hitsAddend` when not 0, and `metadata`: the YAML `metadata` of the rules of the
    /// descriptors that passed (not over; shadow mode passes), merged (the first descriptor's
    /// value wins, mappings merge). Envoy keeps it as the filter's dynamic metadata.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .response_dynamic_metadata(true);
    /// ```
    pub fn response_dynamic_metadata(mut self, on: bool) -> Self {
        self.dynamic_metadata = on;
        self
    }

    /// The most descriptors one request may carry ([`DEFAULT_MAX_DESCRIPTORS`], 64; at least
    /// 1); more is `INVALID_ARGUMENT`.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .max_descriptors(16);
    /// ```
    pub fn max_descriptors(mut self, max: usize) -> Self {
        self.max_descriptors = max.max(1);
        self
    }

    /// The share of a limit past which hits count as near it, in the
    /// `ratelimit_service_rate_limit_near_limit` metric (default 0.8, as envoyproxy/ratelimit's
    /// `NEAR_LIMIT_RATIO`); clamped to 0..=1.
    ///
    /// ```
    /// let service = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .near_limit_ratio(0.9)
    ///     .build();
    /// ```
    pub fn near_limit_ratio(mut self, ratio: f64) -> Self {
        self.near_limit_ratio = if ratio.is_nan() {
            DEFAULT_NEAR_LIMIT_RATIO
        } else {
            ratio.clamp(0.0, 1.0)
        };
        self
    }

    /// envoyproxy/ratelimit's own three headers (`LIMIT_RESPONSE_HEADERS_ENABLED`), added to
    /// `response_headers_to_add` beside [`response_headers`](Self::response_headers)'s: see
    /// [`LimitHeaders`]. Off by default.
    ///
    /// ```
    /// use redlimit::rls::{LimitHeaders, RateLimitService};
    /// let service = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .limit_headers(LimitHeaders::default())
    ///     .build();
    /// ```
    pub fn limit_headers(mut self, headers: LimitHeaders) -> Self {
        self.limit_headers = Some(headers);
        self
    }

    /// What requests get when the store fails, misses the deadline or its circuit is open,
    /// for domains without a mode of their own (from [`domain_on_store_error`] or their
    /// configuration's `on_store_error`): default [`FailureMode::Unavailable`].
    ///
    /// [`domain_on_store_error`]: Self::domain_on_store_error
    ///
    /// ```
    /// use redlimit::rls::{FailureMode, RateLimitService};
    /// let b = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .on_store_error(FailureMode::Local { instances: 3 });
    /// ```
    pub fn on_store_error(mut self, mode: FailureMode) -> Self {
        self.on_store_error = mode;
        self
    }

    /// The failure mode of one domain, before its configuration's `on_store_error` and the
    /// service's [`on_store_error`](Self::on_store_error).
    ///
    /// ```
    /// use redlimit::rls::{FailureMode, RateLimitService};
    /// let b = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .domain_on_store_error("internal", FailureMode::Open)
    ///     .domain_on_store_error("login", FailureMode::Closed);
    /// ```
    pub fn domain_on_store_error(mut self, domain: impl Into<String>, mode: FailureMode) -> Self {
        self.domain_modes.insert(domain.into(), mode);
        self
    }

    /// Entries of the deny cache (default 10 000, about 3 MB at most; 0 turns it off): a
    /// counter the store denied is answered `OVER_LIMIT` without a store call until the time
    /// the store said it would pass, exactly as the store would have answered. A reload starts
    /// it empty.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .deny_cache(0);
    /// ```
    pub fn deny_cache(mut self, capacity: usize) -> Self {
        self.engine.deny_cache = capacity;
        self
    }

    /// The most store calls this service has in flight at once (default: no bound). Past it,
    /// a request is answered by its domain's [`FailureMode`] without calling the store (by
    /// default `UNAVAILABLE`, and Envoy's `failure_mode_deny` decides), instead of queueing
    /// behind a store that a flood has slowed: every call would then miss the deadline. Each
    /// store (the per-second one too) has a bound of its own. Off by default, so that a
    /// service answers every request it answered before this setting existed; Envoy's own
    /// timeout bounds what waits on it.
    ///
    /// ```
    /// let b = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .max_store_calls(512);
    /// ```
    pub fn max_store_calls(mut self, calls: usize) -> Self {
        self.engine.max_calls = Some(calls.max(1));
        self
    }

    /// Where counters live in a Redis Cluster, for domains whose configuration has no
    /// `hash_tag` of its own (default [`HashTag::Domain`]: one slot per domain, one atomic
    /// call per request). [`HashTag::Descriptor`] spreads a domain over the Cluster, a call
    /// per descriptor in parallel, a refusal's charges refunded. Switching moves every counter
    /// to new keys.
    ///
    /// ```
    /// use redlimit::rls::{HashTag, RateLimitService};
    /// let b = RateLimitService::builder(redlimit::store::MemoryStore::new())
    ///     .hash_tag(HashTag::Descriptor);
    /// ```
    pub fn hash_tag(mut self, tag: HashTag) -> Self {
        self.hash_tag = tag;
        self
    }

    /// A second store for the limits whose unit is `second` (envoyproxy/ratelimit's
    /// `REDIS_PERSECOND`): their counters live there, every other limit's in the main store.
    /// The rule is by unit, as there: a limit of `unit: second` goes here whatever its
    /// `unit_multiplier` or `algorithm`, and so does a descriptor's own `limit` in seconds.
    /// Each store has its own circuit breakers and deny cache, and the store deadline bounds
    /// both; a request whose counters live in both stores is one atomic call per store, made
    /// at once, and a refusal by either refunds what the other charged (visible for about a
    /// round trip). A failure of either store gets the domain's [`FailureMode`]. The admin
    /// API's overrides and shadow settings stay in the main store.
    ///
    /// ```
    /// use redlimit::rls::RateLimitService;
    /// use redlimit::store::MemoryStore;
    /// let service = RateLimitService::builder(MemoryStore::new())
    ///     .per_second_store(MemoryStore::new())
    ///     .build();
    /// ```
    pub fn per_second_store(mut self, store: impl Store) -> Self {
        self.per_second = Some(crate::store::shared(store));
        self
    }

    /// The service.
    ///
    /// ```
    /// let service = redlimit::rls::RateLimitService::builder(redlimit::store::MemoryStore::new()).build();
    /// ```
    pub fn build(self) -> RateLimitService {
        let shared = engine::Shared::new(self.store, self.engine);
        // Breakers and calls in flight of its own; the fallback's memory is the main one's (a
        // counter's key names its limit: they never meet).
        let per_second = self
            .per_second
            .map(|store| shared.beside(store, self.engine.breaker));
        let modes = Modes {
            by_domain: self.domain_modes,
            default: self.on_store_error,
        };
        let config = Arc::new(self.config);
        let generation = Generation::new(&shared, per_second.as_ref(), config, &modes);
        RateLimitService::from_inner(Inner {
            shared,
            per_second,
            generation: ArcSwap::from_pointee(generation),
            modes,
            headers: self.headers,
            global_shadow: self.global_shadow,
            global_quota: self.global_quota,
            dynamic_metadata: self.dynamic_metadata,
            max_descriptors: self.max_descriptors,
            near_limit_ratio: self.near_limit_ratio,
            limit_headers: self.limit_headers,
            hash_tag: self.hash_tag,
            commit: self.commit,
            settle_key: self.settle_key,
        })
    }
}
