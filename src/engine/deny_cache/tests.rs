use super::*;
use crate::store::MemoryStore;
use crate::{Limit, Policy};

fn denial(store: &MemoryStore, policy: &Policy, key: &Key, cost: u64) -> Decision {
    loop {
        let d = store.check_now(policy, key, cost);
        if !d.is_allowed() {
            return d;
        }
    }
}

#[test]
fn answers_until_the_retry_time_for_costs_at_least_the_denied_one() {
    let policy = Policy::new("p", [Limit::gcra(2, Duration::from_secs(3600)).unwrap()]).unwrap();
    let store = MemoryStore::new();
    let key = Key::new("k");
    let d = denial(&store, &policy, &key, 1);
    let cache = DenyCache::new(100);
    let asked = Instant::now();
    cache.insert(0, &key, 2, (asked, Stamp::default()), &d);
    let Lookup::Hit(hit) = cache.lookup(0, &key, 2, false, Some) else {
        panic!("not cached")
    };
    assert_eq!(hit.source(), DecisionSource::DenyCache);
    assert!(!hit.is_allowed());
    assert!(hit.retry_after().unwrap() <= d.retry_after().unwrap());
    let miss =
        |rule, key: &Key, cost| matches!(cache.lookup(rule, key, cost, false, Some), Lookup::Miss);
    assert!(miss(0, &key, 1), "a smaller cost asks the store");
    assert!(miss(1, &key, 2), "another rule");
    assert!(miss(0, &Key::new("other"), 2));
    // Expired (asked long enough ago): one request asks the store, the others wait.
    let long_ago = Instant::now() - d.retry_after().unwrap() - Duration::from_millis(1);
    cache.insert(0, &key, 2, (long_ago, Stamp::default()), &d);
    let Lookup::Refresh(turn) = cache.lookup(0, &key, 2, false, Some) else {
        panic!("no refresh")
    };
    let Lookup::Wait(gate) = cache.lookup(0, &key, 2, false, Some) else {
        panic!("no wait")
    };
    assert!(miss_gated(&cache, &key), "its turn: ask the store");
    // A fresh denial on the same gate: the waiters find it once the turn is over.
    cache.insert(0, &key, 2, (Instant::now(), Stamp::default()), &d);
    drop(turn);
    assert!(gate.try_acquire().is_ok());
    assert!(matches!(
        cache.lookup(0, &key, 2, false, Some),
        Lookup::Hit(_)
    ));
    assert_eq!(cache.len(), 1);
    // The store says the denial no longer stands (the key was reset): dropped.
    assert!(matches!(
        cache.lookup(0, &key, 2, false, |_| None),
        Lookup::Miss
    ));
    assert_eq!(cache.len(), 0);
}

fn miss_gated(cache: &DenyCache, key: &Key) -> bool {
    matches!(cache.lookup(0, key, 2, true, Some), Lookup::Miss)
}

#[test]
fn caches_only_store_denials_that_can_pass_later() {
    let policy = Policy::new("p", [Limit::gcra(2, Duration::from_secs(60)).unwrap()]).unwrap();
    let store = MemoryStore::new();
    let key = Key::new("k");
    let cache = DenyCache::new(100);
    let allowed = store.check_now(&policy, &key, 1);
    cache.insert(0, &key, 1, (Instant::now(), Stamp::default()), &allowed);
    let never = store.check_now(&policy, &key, 3);
    assert!(never.exceeds_capacity());
    cache.insert(0, &key, 3, (Instant::now(), Stamp::default()), &never);
    let local = denial(&store, &policy, &key, 1).with_source(DecisionSource::Local);
    cache.insert(0, &key, 1, (Instant::now(), Stamp::default()), &local);
    assert_eq!(cache.len(), 0);
}

#[cfg(feature = "metrics")]
#[test]
fn the_entries_gauge_follows_inserts_evictions_removals_and_drops() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let gauge = || {
        let text = handle.render();
        text.lines()
            .find_map(|l| l.strip_prefix("redlimit_deny_cache_entries "))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(3600)).unwrap()]).unwrap();
    let store = MemoryStore::new();
    metrics::with_local_recorder(&recorder, || {
        let (a, b) = (DenyCache::new(32), DenyCache::new(32));
        for i in 0..200 {
            let key = Key::new(format!("k{i}"));
            let d = denial(&store, &policy, &key, 1);
            a.insert(0, &key, 1, (Instant::now(), Stamp::default()), &d);
            a.insert(0, &key, 1, (Instant::now(), Stamp::default()), &d);
            b.insert(1, &key, 1, (Instant::now(), Stamp::default()), &d);
        }
        assert_eq!(
            gauge(),
            Some((a.len() + b.len()) as f64),
            "evictions counted out"
        );
        let kept = (0..200)
            .map(|i| Key::new(format!("k{i}")))
            .find(|key| matches!(a.lookup(0, key, 1, false, Some), Lookup::Hit(_)))
            .expect("a cached key");
        a.remove(0, &kept);
        assert_eq!(gauge(), Some((a.len() + b.len()) as f64));
        b.remove_rule(1);
        assert_eq!(gauge(), Some(a.len() as f64));
        drop(a);
        assert_eq!(gauge(), Some(0.0));
    });
}

#[test]
fn stays_within_its_capacity_and_can_be_off() {
    let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(3600)).unwrap()]).unwrap();
    let store = MemoryStore::new();
    let cache = DenyCache::new(32);
    for i in 0..1000 {
        let key = Key::new(format!("k{i}"));
        let d = denial(&store, &policy, &key, 1);
        cache.insert(0, &key, 1, (Instant::now(), Stamp::default()), &d);
    }
    assert!(cache.len() <= 32 + SHARDS, "{}", cache.len());
    let off = DenyCache::new(0);
    let key = Key::new("k0");
    off.insert(
        0,
        &key,
        1,
        (Instant::now(), Stamp::default()),
        &denial(&store, &policy, &key, 1),
    );
    assert!(matches!(off.lookup(0, &key, 1, false, Some), Lookup::Miss));
}
