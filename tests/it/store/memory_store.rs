//! The memory store's memory stays bounded: expired state is reclaimed as requests come, and a
//! flood of distinct keys stops at the cap.

use std::time::Duration;

use redlimit::store::{ManualClock, MemoryStore};
use redlimit::{Key, Limit, Policy};

const T0: u64 = 1_700_000_000_000_000;

#[test]
fn a_flood_of_distinct_keys_stops_at_the_cap() {
    let store = MemoryStore::builder()
        .max_keys(10_000)
        .clock(ManualClock::new(T0))
        .build();
    let policy = Policy::new(
        "flood",
        [Limit::gcra(10, Duration::from_secs(3600)).unwrap()],
    )
    .unwrap();
    // Twenty times the cap: every shard evicts many times over (a million took 40 s of a
    // debug build's CPU and proved nothing more).
    const FLOOD: u32 = 200_000;
    for i in 0..FLOOD {
        let d = store.check_now(&policy, &Key::new(i.to_le_bytes()), 1);
        assert!(d.is_allowed());
    }
    // The cap is kept per shard (10 000 / 64, rounded up).
    assert!(store.len() <= 10_048, "{} keys", store.len());
    assert!(store.len() >= 9_000, "{} keys", store.len());
    assert_eq!(store.evictions(), u64::from(FLOOD) - store.len() as u64);
}

#[test]
fn expired_state_is_reclaimed_without_a_cap() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::with_clock(clock.clone());
    let policy = Policy::new(
        "short",
        [Limit::gcra(1, Duration::from_millis(10)).unwrap()],
    )
    .unwrap();
    // 200 000 keys, each live for 10 ms, one new key every 10 µs: about 1000 live at a time.
    for i in 0..200_000u32 {
        clock.advance(Duration::from_micros(10));
        store.check_now(&policy, &Key::new(i.to_le_bytes()), 1);
    }
    assert!(store.len() < 5_000, "{} keys held", store.len());
    assert_eq!(store.evictions(), 0, "reclaimed, not evicted");
}

#[test]
fn eviction_prefers_the_state_that_expires_soonest() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .max_keys(6_400)
        .clock(clock.clone())
        .build();
    let long = Policy::new(
        "long",
        [Limit::fixed_window(1, Duration::from_secs(86_400)).unwrap()],
    )
    .unwrap();
    let short = Policy::new("short", [Limit::gcra(1, Duration::from_secs(1)).unwrap()]).unwrap();
    // Long-lived state for a few keys, then a flood of short-lived keys.
    let vips: Vec<Key> = (0..8).map(|i| Key::new(format!("vip{i}"))).collect();
    for k in &vips {
        assert!(store.check_now(&long, k, 1).is_allowed());
    }
    for i in 0..100_000u32 {
        store.check_now(&short, &Key::new(i.to_le_bytes()), 1);
    }
    assert!(store.evictions() > 0);
    let kept = vips
        .iter()
        .filter(|k| !store.check_now(&long, k, 1).is_allowed())
        .count();
    assert_eq!(
        kept, 8,
        "long-lived state was evicted before short-lived state"
    );
}

#[test]
fn denied_requests_on_new_keys_store_nothing() {
    let store = MemoryStore::new();
    let policy = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    for i in 0..1000u32 {
        let d = store.check_now(&policy, &Key::new(i.to_le_bytes()), 5);
        assert!(d.exceeds_capacity());
    }
    assert!(store.is_empty());
}

#[test]
fn a_changed_limit_under_the_same_name_keeps_the_units_used_and_a_changed_algorithm_starts_fresh() {
    let store = MemoryStore::new();
    let key = Key::new("k");
    let a = Policy::new("p", [Limit::gcra(1, Duration::from_secs(60)).unwrap()]).unwrap();
    let b = Policy::new("p", [Limit::gcra(2, Duration::from_secs(60)).unwrap()]).unwrap();
    let c = Policy::new(
        "p",
        [Limit::fixed_window(2, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();
    assert!(store.check_now(&a, &key, 1).is_allowed());
    assert!(!store.check_now(&a, &key, 1).is_allowed());
    // 1 used of 2: one more passes.
    assert_eq!(store.check_now(&b, &key, 1).remaining(), Some(0));
    assert_eq!(store.check_now(&c, &key, 1).remaining(), Some(1));
}
