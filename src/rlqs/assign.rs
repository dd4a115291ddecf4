//! From a bucket's share to each stream's assignment: this instance's share of the fleet's
//! quota (from the last sync, or bounded by it while the fleet's store is unreachable), split
//! among its streams by their demand, and pushed where it moved materially.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use prost_types::Duration as ProtoDuration;

use super::demand::{my_part, watcher_claims};
use super::expect::{SETTLE, SHIFT, UNMEASURED_BURST, UNSATURATED_MAX_TOKENS, allot, correct};
use super::fleet::Peer;
use super::ghost::{haunt, same_instances, with_ghosts};
use super::hub::{Hub, State};
use super::metrics;
use super::quota::{Quota, blanket, token_bucket};
use super::watch::Push;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::{
    BucketAction, bucket_action,
};
use crate::rls::proto::envoy::r#type::v3::RateLimitStrategy;
use crate::rls::proto::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

/// Actions waiting to be sent, by stream: one response per stream per round.
pub(crate) type Pending = HashMap<u64, Vec<BucketAction>>;

/// Takes a sync's outcome for `key` (this instance's `demand` reported) at `now`: the
/// fleet's view, this instance's share from it, and the fleet's correction moved (once the
/// view is settled: [`settled`]); on failure the last view with this instance's demand now,
/// never above the share it had (the fleet may have grown meanwhile), or with no view the
/// limit divided among the most instances seen.
pub(crate) fn take_sync(
    hub: &Hub,
    state: &mut State,
    key: &Arc<str>,
    demand: f64,
    outcome: Result<Vec<Peer>, String>,
    now: Instant,
) {
    let fleet_size = state.fleet_size;
    let measured = state.buckets.get(key).is_some_and(|bucket| {
        bucket.watchers.iter().all(|id| {
            state
                .streams
                .get(id)
                .and_then(|s| s.watches.get(key))
                .is_some_and(|w| w.admitted_at(now, hub.settings.sync_interval).is_some())
        })
    });
    let Some(bucket) = state.buckets.get_mut(key) else {
        return;
    };
    let Quota::Rate {
        tokens,
        fill_seconds,
    } = bucket.quota
    else {
        return;
    };
    let share = match outcome {
        Ok(peers) => {
            state.fleet_size = fleet_size.max(peers.len());
            haunt(
                &mut bucket.ghosts,
                &bucket.peers,
                &peers,
                &hub.instance,
                now,
            );
            let split = with_ghosts(peers.clone(), &bucket.ghosts);
            let share = my_part(hub, tokens, fill_seconds, &split);
            // A changed fleet (an instance, a stream, a demand come or gone) restarts the hold.
            let fleet_demand: f64 = peers.iter().map(|p| p.demand).sum();
            let shifted = (fleet_demand - bucket.settled_demand).abs()
                > SHIFT * fleet_demand.max(bucket.settled_demand);
            if shifted || !same_instances(&bucket.peers, &peers) {
                bucket.settled = now;
                bucket.settled_demand = fleet_demand;
            }
            if measured && now.saturating_duration_since(bucket.settled) >= SETTLE {
                let interval = hub.settings.sync_interval.as_secs_f64();
                bucket.correction =
                    correct(bucket.correction, tokens, fill_seconds, &peers, interval);
            }
            tracing::debug!(
                bucket = %key,
                share,
                correction = bucket.correction,
                demand = fleet_demand,
                admitted = peers.iter().map(|p| p.admitted).sum::<f64>(),
                measured,
                "RLQS sync"
            );
            bucket.peers = peers;
            share.unwrap_or(0)
        }
        Err(error) => {
            metrics::sync_error();
            tracing::debug!(%error, "RLQS sync failed: assigning from the last fleet view");
            if let Some(mine) = bucket.peers.iter_mut().find(|p| p.instance == hub.instance) {
                mine.demand = demand;
                let now = my_part(hub, tokens, fill_seconds, &bucket.peers).unwrap_or(0);
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
        Quota::Rate {
            tokens,
            fill_seconds,
        } => {
            let Some(share) = bucket.share else {
                return;
            };
            let claims = watcher_claims(hub, state, bucket, key, now);
            // This instance's part of the fleet's correction: as its part of the limit.
            let correction = bucket.correction * share as f64 / tokens.max(1) as f64;
            let parts = allot(
                share,
                fill_seconds,
                &claims.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
                correction,
            );
            let burst = hub.settings.burst.as_secs_f64();
            claims
                .iter()
                .zip(parts)
                .map(|((id, claim), part)| {
                    let least = if part.unsaturated {
                        UNSATURATED_MAX_TOKENS
                    } else {
                        0
                    };
                    let burst = if claim.window > 0.0 {
                        burst
                    } else {
                        burst * UNMEASURED_BURST
                    };
                    (*id, token_bucket(part.tokens, fill_seconds, burst, least))
                })
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
