//! The background task of a local-first store: every interval (or early, when a key's unsent
//! units reach their share of its limit) it sends what each touched key counted, in script
//! calls of up to 64 keys (one per Cluster slot), all in flight at once on the store's
//! multiplexed connection, and takes the fleet's answers; every second it renews this
//! instance's heartbeat and learns how many instances there are.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, ErrorKind, ServerErrorKind};
use smallvec::SmallVec;
use tokio::task::JoinSet;

use super::core::{Core, SyncItem};
use super::entry::FleetReply;
use crate::key::Key;
use crate::limit::Limit;
use crate::store::RedisStore;

/// Keys per sync call: a call's Lua runs alone on its server, so keep each one short.
const KEYS_PER_CALL: usize = 64;

static SYNC: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/local_first_sync.lua")));
static HEARTBEAT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/local_first_heartbeat.lua")));

/// The Lua text of the sync script.
pub(crate) fn sync_source() -> &'static str {
    include_str!("../../../lua/local_first_sync.lua")
}

/// The bookkeeping hash of a key (each instance entry's last cumulative count): the exact
/// store's key layout (`PREFIX:POLICY:{KEY}`, the key the Cluster hash tag; an RLS counter's
/// `PREFIX:POLICY:{TAG}:COUNTER`) with a suffix of its own.
pub(crate) fn hash_key(prefix: &str, policy: &str, key: &Key) -> String {
    if key.names_limit_states() {
        let (tag, own) = (key.hash_tag(), key.limit_key(0).as_str());
        return format!("{prefix}:{policy}:{{{tag}}}:{own}:lf");
    }
    format!("{prefix}:{policy}:{{{}}}:lf", key.as_str())
}

/// The exact state key of the limit at `position` (`PREFIX:POLICY:{KEY}:gc0`; an RLS
/// counter's `PREFIX:POLICY:{TAG}:COUNTER:gc`): the key the exact scripts check, which syncs
/// count into. Local-first mode keeps no key with positional limit keys nor per-key
/// algorithm, so this is the exact store's name for every key it syncs (`script::state_key`,
/// held to it by a test).
pub(crate) fn limit_state_key(
    prefix: &str,
    policy: &str,
    key: &Key,
    limit: &Limit,
    position: usize,
) -> String {
    let code = limit.algorithm().code();
    if key.names_limit_states() {
        let (tag, own) = (key.hash_tag(), key.limit_key(position).as_str());
        return format!("{prefix}:{policy}:{{{tag}}}:{own}:{code}");
    }
    format!("{prefix}:{policy}:{{{}}}:{code}{position}", key.as_str())
}

/// Runs until the store is dropped (which aborts it).
pub(super) async fn run(core: Arc<Core>, redis: RedisStore) {
    // The heartbeats beside the syncs, not between them: a heartbeat waiting out a Redis that
    // stopped answering would hold back the sync that notices it (up to the heartbeat's
    // timeout), and the instance would decide on a stale view instead of its share.
    tokio::join!(heartbeats(&core, &redis), syncs(&core, &redis));
}

/// Every second (or interval, if longer), renews this instance's heartbeat.
async fn heartbeats(core: &Core, redis: &RedisStore) {
    let every = core.settings.interval.max(Duration::from_secs(1));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        heartbeat(core, redis, every * 3).await;
    }
}

/// Sync rounds, every interval or sooner when asked.
async fn syncs(core: &Arc<Core>, redis: &RedisStore) {
    let interval = core.settings.interval;
    let mut last_sweep = tokio::time::Instant::now();
    loop {
        let started = tokio::time::Instant::now();
        sync_round(core, redis).await;
        crate::telemetry::local_first_health(core.is_isolated(), core.sync_age());
        if last_sweep.elapsed() >= Duration::from_secs(10) {
            last_sweep = tokio::time::Instant::now();
            core.sweep();
        }
        // Early syncs, but never more than four rounds per interval; a refund's, sooner (it
        // waits for them), though still at most one round per 10 ms.
        let next = started + interval;
        let earliest = started + interval / 4;
        let soonest = started + (interval / 4).min(Duration::from_millis(10));
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = core.wake.notified() => tokio::time::sleep_until(earliest).await,
            () = core.urgent.notified() => tokio::time::sleep_until(soonest).await,
        }
    }
}

/// One round: every touched key, in calls sent at once.
pub(super) async fn sync_round(core: &Arc<Core>, redis: &RedisStore) {
    let items = core.begin_sync();
    if items.is_empty() {
        core.nothing_to_sync();
        return;
    }
    let prefix = redis.prefix().to_owned();
    let mut groups: Vec<(Option<u16>, Vec<SyncItem>)> = Vec::new();
    for item in items {
        let slot = redis.cluster_slot(item.key.hash_tag());
        match groups
            .iter_mut()
            .rev()
            .find(|(s, g)| *s == slot && g.len() < KEYS_PER_CALL)
        {
            Some((_, group)) => group.push(item),
            None => groups.push((slot, vec![item])),
        }
    }
    let timeout = call_timeout(core.settings.interval);
    let min_ttl_ms = min_ttl_ms(core.settings.interval);
    let mut calls = JoinSet::new();
    for (_, group) in groups {
        let (core, redis, prefix) = (Arc::clone(core), redis.clone(), prefix.clone());
        calls.spawn(async move {
            let sent_at = core.local_now();
            let outcome = tokio::time::timeout(timeout, call(&redis, &prefix, &group, min_ttl_ms))
                .await
                .map_err(|_| "timed out".to_owned())
                .and_then(|r| r);
            let received_at = core.local_now();
            if let Err(err) = &outcome {
                tracing::debug!(error = %err, keys = group.len(), "local-first sync failed");
            }
            core.finish_sync(group, outcome.map_err(drop), sent_at, received_at);
        });
    }
    while calls.join_next().await.is_some() {}
}

/// The least TTL (ms) of what a sync writes (a key's bookkeeping hash, a GCRA or token-bucket
/// state, drained or not): a minute, or three intervals and 2 s if longer. A sync of units
/// counted before the state's TAT floors at it (they queue behind the fleet's backlog): kept
/// that long, the floor is still there when an instance cut off from Redis for up to a minute
/// (a partition, a frozen server) comes back with what it admitted alone.
pub(crate) fn min_ttl_ms(interval: Duration) -> u64 {
    (2_000 + 3 * interval.as_millis() as u64).max(60_000)
}

/// How long a sync call may take before it counts as failed: five intervals, at least 0.5 s.
pub(crate) fn call_timeout(interval: Duration) -> Duration {
    (interval * 5).max(Duration::from_millis(500))
}

/// One sync call, and its answer: Redis time and each key's fleet state.
async fn call(
    redis: &RedisStore,
    prefix: &str,
    group: &[SyncItem],
    min_ttl_ms: u64,
) -> Result<(u64, Vec<FleetReply>), String> {
    let build = |first: &str, script: &str| sync_command(first, script, prefix, group, min_ttl_ms);
    let value = run_script(redis, &SYNC, sync_source(), build).await?;
    let flat: Vec<i64> = redis::from_redis_value(value).map_err(|e| e.to_string())?;
    decode(group, &flat).ok_or_else(|| format!("unexpected sync reply of {} integers", flat.len()))
}

/// The sync call of `group`: `first` is `EVALSHA` (with the hash) or `EVAL` (with the text).
pub(crate) fn sync_command(
    first: &str,
    script: &str,
    prefix: &str,
    group: &[SyncItem],
    min_ttl_ms: u64,
) -> Cmd {
    let mut cmd = redis::cmd(first);
    let keys: usize = group.iter().map(|item| 1 + item.limits.len()).sum();
    cmd.arg(script).arg(keys);
    for item in group {
        cmd.arg(hash_key(prefix, &item.policy, &item.key));
        for (i, limit) in item.limits.iter().enumerate() {
            cmd.arg(limit_state_key(prefix, &item.policy, &item.key, limit, i));
        }
    }
    cmd.arg(min_ttl_ms);
    for item in group {
        cmd.arg(&item.field)
            .arg(item.counted)
            .arg(item.acked)
            .arg(item.since)
            .arg(item.offered)
            .arg(item.limits.len());
        for limit in item.limits.iter() {
            cmd.arg(limit.algorithm().code())
                .arg(limit.count())
                .arg(limit.period_us());
        }
    }
    cmd
}

/// Runs a script by hash, and by text when the server does not have it (`NOSCRIPT` proves the
/// call did not run, so sending it again cannot count twice). RLQS's sync runs its script so.
pub(crate) async fn run_script(
    redis: &RedisStore,
    script: &redis::Script,
    source: &str,
    build: impl Fn(&str, &str) -> Cmd,
) -> Result<redis::Value, String> {
    // Boxed: the connection's futures are deep, and this one is held across a spawn.
    let first = Box::pin(redis.run_command(&build("EVALSHA", script.get_hash()))).await;
    match first {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            Box::pin(redis.run_command(&build("EVAL", source)))
                .await
                .map_err(|e| e.to_string())
        }
        outcome => outcome.map_err(|e| e.to_string()),
    }
}

/// Splits a flat reply into each key's fleet state.
pub(crate) fn decode(group: &[SyncItem], flat: &[i64]) -> Option<(u64, Vec<FleetReply>)> {
    let (&now, mut rest) = flat.split_first()?;
    let mut replies = Vec::with_capacity(group.len());
    for item in group {
        let width = 2 + 3 * item.limits.len();
        if rest.len() < width {
            return None;
        }
        let (mine, tail) = rest.split_at(width);
        rest = tail;
        let n = |i: usize| u64::try_from(mine[i]).unwrap_or(0);
        replies.push(FleetReply {
            total: n(0),
            offered: n(1),
            limits: (0..item.limits.len())
                .map(|l| (n(2 + 3 * l), n(3 + 3 * l), n(4 + 3 * l)))
                .collect::<SmallVec<_>>(),
        });
    }
    (rest.is_empty() && now > 0).then_some((now as u64, replies))
}

/// Renews this instance's heartbeat and takes the number of live instances.
async fn heartbeat(core: &Core, redis: &RedisStore, ttl: Duration) {
    let key = format!("{}:lf:instances", redis.prefix());
    let build = |first: &str, script: &str| {
        let mut cmd = redis::cmd(first);
        cmd.arg(script)
            .arg(1)
            .arg(&key)
            .arg(&core.instance)
            .arg(ttl.as_millis() as u64);
        cmd
    };
    let asked_at = core.local_now();
    let outcome = tokio::time::timeout(
        ttl,
        run_script(
            redis,
            &HEARTBEAT,
            include_str!("../../../lua/local_first_heartbeat.lua"),
            build,
        ),
    )
    .await;
    let count = match outcome {
        Ok(Ok(value)) => redis::from_redis_value::<u32>(value).ok(),
        _ => None,
    };
    match count {
        Some(count) => {
            core.set_instances(count);
            core.heard(asked_at);
        }
        None => core.failed(asked_at, core.local_now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use std::time::Duration;

    #[test]
    fn syncs_count_into_the_exact_scripts_own_keys() {
        let second = Duration::from_secs(1);
        let policy = Policy::new(
            "api",
            [
                Limit::gcra(10, second).unwrap(),
                Limit::token_bucket(10, second).unwrap(),
                Limit::fixed_window(10, second).unwrap(),
                Limit::sliding_window(10, second).unwrap(),
            ],
        )
        .unwrap();
        let key = Key::new("ip:1.2.3.4");
        for (i, limit) in policy.limits().iter().enumerate() {
            assert_eq!(
                limit_state_key("rl", policy.name(), &key, limit, i),
                crate::store::state_key("rl", &policy, &key, i)
            );
        }
        // An RLS counter: its own state, whatever check and position it comes in.
        let tag = Key::new("rls:d");
        let (own, other) = (Key::new("d%00k%00v%00#0"), Key::new("d%00x%00y%00#0"));
        let check = tag.clone().with_named_limit_keys([other, own.clone()]);
        let counter = tag.with_named_limit_keys([own]);
        for (i, limit) in policy.limits().iter().enumerate() {
            let alone = Policy::new("rls", [*limit]).unwrap();
            let pair = Policy::new("rls", [policy.limits()[(i + 1) % 4], *limit]).unwrap();
            assert_eq!(
                limit_state_key("rl", "rls", &counter, limit, 0),
                crate::store::state_key("rl", &pair, &check, 1)
            );
            assert_eq!(
                limit_state_key("rl", "rls", &counter, limit, 0),
                crate::store::state_key("rl", &alone, &counter, 0)
            );
        }
        assert_eq!(
            hash_key("rl", "rls", &counter),
            format!("rl:rls:{{rls:d}}:{}:lf", counter.limit_key(0).as_str())
        );
    }
}
