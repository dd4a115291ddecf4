//! From a bucket's share to each stream's assignment: this instance's share of the fleet's
//! quota (from the last sync, or bounded by it while the fleet's store is unreachable), split
//! among its streams by their demand, and pushed where it moved materially.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use prost_types::Duration as ProtoDuration;

use super::fleet::Peer;
use super::hub::{Hub, HubBucket, State};
use super::metrics;
use super::quota::{Quota, blanket, token_bucket};
use super::share::split_tokens;
use super::watch::Push;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::{
    BucketAction, bucket_action,
};
use crate::rls::proto::envoy::r#type::v3::RateLimitStrategy;
use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

/// Actions waiting to be sent, by stream: one response per stream per round.
pub(crate) type Pending = HashMap<u64, Vec<BucketAction>>;

/// Each watcher's demand (requests per second) in stream order; a watcher not measured yet
/// counts as the mean of those measured, or with none an equal part of this instance's
/// equal part of the rate.
pub(crate) fn watcher_demands(
    hub: &Hub,
    state: &State,
    bucket: &HubBucket,
    key: &Arc<str>,
    now: Instant,
) -> Vec<(u64, f64)> {
    let least = hub.settings.sync_interval;
    let measured: Vec<(u64, Option<f64>)> = bucket
        .watchers
        .iter()
        .map(|id| {
            let demand = state
                .streams
                .get(id)
                .and_then(|s| s.watches.get(key))
                .and_then(|w| w.demand_at(now, least));
            (*id, demand)
        })
        .collect();
    let known: Vec<f64> = measured.iter().filter_map(|(_, d)| *d).collect();
    let estimate = if known.is_empty() {
        let rate = match bucket.quota {
            Quota::Rate {
                tokens,
                fill_seconds,
            } => tokens as f64 / fill_seconds as f64,
            _ => 0.0,
        };
        let instances = bucket.peers.len().max(state.fleet_size).max(1);
        rate / instances as f64 / measured.len().max(1) as f64
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    measured
        .into_iter()
        .map(|(id, d)| (id, d.unwrap_or(estimate)))
        .collect()
}

/// This instance's tokens of the bucket's `tokens`, from `peers` (every live instance's
/// demand, sorted by name so that every instance computes the same split).
fn my_part(hub: &Hub, tokens: u64, peers: &[Peer]) -> Option<u64> {
    let mut peers: Vec<&Peer> = peers.iter().collect();
    peers.sort_by(|a, b| a.instance.cmp(&b.instance));
    let me = peers.iter().position(|p| p.instance == hub.instance)?;
    let demands: Vec<f64> = peers.iter().map(|p| p.demand).collect();
    split_tokens(tokens, &demands).get(me).copied()
}

/// Takes a sync's outcome for `key` (this instance's `demand` reported): the fleet's view
/// and this instance's share from it; on failure the last view with this instance's demand
/// now, never above the share it had (the fleet may have grown meanwhile), or with no view
/// the limit divided among the most instances seen.
pub(crate) fn take_sync(
    hub: &Hub,
    state: &mut State,
    key: &Arc<str>,
    demand: f64,
    outcome: Result<Vec<Peer>, String>,
) {
    let fleet_size = state.fleet_size;
    let Some(bucket) = state.buckets.get_mut(key) else {
        return;
    };
    let Quota::Rate { tokens, .. } = bucket.quota else {
        return;
    };
    let share = match outcome {
        Ok(peers) => {
            state.fleet_size = fleet_size.max(peers.len());
            let share = my_part(hub, tokens, &peers);
            bucket.peers = peers;
            share.unwrap_or(0)
        }
        Err(error) => {
            metrics::sync_error();
            tracing::debug!(%error, "RLQS sync failed: assigning from the last fleet view");
            if let Some(mine) = bucket.peers.iter_mut().find(|p| p.instance == hub.instance) {
                mine.demand = demand;
                let now = my_part(hub, tokens, &bucket.peers).unwrap_or(0);
                bucket.share.map_or(now, |before| now.min(before))
            } else {
                tokens / fleet_size.max(1) as u64
            }
        }
    };
    bucket.share = Some(share);
}

/// Decides each watcher's assignment of bucket `key` and queues what is to be pushed.
pub(crate) fn assign_into(
    hub: &Hub,
    state: &mut State,
    key: &Arc<str>,
    now: Instant,
    pending: &mut Pending,
) {
    let Some(bucket) = state.buckets.get(key) else {
        return;
    };
    let strategies: Vec<(u64, RateLimitStrategy)> = match bucket.quota {
        Quota::AllowAll => bucket
            .watchers
            .iter()
            .map(|id| (*id, blanket(BlanketRule::AllowAll)))
            .collect(),
        Quota::DenyAll => bucket
            .watchers
            .iter()
            .map(|id| (*id, blanket(BlanketRule::DenyAll)))
            .collect(),
        Quota::Rate { fill_seconds, .. } => {
            let Some(share) = bucket.share else {
                return;
            };
            let demands = watcher_demands(hub, state, bucket, key, now);
            let parts = split_tokens(share, &demands.iter().map(|(_, d)| *d).collect::<Vec<_>>());
            let burst = hub.settings.burst.as_secs_f64();
            demands
                .iter()
                .zip(parts)
                .map(|((id, _), tokens)| (*id, token_bucket(tokens, fill_seconds, burst)))
                .collect()
        }
    };
    let bucket_id = bucket.bucket.id.clone();
    let ttl = hub.settings.assignment_ttl;
    for (id, strategy) in strategies {
        let Some(watch) = state
            .streams
            .get_mut(&id)
            .and_then(|s| s.watches.get_mut(key))
        else {
            continue;
        };
        let send = match watch.decide(&strategy, ttl, now) {
            Push::Nothing => continue,
            Push::Change(strategy) => {
                watch.pushed = Some((strategy, now));
                strategy
            }
            Push::Refresh(strategy) => {
                watch.pushed = Some((strategy, now));
                strategy
            }
        };
        metrics::assignment(&send);
        pending
            .entry(id)
            .or_default()
            .push(assignment(bucket_id.clone(), send, hub.ttl_seconds()));
    }
}

/// A quota assignment action.
pub(crate) fn assignment(
    bucket_id: crate::rls::proto::envoy::service::rate_limit_quota::v3::BucketId,
    strategy: RateLimitStrategy,
    ttl_seconds: i64,
) -> BucketAction {
    BucketAction {
        bucket_id: Some(bucket_id),
        bucket_action: Some(bucket_action::BucketAction::QuotaAssignmentAction(
            bucket_action::QuotaAssignmentAction {
                assignment_time_to_live: Some(ProtoDuration {
                    seconds: ttl_seconds,
                    nanos: 0,
                }),
                rate_limit_strategy: Some(strategy),
            },
        )),
    }
}

/// Sends each stream its pending actions in one response.
pub(crate) fn send(state: &State, pending: Pending) {
    for (id, actions) in pending {
        if actions.is_empty() {
            continue;
        }
        if let Some(stream) = state.streams.get(&id) {
            let _ = stream.outbox.send(Ok(RateLimitQuotaResponse {
                bucket_action: actions,
            }));
        }
    }
}
