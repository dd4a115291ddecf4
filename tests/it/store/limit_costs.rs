//! Checks with a cost per limit (`LimitCosts`), on the memory store and a real Redis: each
//! limit charged its own cost, all of them or none in one atomic step; concurrent checks on
//! Redis (batched into one script call) hold the limits exactly; costs a store cannot check
//! are refused before it is asked.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redlimit::store::{Commit, MemoryStore, Store};
use redlimit::{Key, Limit, Policy};
use support::*;

const DAY: Duration = Duration::from_secs(86_400);

async fn stores(name: &str) -> (RedisServer, Vec<(&'static str, Arc<dyn Store>)>) {
    let server = RedisServer::start();
    let redis = redis_store(&server, name).await;
    let stores: Vec<(&'static str, Arc<dyn Store>)> = vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("redis", Arc::new(redis)),
    ];
    (server, stores)
}

fn left(decision: &redlimit::Decision) -> Vec<u64> {
    decision.limits().iter().map(|l| l.remaining()).collect()
}

#[tokio::test]
async fn each_limit_is_charged_its_own_cost_all_or_none() {
    let (_server, stores) = stores("costs").await;
    let policy = Policy::new(
        "costs",
        [
            Limit::fixed_window(5, DAY).unwrap(),
            Limit::gcra(3, DAY).unwrap(),
            Limit::sliding_log(4, DAY).unwrap(),
            Limit::token_bucket(6, DAY).unwrap(),
            Limit::sliding_window(7, DAY).unwrap(),
        ],
    )
    .unwrap();
    let plain = Key::new("k");
    let keyed = Key::new("a").with_limit_key(1, Key::new("tenant"));
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        for key in [&plain, &keyed] {
            let check = |c: &'static [u64]| costs.check_costs(&policy, key, c, Commit::AllOrNone);
            let first = check(&[1, 3, 2, 0, 4]).await.unwrap();
            assert!(first.is_allowed(), "{name} {key}");
            assert_eq!(left(&first), [4, 0, 2, 6, 3], "{name} {key}");
            // The GCRA limit has nothing left: refused, and nothing charged anywhere.
            let refused = check(&[1, 1, 1, 1, 1]).await.unwrap();
            assert!(!refused.is_allowed(), "{name} {key}");
            assert_eq!(
                refused
                    .limits()
                    .iter()
                    .map(|l| l.is_allowed())
                    .collect::<Vec<_>>(),
                [true, false, true, true, true],
                "{name} {key}: which limit refused"
            );
            // A cost of 0 on the full limit reads it: admitted, the others charged.
            let second = check(&[1, 0, 2, 6, 3]).await.unwrap();
            assert!(second.is_allowed(), "{name} {key}");
            assert_eq!(left(&second), [3, 0, 0, 0, 0], "{name} {key}");
            // A cost above a limit's count is refused without consuming.
            let never = check(&[1, 0, 0, 0, 8]).await.unwrap();
            assert!(!never.is_allowed(), "{name} {key}");
            assert!(never.limits()[4].exceeds_capacity(), "{name} {key}");
            let read = check(&[0, 0, 0, 0, 0]).await.unwrap();
            assert_eq!(left(&read), [3, 0, 0, 0, 0], "{name} {key}");
        }
    }
}

#[tokio::test]
async fn concurrent_checks_hold_every_limit_exactly() {
    let (_server, stores) = stores("costs_burst").await;
    let policy = Policy::new(
        "burst",
        [
            Limit::fixed_window(20, DAY).unwrap(),
            Limit::fixed_window(30, DAY).unwrap(),
        ],
    )
    .unwrap();
    let key = Key::new("k");
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        // 40 at once: on Redis most go out together, as one batch call of the script.
        let decisions = join_all((0..40).map(|_| async {
            costs
                .check_costs(&policy, &key, &[1, 2], Commit::AllOrNone)
                .await
        }))
        .await;
        let admitted = decisions
            .iter()
            .filter(|d| d.as_ref().unwrap().is_allowed())
            .count();
        assert_eq!(admitted, 15, "{name}: 30 units of the second limit, 2 each");
        let read = costs
            .check_costs(&policy, &key, &[0, 0], Commit::AllOrNone)
            .await
            .unwrap();
        assert_eq!(left(&read), [5, 0], "{name}: the refused charged nothing");
    }
}

#[tokio::test]
async fn costs_a_store_cannot_check_are_refused_before_it_is_asked() {
    let (_server, stores) = stores("costs_bad").await;
    let logs = Policy::new(
        "logs",
        [
            Limit::sliding_log(5, DAY).unwrap(),
            Limit::sliding_log(9, Duration::from_secs(60)).unwrap(),
        ],
    )
    .unwrap();
    let key = Key::new("k");
    for (name, store) in &stores {
        let costs = store.limit_costs().expect("checks costs per limit");
        for bad in [&[1][..], &[1, 1, 1], &[1, 2]] {
            let error = costs
                .check_costs(&logs, &key, bad, Commit::AllOrNone)
                .await
                .expect_err("refused");
            assert!(error.is_unsupported(), "{name} {bad:?}: {error}");
        }
        let read = costs
            .check_costs(&logs, &key, &[0, 0], Commit::AllOrNone)
            .await
            .unwrap();
        assert_eq!(left(&read), [5, 9], "{name}: nothing charged");
    }
}
