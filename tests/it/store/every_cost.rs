//! Checks in which every cost lands (`Commit::Always`, the RLS's default, envoyproxy/ratelimit's
//! `INCRBY` of every hit), on the memory store, a real Redis and a local-first store over it:
//! each limit charged its own cost whatever the others say and past its own limit (debt, up
//! to twice the limit), each answering on its own; a concurrency limit refused before the
//! store is asked. The memory store and the scripts are held to the same decisions by the
//! differential traces (`props/differential.rs`).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use redlimit::store::{Commit, LocalFirstStore, MemoryStore, Store};
use redlimit::{Key, Limit, Policy, StoreError};
use support::*;

const HOUR: Duration = Duration::from_secs(3_600);

async fn stores(name: &str) -> (RedisServer, Vec<(&'static str, Arc<dyn Store>)>) {
    let server = RedisServer::start();
    let redis = redis_store(&server, name).await;
    let local_first = LocalFirstStore::builder(redis_store(&server, &format!("{name}-lf")).await)
        .build()
        .expect("a local-first store");
    let stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("redis", Arc::new(redis)),
        ("local-first", Arc::new(local_first)),
    ];
    (server, stores)
}

fn states(decision: &redlimit::Decision) -> Vec<(bool, u64)> {
    decision
        .limits()
        .iter()
        .map(|l| (l.is_allowed(), l.remaining()))
        .collect()
}

/// The bypass the all-or-none admission leaves open, closed: 1 000 tokens an hour, a check of
/// nothing before each call and a charge of 300 after it. The fourth charge does not fit (100
/// left): it lands all the same, and every check after is refused.
#[tokio::test]
async fn a_charge_that_does_not_fit_lands_and_the_checks_after_are_refused() {
    let (_server, stores) = stores("always-bypass").await;
    let policy = Policy::new("tokens", [Limit::fixed_window(1_000, HOUR).unwrap()]).unwrap();
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        let key = Key::new("tenant").with_limit_key(0, Key::new("tokens"));
        for used in [300, 600, 900] {
            let check = costs.check_costs(&policy, &key, &[0], Commit::Always);
            assert_eq!(states(&check.await.unwrap()), [(true, 1_000 - used + 300)]);
            let charge = costs.check_costs(&policy, &key, &[300], Commit::Always);
            assert_eq!(
                states(&charge.await.unwrap()),
                [(true, 1_000 - used)],
                "{name}"
            );
        }
        // 100 left: the charge of 300 is refused, and lands (200 owed).
        let charge = costs
            .check_costs(&policy, &key, &[300], Commit::Always)
            .await;
        let refused = charge.unwrap();
        assert_eq!(states(&refused), [(false, 0)], "{name}");
        assert!(refused.limits()[0].retry_after().is_some(), "{name}");
        for _ in 0..3 {
            let check = costs.check_costs(&policy, &key, &[0], Commit::Always).await;
            assert_eq!(states(&check.unwrap()), [(false, 0)], "{name}: in debt");
        }
        // The all-or-none admission agrees: nothing fits while the debt lasts.
        let admission = costs
            .check_costs(&policy, &key, &[1], Commit::AllOrNone)
            .await;
        assert!(!admission.unwrap().is_allowed(), "{name}");
    }
}

/// Each limit on its own: one that does not fit does not stop the others' charge, and a check
/// of nothing on a limit used up exactly is allowed with nothing left (the Go service's `OK`
/// with 0 remaining), refused once past it.
#[tokio::test]
async fn each_limit_answers_on_its_own_and_every_cost_lands() {
    let (_server, stores) = stores("always-each").await;
    let policy = Policy::new(
        "each",
        [
            Limit::fixed_window(5, HOUR).unwrap(),
            Limit::gcra(3, HOUR).unwrap(),
            Limit::token_bucket(6, HOUR).unwrap(),
            Limit::sliding_window(7, HOUR).unwrap(),
        ],
    )
    .unwrap();
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        let key = ["fw", "gc", "tb", "sw"]
            .into_iter()
            .enumerate()
            .fold(Key::new("k"), |key, (i, own)| {
                key.with_limit_key(i, Key::new(own))
            });
        let first = costs.check_costs(&policy, &key, &[5, 4, 2, 0], Commit::Always);
        let first = first.await.unwrap();
        assert!(!first.is_allowed(), "{name}: the GCRA limit cannot take 4");
        assert_eq!(
            states(&first),
            [(true, 0), (false, 0), (true, 4), (true, 7)],
            "{name}"
        );
        // The fixed window at its limit: a check of nothing is allowed with nothing left, one
        // unit more is refused and lands. The GCRA limit is in debt: refused for nothing too.
        let read = costs.check_costs(&policy, &key, &[0, 0, 0, 0], Commit::Always);
        assert_eq!(
            states(&read.await.unwrap()),
            [(true, 0), (false, 0), (true, 4), (true, 7)],
            "{name}"
        );
        let more = costs.check_costs(&policy, &key, &[1, 0, 0, 0], Commit::Always);
        assert_eq!(states(&more.await.unwrap())[0], (false, 0), "{name}");
        let read = costs.check_costs(&policy, &key, &[0, 0, 0, 0], Commit::Always);
        assert_eq!(
            states(&read.await.unwrap())[0],
            (false, 0),
            "{name}: 6 of 5"
        );
    }
}

/// Debt is capped at twice the limit, as a charge's: a client charged while refused owes at
/// most one limit beyond it, so it waits at most a period once it stops.
#[tokio::test]
async fn the_debt_stops_at_twice_the_limit() {
    let (_server, stores) = stores("always-cap").await;
    let policy = Policy::new("cap", [Limit::gcra(10, HOUR).unwrap()]).unwrap();
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        let key = Key::new("capped").with_limit_key(0, Key::new("debt"));
        // 75 units charged: 65 past the limit, of which 10 are owed.
        for _ in 0..5 {
            let charge = costs
                .check_costs(&policy, &key, &[15], Commit::Always)
                .await;
            assert!(!charge.unwrap().is_allowed(), "{name}");
        }
        let read = costs.check_costs(&policy, &key, &[0], Commit::Always).await;
        let wait = read.unwrap().limits()[0].retry_after().expect("in debt");
        assert!(
            wait > HOUR - Duration::from_secs(5) && wait <= HOUR,
            "{name}: {wait:?}"
        );
    }
}

#[tokio::test]
async fn a_concurrency_limit_is_refused_before_the_store_is_asked() {
    let (_server, stores) = stores("always-cc").await;
    let policy = Policy::new(
        "cc",
        [
            Limit::fixed_window(5, HOUR).unwrap(),
            Limit::concurrency(2, Duration::from_secs(30)).unwrap(),
        ],
    )
    .unwrap();
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        let refused = costs
            .check_costs(&policy, &Key::new("k"), &[1, 1], Commit::Always)
            .await;
        assert!(
            matches!(refused, Err(StoreError::Unsupported(_))),
            "{name}: {refused:?}"
        );
    }
}
