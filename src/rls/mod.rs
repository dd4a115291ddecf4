//! Envoy's rate limit service (RLS v3): `envoy.service.ratelimit.v3.RateLimitService`, whose
//! one call `ShouldRateLimit` a gateway (Envoy, Istio, Envoy Gateway, Contour, ...) makes per
//! request, answered from any [`Store`](crate::store::Store) with the rules of
//! envoyproxy/ratelimit's YAML ([`config`]).
//!
//! What a request gets, descriptor by descriptor (as envoyproxy/ratelimit answers unless
//! said otherwise):
//!
//! - a status per descriptor, in request order: `current_limit` (`requests_per_unit`, `unit`,
//!   `name`), `limit_remaining` (units left after this request; 0 for a descriptor over its
//!   limit, as the Go service answers, even when fewer units than the request's hits are
//!   left), `duration_until_reset` (over the limit: the algorithm's real wait until this
//!   request would pass; within it: until the limit is whole again, and for a limit whole
//!   already, such as a counter nothing has charged yet, until it would be whole again after
//!   one unit charged now: the end of the current window for the fixed window, as the Go
//!   service answers; exact, not rounded to seconds);
//! - `share_threshold: true` on a wildcard value: every value the pattern matches counts on
//!   one counter (the pattern is in the counter's key, at whatever level of a nested
//!   descriptor), as in the Go service;
//! - a descriptor no rule matches (or whose rule another's `replaces` names) is OK without
//!   `current_limit`; an `unlimited` one is OK with `limit_remaining` `u32::MAX` and never
//!   reaches the store; a request whose domain is not configured is OK on every descriptor;
//! - a descriptor's own `limit` wins over the rules (shadow mode off), counted by the aligned
//!   fixed window on counters of its own for each limit value (the Go service shares one
//!   counter between values, its issue #1077); `requests_per_unit: 0` is always over;
//! - hits: a descriptor's `hits_addend` wins, 0 checking without charging; else the
//!   request's, at least 1. By default every hit lands ([`Commit::Always`](crate::store::Commit),
//!   the Go service's default `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false`): each counter is
//!   charged its hits whatever the others say, past its limit too (debt, capped at twice the
//!   limit), and a descriptor is over when its hits did not fit or it was past its limit
//!   already (a check of nothing at the limit exactly is OK with 0 left), so a charge after
//!   the response is never lost. With [`commit`](RateLimitServiceBuilder::commit)`(Commit::AllOrNone)`
//!   (`true` there): a request is admitted only if every counter admits its hits, a refused
//!   one charges nothing, and a check of nothing is over when one more unit would be refused;
//! - `overall_code`: OVER_LIMIT if a descriptor that is neither shadow nor quota mode is over,
//!   or every quota-mode descriptor is; global shadow mode answers OK; global quota mode
//!   ([`quota_mode`](RateLimitServiceBuilder::quota_mode)) makes every descriptor a quota one;
//! - `dynamic_metadata`, when asked for
//!   ([`response_dynamic_metadata`](RateLimitServiceBuilder::response_dynamic_metadata)): the
//!   domain, the descriptors, and the passed rules' YAML `metadata`, merged;
//! - all or none, a refused request charges nothing, and no concurrent call sees it charged:
//!   its descriptors, whatever their hits, are checked and charged in one atomic store call,
//!   each counter its own hits, when they share a store and a hash tag (see the store calls
//!   below);
//! - a reservation settled to the real cost: a descriptor's last entry `redlimit.reserve` on
//!   the request path gets a signed receipt in `dynamic_metadata`, and `redlimit.settle` =
//!   that receipt after the response charges only the excess or gives back the rest
//!   ([`SETTLE_ENTRY`], [`settle_key`](RateLimitServiceBuilder::settle_key));
//! - metrics (feature `metrics`): envoyproxy/ratelimit's, under its Prometheus names
//!   (`ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//!   by `domain`, `key1`, `key2`; `..._over_limit_with_local_cache` for hits refused from the
//!   deny cache; `ratelimit_service_rate_limit_domain_not_found` by `domain`;
//!   `ratelimit_service_global_shadow_mode`; `ratelimit_service_should_rate_limit_error` by
//!   `err_type`). Each rule's counters are registered with the `metrics` recorder at the
//!   rule's first hit and kept beside the rule until the configuration is replaced, so install
//!   the recorder before the service answers its first call (a recorder installed later sees
//!   a configuration's rules from the next reload on);
//! - errors: an empty domain, no descriptors, more than
//!   [`max_descriptors`](RateLimitServiceBuilder::max_descriptors), or a bad `limit` unit is
//!   `INVALID_ARGUMENT`; a store error, the store deadline (15 ms by default, under Envoy's
//!   20 ms timeout) or an open circuit gets the domain's [`FailureMode`]: by default
//!   `UNAVAILABLE`, which Envoy's `failure_mode_deny` decides; or `OK`, `OVER_LIMIT`, or a
//!   decision in memory on this server's share of each limit;
//! - the deny cache: a counter the store denied is answered `OVER_LIMIT` without a store call
//!   until the store's retry time (exact: nothing but time makes a denied counter pass). Where
//!   every hit lands, that counter's hits are not charged (as the Go service's local cache
//!   skips the `INCRBY` of a key over the limit) and the request's other counters are;
//!   all or none, a request with a counter known over charges nothing, and its other counters
//!   are read for their statuses.
//!
//! Store calls: every counter of one store and one hash tag goes into one atomic check, each
//! charged its descriptor's hits (at most 16 limits, one sliding log, distinct counters; on a
//! store with [`LimitCosts`](crate::store::LimitCosts), as the memory, Redis and local-first
//! stores are; on another, one check per cost, all or none). Where every hit lands, those
//! checks are all made at once and nothing is stopped or refunded. All or none: more than 16
//! limits, a counter twice in one request, or a quota- or shadow-mode descriptor (checked on
//! its own, after the enforced ones) make further checks, one after the other. The first
//! refusal stops the charging and
//! the checks already admitted are refunded in the background (stores with
//! [`Refunds`](crate::store::Refunds): the memory and Redis stores): across several checks a
//! refused request's charge is visible for about a round trip. On a Redis Cluster, by default
//! ([`HashTag::Domain`]) every counter of one domain shares one hash slot (the domain is the
//! hash tag): exact and atomic, at one shard's throughput per domain. With
//! [`HashTag::Descriptor`] ([`hash_tag`](RateLimitServiceBuilder::hash_tag), or a domain's
//! `hash_tag: descriptor`) each descriptor's counters have a slot of their own, so a domain
//! spreads over the shards: a request is a check per descriptor, all made at once, and when
//! one refuses the others' charges are refunded (visible for about a round trip).
//! With a [`per_second_store`](RateLimitServiceBuilder::per_second_store) (the Go service's
//! `REDIS_PERSECOND`), the limits whose unit is `second` live there: a request over both stores
//! is a check per store, made at once, refunded the same way.
//!
//! ```
//! use redlimit::rls::{config::RlsConfig, RateLimitService};
//! use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::{
//!     rate_limit_descriptor::Entry, RateLimitDescriptor,
//! };
//! use redlimit::rls::proto::envoy::service::ratelimit::v3::{rate_limit_response::Code, RateLimitRequest};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let config = RlsConfig::parse([("envoy.yaml", "
//! domain: envoy
//! descriptors:
//!   - key: remote_address
//!     rate_limit: {unit: minute, requests_per_unit: 1}
//! ")], false).unwrap();
//! let service = RateLimitService::builder(redlimit::store::MemoryStore::new()).config(config).build();
//! let request = RateLimitRequest {
//!     domain: "envoy".into(),
//!     descriptors: vec![RateLimitDescriptor {
//!         entries: vec![Entry { key: "remote_address".into(), value: "10.0.0.1".into() }],
//!         ..Default::default()
//!     }],
//!     hits_addend: 0,
//! };
//! let first = service.should_rate_limit(request.clone()).await.unwrap();
//! assert_eq!(first.overall_code(), Code::Ok);
//! let second = service.should_rate_limit(request).await.unwrap();
//! assert_eq!(second.overall_code(), Code::OverLimit);
//! # });
//! ```

#[cfg(feature = "admin")]
#[cfg_attr(docsrs, doc(cfg(feature = "admin")))]
pub mod admin;
mod builder;
pub mod config;
mod failure_mode;
mod fallback;
mod hash_tag;
mod limit_headers;
mod live_overrides;
mod metadata;
mod plan;
pub mod proto;
mod respond;
mod run;
mod service;
pub(crate) mod settle;
mod stats;
#[cfg(test)]
mod testing;

pub use builder::{
    DEFAULT_MAX_DESCRIPTORS, DEFAULT_NEAR_LIMIT_RATIO, DEFAULT_RLS_DEADLINE,
    RateLimitServiceBuilder,
};
pub use failure_mode::FailureMode;
pub use hash_tag::HashTag;
pub use limit_headers::LimitHeaders;
pub use service::RateLimitService;
pub use settle::{RECEIPT_FIELD, RESERVE_ENTRY, SETTLE_ENTRY};
