//! Checks whose every cost lands (`Commit::Always`, the RLS's default) are batched as checks
//! are: those waiting at the same moment share script calls (the always script's batch
//! variant), one batch per Cluster slot, and each is decided exactly as the memory store
//! decides it on its own, a key of the wrong type failing its own decisions only.
//!
//! As in `batching.rs`, every check is polled once before any answer is read on a
//! current-thread runtime: the first goes alone (nothing was in flight), the others wait in
//! the queue until the test yields, so the calls each test makes are known without timing.

use crate::support;

use std::collections::{BTreeMap, HashSet};
use std::future::IntoFuture;
use std::time::Duration;

use redlimit::store::{Commit, ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, Decision, Key, Limit, Policy, StoreError};
use support::*;

use super::batching::{DAY, at_once, evalsha_calls};

/// Near 2023-11, off any round boundary.
const T0: u64 = 1_700_000_123_456_789;

/// Every algorithm that can be charged alone; three limits where the sliding log is the
/// tightest; a penalty box (which the always script neither reads nor passes); and sixteen
/// limits of every algorithm (the most a policy holds, in one Lua function per decision).
fn policies() -> Vec<Policy> {
    let mut policies: Vec<Policy> = Algorithm::ALL
        .into_iter()
        .map(|a| Policy::new("one", [Limit::new(a, 10, DAY).unwrap()]).unwrap())
        .collect();
    policies.push(
        Policy::new(
            "multi",
            [
                Limit::gcra(10, DAY).unwrap(),
                Limit::sliding_log(7, DAY).unwrap(),
                Limit::fixed_window(20, DAY).unwrap(),
            ],
        )
        .unwrap(),
    );
    policies.push(
        gcra_policy("boxed", 5, DAY)
            .penalty(Duration::from_secs(60))
            .unwrap(),
    );
    let sixteen = Algorithm::ALL
        .into_iter()
        .cycle()
        .take(16)
        .zip(1..)
        .map(|(a, n)| Limit::new(a, 4 + n, Duration::from_secs(n * 60)).unwrap());
    policies.push(Policy::new("sixteen", sixteen).unwrap());
    policies
}

/// Key `which`'s cost for each limit of `policy`: 1 + its position on key 0, 2 and 0 in turn
/// on key 1; the sliding logs share the first log's (they share one log).
fn costs(policy: &Policy, which: usize) -> Vec<u64> {
    let limits = policy.limits();
    let mut costs: Vec<u64> = (0..limits.len() as u64)
        .map(|i| if which == 0 { 1 + i } else { 2 * ((i + 1) % 2) })
        .collect();
    let is_log = |i: usize| limits[i].algorithm() == Algorithm::SlidingLog;
    if let Some(first) = (0..limits.len()).find(|&i| is_log(i)) {
        for i in (0..limits.len()).filter(|&i| is_log(i)) {
            costs[i] = costs[first];
        }
    }
    costs
}

/// Each key's decisions, as a multiset (the checks of one key are alike: which of them Redis
/// ran first does not change what each position in its sequence answers).
fn per_key(keys: &[Key], decisions: Vec<Decision>) -> BTreeMap<String, Vec<String>> {
    let mut per_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, decision) in keys.iter().zip(decisions) {
        per_key
            .entry(key.as_str().to_owned())
            .or_default()
            .push(format!("{decision:?}"));
    }
    for decisions in per_key.values_mut() {
        decisions.sort();
    }
    per_key
}

/// `keys`' always checks of `policy` at `now`, at once on `redis`, against the same checks one
/// after the other in `memory` (whose clock is set to `now`): the same answers, key by key.
async fn compare(
    redis: &RedisStore,
    (memory, clock): (&MemoryStore, &ManualClock),
    policy: &Policy,
    keys: &[Key],
    now: u64,
) {
    let key_costs = |key: &Key| costs(policy, usize::from(key.as_str().ends_with('1')));
    let checks = keys
        .iter()
        .map(|key| {
            let costs = key_costs(key);
            redlimit::__private::check_costs_at(redis, policy, key, &costs, Commit::Always, now)
                .into_future()
        })
        .collect();
    let from_redis: Vec<Decision> = at_once(checks)
        .await
        .into_iter()
        .collect::<Result<_, StoreError>>()
        .unwrap_or_else(|e| panic!("{}: {e}", policy.name()));
    clock.set(now);
    let from_memory: Vec<Decision> = keys
        .iter()
        .map(|key| {
            memory
                .check_costs_now(policy, key, &key_costs(key), Commit::Always)
                .unwrap()
        })
        .collect();
    assert_eq!(
        per_key(keys, from_redis),
        per_key(keys, from_memory),
        "{policy:?}"
    );
}

#[tokio::test]
async fn always_checks_waiting_together_share_calls_and_decide_as_alone() {
    const DECISIONS: usize = 40;
    let server = RedisServer::start();
    // Two keys in turn: each batch reads keys that decisions before it in the batch wrote.
    let keys: Vec<Key> = (0..DECISIONS)
        .map(|i| Key::new(format!("k{}", i % 2)))
        .collect();
    for policy in policies() {
        let store = redis_store(&server, "always").await;
        let clock = ManualClock::new(T0);
        let memory = MemoryStore::with_clock(clock.clone());
        let before = evalsha_calls(&server);
        compare(&store, (&memory, &clock), &policy, &keys, T0).await;
        // One alone (nothing was in flight), then the 39 waiting in calls of 32 and 7.
        assert_eq!(
            evalsha_calls(&server) - before,
            3,
            "{}: calls for {DECISIONS} decisions",
            policy.name()
        );
        // Later, on the states (and debts) the first checks left.
        compare(&store, (&memory, &clock), &policy, &keys, T0 + 30_000_000).await;
    }
}

#[tokio::test]
async fn a_key_of_the_wrong_type_fails_only_its_own_always_checks() {
    let server = RedisServer::start();
    let prefix = unique_prefix("always-wrong");
    let store = RedisStore::builder(server.url())
        .prefix(prefix.clone())
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 5, DAY);
    let _: () = redis::cmd("LPUSH")
        .arg(format!("{prefix}:p:{{bad}}:gc0"))
        .arg("x")
        .query(&mut server.connection())
        .unwrap();
    let keys: Vec<Key> = (0..30)
        .map(|i| Key::new(if i % 3 == 1 { "bad" } else { "good" }))
        .collect();
    let costs = store.limit_costs().expect("costs per limit");
    let before = evalsha_calls(&server);
    let checks = keys
        .iter()
        .map(|key| {
            costs
                .check_costs(&policy, key, &[1], Commit::Always)
                .into_future()
        })
        .collect();
    let results = at_once(checks).await;
    assert_eq!(
        evalsha_calls(&server) - before,
        2,
        "one alone, then one batch"
    );
    let mut admitted = 0;
    for (key, result) in keys.iter().zip(&results) {
        if key.as_str() == "bad" {
            let err = result.as_ref().unwrap_err();
            let source = std::error::Error::source(err).expect("the redis error");
            let redis = source.downcast_ref::<redis::RedisError>().unwrap();
            assert_eq!(redis.code(), Some("WRONGTYPE"), "{redis}");
        } else {
            admitted += usize::from(result.as_ref().expect("decided").is_allowed());
        }
    }
    assert_eq!(admitted, 5, "the good key's checks decided as alone");
}

#[tokio::test]
async fn on_a_cluster_always_checks_are_batched_per_slot() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("always-cluster"))
        .connect()
        .await
        .expect("connect to the test cluster");
    let policy = &policies()[5];
    assert_eq!(policy.name(), "multi");
    // Twelve keys, four checks each, in turn.
    let keys: Vec<Key> = (0..48).map(|i| Key::new(format!("c{}", i % 12))).collect();
    let slots: HashSet<u16> = keys
        .iter()
        .map(|key| {
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key.as_str())
                .query(&mut cluster.nodes[0].connection())
                .unwrap()
        })
        .collect();
    let calls = || -> u64 { cluster.nodes.iter().map(evalsha_calls).sum() };
    let before = calls();
    let clock = ManualClock::new(T0);
    let memory = MemoryStore::with_clock(clock.clone());
    compare(&store, (&memory, &clock), policy, &keys, T0).await;
    // One alone, then one call per slot (no `CROSSSLOT`: each answered).
    assert_eq!(calls() - before, 1 + slots.len() as u64, "{slots:?}");
    assert!(slots.len() > 1, "the keys span slots");
}
