//! The instance's round, every sync interval: idle buckets abandoned, rules read again (a
//! reload applies here), one sync per bucket with the fleet's store, then every stream's
//! assignments decided and the changed (or due for refresh) ones pushed.

use std::sync::{Arc, Weak};
use std::time::Instant;

use super::assign::{Pending, assign_into, send, take_sync};
use super::demand::{instance_admitted, instance_demand, watcher_claims};
use super::fleet::Peer;
use super::hub::Hub;
use super::metrics;
use super::quota::Quota;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::{
    BucketAction, bucket_action,
};

/// How many syncs one round has in flight at once.
const SYNCS_AT_ONCE: usize = 64;

/// Rounds every sync interval until the service is gone or closing.
pub(crate) async fn run(hub: Weak<Hub>) {
    let Some(interval) = hub.upgrade().map(|h| h.settings.sync_interval) else {
        return;
    };
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(hub) = hub.upgrade() else {
            return;
        };
        if *hub.closing.borrow() {
            return;
        }
        round(&hub).await;
    }
}

/// A sync to make: the bucket, this instance's demand for it and what it admits (requests
/// per second).
type Job = (Arc<str>, f64, f64);

/// One round.
pub(crate) async fn round(hub: &Arc<Hub>) {
    let now = Instant::now();
    let mut pending = Pending::new();
    let jobs = prepare(hub, now, &mut pending);
    let outcomes = sync_all(hub, jobs).await;
    let mut state = hub.lock();
    for (key, demand, outcome) in outcomes {
        take_sync(hub, &mut state, &key, demand, outcome, now);
    }
    let keys: Vec<Arc<str>> = state.buckets.keys().cloned().collect();
    for key in &keys {
        assign_into(hub, &mut state, key, now, &mut pending);
    }
    send(&state, pending);
}

/// The first sync of buckets new to this instance, then their first assignments.
pub(crate) async fn first_sync(hub: &Arc<Hub>, keys: Vec<Arc<str>>) {
    let jobs: Vec<Job> = {
        let state = hub.lock();
        keys.iter()
            .filter_map(|key| {
                let bucket = state.buckets.get(key)?;
                let now = Instant::now();
                let claims = watcher_claims(hub, &state, bucket, key, now);
                let admitted = instance_admitted(hub, &state, key, &claims, now);
                Some((Arc::clone(key), instance_demand(&claims), admitted))
            })
            .collect()
    };
    let outcomes = sync_all(hub, jobs).await;
    let now = Instant::now();
    let mut state = hub.lock();
    let mut pending = Pending::new();
    for (key, demand, outcome) in outcomes {
        // A round may have synced it meanwhile: the later view wins.
        if state.buckets.get(&key).is_some_and(|b| b.share.is_none()) {
            take_sync(hub, &mut state, &key, demand, outcome, now);
        }
        assign_into(hub, &mut state, &key, now, &mut pending);
    }
    send(&state, pending);
}

/// Under the lock: abandons idle watches, drops buckets no stream watches, reads each
/// bucket's rule again, and lists the syncs to make.
fn prepare(hub: &Hub, now: Instant, pending: &mut Pending) -> Vec<Job> {
    let config = hub.config.load();
    let idle = hub.settings.bucket_idle_timeout;
    let mut state = hub.lock();
    let state = &mut *state;
    let mut gone = Vec::new();
    for (id, stream) in &mut state.streams {
        stream.watches.retain(|key, watch| {
            if !watch.idle(idle, now) {
                return true;
            }
            gone.push((*id, Arc::clone(key)));
            false
        });
    }
    for (id, key) in gone {
        if let Some(bucket) = state.buckets.get_mut(&key) {
            bucket.watchers.remove(&id);
            metrics::abandon();
            pending.entry(id).or_default().push(BucketAction {
                bucket_id: Some(bucket.bucket.id.clone()),
                bucket_action: Some(bucket_action::BucketAction::AbandonAction(
                    bucket_action::AbandonAction {},
                )),
            });
        }
    }
    // A bucket no stream watches any more is synced once more, with no demand, then dropped:
    // the others see it leave (its Envoys gone), not vanish (a crash, whose Envoys still hold
    // their shares: counted a while longer).
    state.buckets.retain(|_, bucket| {
        let keep = !bucket.watchers.is_empty() || !bucket.leaving;
        bucket.leaving = bucket.watchers.is_empty();
        keep
    });
    metrics::buckets(state.buckets.len());
    let mut jobs = Vec::new();
    let keys: Vec<Arc<str>> = state.buckets.keys().cloned().collect();
    for key in keys {
        let Some(bucket) = state.buckets.get_mut(&key) else {
            continue;
        };
        let quota = Quota::of(&config, &bucket.domain, &bucket.bucket.pairs());
        if quota != bucket.quota {
            bucket.quota = quota;
            bucket.share = None;
            bucket.correction = 0.0;
            bucket.peers.clear();
        }
        if !matches!(quota, Quota::Rate { .. }) {
            continue;
        }
        let Some(bucket) = state.buckets.get(&key) else {
            continue;
        };
        let claims = watcher_claims(hub, state, bucket, &key, now);
        let admitted = instance_admitted(hub, state, &key, &claims, now);
        jobs.push((key, instance_demand(&claims), admitted));
    }
    jobs
}

/// Runs `jobs` against the fleet's store, [`SYNCS_AT_ONCE`] at a time, all within one sync
/// interval (a store that does not answer by then is an unreachable one: the calls left fail
/// at once, so a frozen Redis never holds a round up for longer than an interval).
async fn sync_all(hub: &Hub, jobs: Vec<Job>) -> Vec<(Arc<str>, f64, Result<Vec<Peer>, String>)> {
    let ttl = hub.entry_ttl();
    let interval = hub.settings.sync_interval;
    let deadline = tokio::time::Instant::now() + interval;
    let mut outcomes = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(SYNCS_AT_ONCE) {
        let calls = chunk.iter().map(|(key, demand, admitted)| async move {
            let digest = key.to_string();
            let call = hub
                .fleet
                .sync(&digest, &hub.instance, *demand, *admitted, ttl);
            let outcome = match tokio::time::timeout_at(deadline, call).await {
                Ok(outcome) => outcome,
                Err(_) => Err(format!("no answer within the sync interval ({interval:?})")),
            };
            (Arc::clone(key), *demand, outcome)
        });
        outcomes.extend(futures_util::future::join_all(calls).await);
    }
    outcomes
}
