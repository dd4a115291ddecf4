//! What a bucket's watchers here ask and admit (requests per second, from their reports),
//! and this instance's part of the fleet's tokens by every instance's demand.

use std::sync::Arc;
use std::time::Instant;

use super::expect::Claim;
use super::fleet::Peer;
use super::hub::{Hub, HubBucket, State};
use super::quota::Quota;
use super::share::split_tokens;
use crate::rls::proto::envoy::r#type::v3::RateLimitStrategy;

/// Each watcher's claim (its demand, requests per second, and the window it was measured
/// over) in stream order; a watcher not measured yet counts as the mean of those measured, or
/// with none an equal part of this instance's equal part of the rate (an estimate: window 0).
pub(crate) fn watcher_claims(
    hub: &Hub,
    state: &State,
    bucket: &HubBucket,
    key: &Arc<str>,
    now: Instant,
) -> Vec<(u64, Claim)> {
    let least = hub.settings.sync_interval;
    let measured: Vec<(u64, Option<Claim>)> = bucket
        .watchers
        .iter()
        .map(|id| {
            let claim = state
                .streams
                .get(id)
                .and_then(|s| s.watches.get(key))
                .and_then(|w| {
                    Some(Claim {
                        demand: w.demand_at(now, least)?,
                        window: w.window.as_secs_f64(),
                    })
                });
            (*id, claim)
        })
        .collect();
    let known: Vec<f64> = measured
        .iter()
        .filter_map(|(_, c)| c.map(|c| c.demand))
        .collect();
    let estimate = if known.is_empty() {
        let instances = bucket.peers.len().max(state.fleet_size).max(1);
        rate_of(bucket.quota) / instances as f64 / measured.len().max(1) as f64
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    measured
        .into_iter()
        .map(|(id, c)| {
            let claim = c.unwrap_or(Claim {
                demand: estimate,
                window: 0.0,
            });
            (id, claim)
        })
        .collect()
}

/// This instance's demand for a bucket: its watchers' claims summed.
pub(crate) fn instance_demand(claims: &[(u64, Claim)]) -> f64 {
    claims.iter().map(|(_, c)| c.demand).sum()
}

/// What this instance's watchers of a bucket admit, requests per second: measured where a
/// window has passed, else what is expected of them (their demand, up to the rate last
/// assigned), so that a stream just come (whose first report may count a fallback's
/// admissions) moves no correction.
pub(crate) fn instance_admitted(
    hub: &Hub,
    state: &State,
    key: &Arc<str>,
    claims: &[(u64, Claim)],
    now: Instant,
) -> f64 {
    let least = hub.settings.sync_interval;
    claims
        .iter()
        .map(|(id, claim)| {
            let Some(watch) = state.streams.get(id).and_then(|s| s.watches.get(key)) else {
                return 0.0;
            };
            watch.admitted_at(now, least).unwrap_or_else(|| {
                let assigned = watch.pushed.as_ref().and_then(|(s, _)| rate_of_strategy(s));
                assigned.map_or(claim.demand, |rate| claim.demand.min(rate))
            })
        })
        .sum()
}

/// The fleet-wide rate of a quota, requests per second (0 for a blanket).
fn rate_of(quota: Quota) -> f64 {
    match quota {
        Quota::Rate {
            tokens,
            fill_seconds,
        } => tokens as f64 / fill_seconds.max(1) as f64,
        _ => 0.0,
    }
}

/// The rate of a token-bucket strategy, requests per second.
fn rate_of_strategy(strategy: &RateLimitStrategy) -> Option<f64> {
    use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::Strategy;
    match &strategy.strategy {
        Some(Strategy::TokenBucket(b)) => {
            let seconds = b.fill_interval.map_or(1, |d| d.seconds.max(1));
            Some(f64::from(b.tokens_per_fill.unwrap_or(0)) / seconds as f64)
        }
        _ => None,
    }
}

/// This instance's tokens of the bucket's `tokens`, from `peers` (every live instance's
/// demand, sorted by name so that every instance computes the same split).
pub(crate) fn my_part(hub: &Hub, tokens: u64, fill_seconds: u64, peers: &[Peer]) -> Option<u64> {
    let mut peers: Vec<&Peer> = peers.iter().collect();
    peers.sort_by(|a, b| a.instance.cmp(&b.instance));
    let me = peers.iter().position(|p| p.instance == hub.instance)?;
    // Demands in tokens per fill, the capacity's unit (a long fill interval: many tokens).
    let fill = fill_seconds.max(1) as f64;
    let demands: Vec<f64> = peers.iter().map(|p| p.demand * fill).collect();
    split_tokens(tokens, &demands).get(me).copied()
}
