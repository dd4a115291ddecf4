//! Batched script calls against real servers: decisions waiting at the same moment share
//! script calls, and each is decided, failed and counted exactly as its own call would be.
//!
//! The tests run on a current-thread runtime and poll every check once before yielding: the
//! first is sent alone (nothing was in flight), the others join the queue, which is taken only
//! once the test yields. So the batches each test makes are known without any timing.

use crate::support;

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::future::{MaybeDone, join_all, maybe_done};
use redlimit::key::Key;
use redlimit::store::{RedisStore, Store};
use redlimit::{Algorithm, Decision, Limit, Policy, StoreError};
use support::*;

/// Runs `checks` as concurrent decisions do: each is started (polled once) before any answer
/// is read, then all are awaited.
pub(super) async fn at_once<F: Future + Unpin>(checks: Vec<F>) -> Vec<F::Output> {
    let mut checks: Vec<MaybeDone<F>> = checks.into_iter().map(maybe_done).collect();
    std::future::poll_fn(|cx| {
        for check in &mut checks {
            let _ = pin!(check).poll(cx);
        }
        Poll::Ready(())
    })
    .await;
    join_all(checks.iter_mut().map(|c| async { (&mut *c).await })).await;
    checks
        .into_iter()
        .map(|mut c| std::pin::Pin::new(&mut c).take_output().expect("done"))
        .collect()
}

/// `n` decisions of `policy` for `key` at `cost`, at once.
pub(super) async fn decide(
    store: &RedisStore,
    policy: &Policy,
    keys: &[Key],
    cost: u64,
) -> Vec<Result<Decision, StoreError>> {
    let checks = keys
        .iter()
        .map(|key| store.check(policy, key, cost).into_future())
        .collect();
    at_once(checks).await
}

/// `EVALSHA` calls the server has run, not counting those it refused (`NOSCRIPT` before the
/// script was loaded).
pub(super) fn evalsha_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    let Some(stats) = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
    else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        stats
            .split(',')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    field("calls") - field("failed_calls")
}

fn day() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400
}

pub(super) const DAY: Duration = Duration::from_secs(86_400);

/// Every algorithm alone, and a policy of three limits where the tightest (7) decides.
fn policies() -> Vec<(Policy, u64)> {
    let mut policies: Vec<(Policy, u64)> = Algorithm::ALL
        .into_iter()
        .map(|a| {
            let policy = Policy::new("one", [Limit::new(a, 10, DAY).unwrap()]).unwrap();
            (policy, 10)
        })
        .collect();
    let multi = Policy::new(
        "multi",
        [
            Limit::gcra(10, DAY).unwrap(),
            Limit::sliding_log(7, DAY).unwrap(),
            Limit::fixed_window(20, DAY).unwrap(),
        ],
    )
    .unwrap();
    policies.push((multi, 7));
    policies
}

#[tokio::test]
async fn waiting_decisions_share_calls_and_admit_exactly_the_limit() {
    let server = RedisServer::start();
    const DECISIONS: usize = 40;
    for (policy, limit) in policies() {
        for cost in [1, 3] {
            // A fixed or sliding window that crosses midnight UTC mid-burst admits anew: retry.
            loop {
                let store = redis_store(&server, "exact").await;
                let started = day();
                let before = evalsha_calls(&server);
                let keys = vec![Key::new("burst"); DECISIONS];
                let results = decide(&store, &policy, &keys, cost).await;
                let calls = evalsha_calls(&server) - before;
                if day() != started {
                    continue;
                }
                let admitted = results
                    .iter()
                    .map(|r| r.as_ref().expect("decided"))
                    .filter(|d| d.is_allowed())
                    .count() as u64;
                let what = format!("{policy:?} at cost {cost}");
                assert_eq!(admitted, limit / cost, "{what}");
                // One alone (nothing was in flight), then the 39 waiting in calls of 32 and 7.
                assert_eq!(calls, 3, "{what}: calls for {DECISIONS} decisions");
                break;
            }
        }
    }
}

#[tokio::test]
async fn unbatched_stores_send_one_call_per_decision() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("alone"))
        .batch(1)
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 100, DAY);
    let before = evalsha_calls(&server);
    let results = decide(&store, &policy, &vec![Key::new("k"); 20], 1).await;
    assert!(results.iter().all(|r| r.as_ref().unwrap().is_allowed()));
    assert_eq!(
        evalsha_calls(&server) - before,
        20,
        "each decision its own call"
    );
}

#[tokio::test]
async fn a_key_of_the_wrong_type_fails_only_its_own_decisions() {
    let server = RedisServer::start();
    let prefix = unique_prefix("wrong");
    let store = RedisStore::builder(server.url())
        .prefix(prefix.clone())
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 5, DAY);
    let mut conn = server.connection();
    let bad = format!("{prefix}:p:{{bad}}:gc0");
    let _: () = redis::cmd("LPUSH")
        .arg(&bad)
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let keys: Vec<Key> = (0..30)
        .map(|i| Key::new(if i % 3 == 1 { "bad" } else { "good" }))
        .collect();
    let before = evalsha_calls(&server);
    let results = decide(&store, &policy, &keys, 1).await;
    assert_eq!(
        evalsha_calls(&server) - before,
        2,
        "one alone, then one batch"
    );
    let mut admitted = 0;
    for (key, result) in keys.iter().zip(&results) {
        match key.as_str() {
            "bad" => {
                let err = result.as_ref().unwrap_err();
                assert!(err.is_script(), "{err:?}");
                let source = std::error::Error::source(err).expect("the redis error");
                let redis = source.downcast_ref::<redis::RedisError>().unwrap();
                assert_eq!(redis.code(), Some("WRONGTYPE"), "{redis}");
            }
            _ => admitted += usize::from(result.as_ref().expect("decided").is_allowed()),
        }
    }
    assert_eq!(admitted, 5, "the good key's decisions are counted as alone");
}

#[tokio::test]
async fn a_batch_whose_answer_is_lost_fails_each_decision_and_counts_each_once() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    // Redis always counts as near (a debug build's calls may take longer than the default
    // linger), so the decisions after the warm-up all queue.
    let store = RedisStore::builder(proxy.url())
        .prefix(unique_prefix("lost"))
        .batch_linger(Duration::from_secs(3_600))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 100, DAY);
    let keys: Vec<Key> = (0..40).map(|i| Key::new(format!("k{i}"))).collect();
    // The batch script loaded, so every call below runs the first time it arrives.
    let warm: Vec<Key> = (0..3).map(|i| Key::new(format!("warm{i}"))).collect();
    assert!(
        decide(&store, &policy, &warm, 1)
            .await
            .iter()
            .all(Result::is_ok)
    );

    proxy.withhold_replies();
    let before = evalsha_calls(&server);
    let checks = keys
        .iter()
        .map(|key| store.check(&policy, key, 1).into_future())
        .collect();
    let decisions = tokio::spawn(at_once(checks));
    // The warm-up's last batch held two decisions: the 40 all queue, for batches of 32 and
    // 8. Both ran, neither answered.
    let ran = eventually(Duration::from_secs(10), async || {
        evalsha_calls(&server) - before == 2
    })
    .await;
    assert!(ran, "{} calls ran", evalsha_calls(&server) - before);
    proxy.sever_withheld();
    for result in decisions.await.unwrap() {
        let err = result.unwrap_err();
        assert!(err.is_connection(), "{err:?}");
    }

    // Each key was counted once, by the call that ran; nothing was sent again.
    let answered = eventually(Duration::from_secs(10), async || {
        store.check(&policy, &Key::new("probe"), 1).await.is_ok()
    })
    .await;
    assert!(answered, "the store reconnects");
    for key in &keys {
        let d = store.check(&policy, key, 1).await.unwrap();
        assert_eq!(d.remaining(), Some(98), "{key:?}");
    }
}

#[tokio::test]
async fn cluster_batches_group_by_slot() {
    let cluster = RedisCluster::start();
    let store = RedisStore::cluster(cluster.urls())
        .prefix(unique_prefix("slots"))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 4, DAY);
    // Six keys (in different slots, so on different masters), ten decisions each, interleaved.
    let keys: Vec<Key> = (0..60)
        .map(|i| Key::new(format!("user{}", i % 6)))
        .collect();
    let calls = || -> u64 { cluster.nodes.iter().map(evalsha_calls).sum() };
    let before = calls();
    let results = decide(&store, &policy, &keys, 1).await;
    let mut admitted = std::collections::HashMap::new();
    for (key, result) in keys.iter().zip(&results) {
        let d = result.as_ref().unwrap_or_else(|e| panic!("{key:?}: {e:?}"));
        *admitted.entry(key.as_str()).or_insert(0) += usize::from(d.is_allowed());
    }
    assert!(admitted.values().all(|&n| n == 4), "{admitted:?}");
    // One alone, then one call per slot, not 60.
    let slots: std::collections::HashSet<u16> = keys
        .iter()
        .map(|key| {
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key.as_str())
                .query(&mut cluster.nodes[0].connection())
                .unwrap()
        })
        .collect();
    assert_eq!(calls() - before, 1 + slots.len() as u64);
}

#[tokio::test]
async fn valkey_batches_too() {
    let Some(server) = valkey("batching::valkey_batches_too") else {
        return;
    };
    let store = redis_store(&server, "valkey").await;
    let policy = Policy::new(
        "multi",
        [
            Limit::gcra(10, DAY).unwrap(),
            Limit::sliding_log(7, DAY).unwrap(),
        ],
    )
    .unwrap();
    let before = evalsha_calls(&server);
    let keys = vec![Key::new("burst"); 40];
    let results = decide(&store, &policy, &keys, 1).await;
    assert_eq!(
        evalsha_calls(&server) - before,
        3,
        "one alone, then 32 and 7"
    );
    let admitted = results
        .iter()
        .filter(|r| r.as_ref().expect("decided").is_allowed())
        .count();
    assert_eq!(admitted, 7);
}

/// Policies named alike with the same algorithms and other counts, periods and penalties (a
/// reloaded policy: the same keys), deciding for keys met several times in one batch, at
/// several costs and at times that differ within a batch: a batch lists each distinct limit
/// once per run of decisions, reads every key once up front, and answers an admission at its
/// time in short; each decision must still be its own call's, in order.
#[tokio::test]
async fn batches_mixing_limits_decide_as_their_own_calls_in_order() {
    let server = RedisServer::start();
    let batched = redis_store(&server, "mixed-batched").await;
    let alone = RedisStore::builder(server.url())
        .prefix(unique_prefix("mixed-alone"))
        .batch(1)
        .connect()
        .await
        .unwrap();
    let mut mixes: Vec<Vec<Algorithm>> = Algorithm::ALL.into_iter().map(|a| vec![a]).collect();
    mixes.push(vec![Algorithm::Gcra, Algorithm::FixedWindow]);
    mixes.push(vec![
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
        Algorithm::TokenBucket,
    ]);
    let t0: u64 = 1_700_000_000_000_000;
    for mix in mixes {
        let policy = |name: &str, count: u64, secs: u64| {
            let limits = mix
                .iter()
                .enumerate()
                .map(|(i, a)| Limit::new(*a, count + i as u64, Duration::from_secs(secs)).unwrap());
            Policy::new(name, limits).unwrap()
        };
        // A policy with a penalty box runs another script, so its batches are others: its
        // keys are its own (the store orders decisions within one script's batches).
        let boxed = policy("q", 4, 1).penalty(Duration::from_secs(2)).unwrap();
        let variants = [policy("p", 4, 1), policy("p", 6, 3), boxed];
        // The scripts loaded, so every call runs the first time it arrives, in order.
        for policy in [&variants[0], &variants[2]] {
            for store in [&batched, &alone] {
                let warm: Vec<Key> = (0..3).map(|i| Key::new(format!("warm{i}"))).collect();
                assert!(
                    decide(store, policy, &warm, 1)
                        .await
                        .iter()
                        .all(Result::is_ok)
                );
            }
        }
        for round in 0..5u64 {
            let decision = |i: usize| {
                let key = Key::new(["x", "y", "x", "z", "x", "y"][i % 6]);
                let policy = &variants[(i / 4 + round as usize) % 2 + usize::from(i % 9 == 8)];
                let cost = [1, 2, 0, 1, 3][i % 5];
                let at = t0 + round * 400_000 + if i % 7 == 3 { 5 } else { 0 };
                (key, policy, cost, at)
            };
            let before = evalsha_calls(&server);
            let checks = (0..24)
                .map(|i| {
                    let (key, policy, cost, at) = decision(i);
                    redlimit::__private::check_at(&batched, policy, &key, cost, at).into_future()
                })
                .collect();
            let results = at_once(checks).await;
            let calls = evalsha_calls(&server) - before;
            assert!(calls <= 4, "{mix:?}: {calls} calls for 24 decisions");
            for (i, result) in results.into_iter().enumerate() {
                let (key, policy, cost, at) = decision(i);
                let own = redlimit::__private::check_at(&alone, policy, &key, cost, at)
                    .await
                    .unwrap();
                assert_eq!(result.unwrap(), own, "{mix:?}, round {round}, decision {i}");
            }
        }
    }
}

/// A key of another type among fresh keys (none of which a batch's `MGET` finds either): only
/// its own decision fails, with the server's `WRONGTYPE`, and the key is left as it was.
#[tokio::test]
async fn a_key_of_the_wrong_type_among_fresh_ones_fails_alone_and_is_left_be() {
    let server = RedisServer::start();
    let mut conn = server.connection();
    let mut mixes: Vec<Vec<Algorithm>> = [
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
    ]
    .into_iter()
    .map(|a| vec![a])
    .collect();
    mixes.push(vec![Algorithm::TokenBucket, Algorithm::Gcra]);
    for mix in mixes {
        for penalty in [false, true] {
            let prefix = unique_prefix("wrong-fresh");
            let store = RedisStore::builder(server.url())
                .prefix(prefix.clone())
                .connect()
                .await
                .unwrap();
            let limits = mix.iter().map(|a| Limit::new(*a, 5, DAY).unwrap());
            let mut policy = Policy::new("p", limits).unwrap();
            if penalty {
                policy = policy.penalty(Duration::from_secs(60)).unwrap();
            }
            // The last limit's key holds a list.
            let code = match mix.last().unwrap() {
                Algorithm::Gcra => "gc",
                Algorithm::FixedWindow => "fw",
                Algorithm::SlidingWindow => "sw",
                _ => "tb",
            };
            let bad = format!("{prefix}:p:{{bad}}:{code}{}", mix.len() - 1);
            let _: () = redis::cmd("RPUSH")
                .arg(&bad)
                .arg("x")
                .query(&mut conn)
                .unwrap();
            let keys: Vec<Key> = (0..12)
                .map(|i| {
                    Key::new(if i == 6 {
                        "bad".to_owned()
                    } else {
                        format!("k{i}")
                    })
                })
                .collect();
            // The scripts loaded, so every call runs the first time it arrives.
            let warm: Vec<Key> = (0..3).map(|i| Key::new(format!("warm{i}"))).collect();
            assert!(
                decide(&store, &policy, &warm, 1)
                    .await
                    .iter()
                    .all(Result::is_ok)
            );
            // Cost 0: a full token bucket would otherwise be deleted rather than written.
            for cost in [1, 0] {
                let before = evalsha_calls(&server);
                let results = decide(&store, &policy, &keys, cost).await;
                // At most the first alone: the wrong key is decided in a batch.
                let calls = evalsha_calls(&server) - before;
                assert!(calls <= 2, "{mix:?}, penalty {penalty}: {calls} calls");
                for (key, result) in keys.iter().zip(&results) {
                    let what = format!("{mix:?}, penalty {penalty}, cost {cost}, {key:?}");
                    if key.as_str() == "bad" {
                        let err = result.as_ref().unwrap_err();
                        let source = std::error::Error::source(err).expect("the redis error");
                        let redis = source.downcast_ref::<redis::RedisError>().unwrap();
                        assert_eq!(redis.code(), Some("WRONGTYPE"), "{what}: {redis}");
                    } else {
                        assert!(result.as_ref().expect(&what).is_allowed(), "{what}");
                    }
                }
            }
            let kind: String = redis::cmd("TYPE").arg(&bad).query(&mut conn).unwrap();
            let items: Vec<String> = redis::cmd("LRANGE")
                .arg(&bad)
                .arg(0)
                .arg(-1)
                .query(&mut conn)
                .unwrap();
            assert_eq!((kind.as_str(), &items[..]), ("list", &["x".to_owned()][..]));
        }
    }
}

/// A batch of more keys than Lua's `unpack` takes at once (the script reads them in chunks of
/// 1 000): every decision its own, a key of another type failing alone.
#[tokio::test]
async fn a_batch_of_more_keys_than_unpack_takes_reads_them_in_chunks() {
    let server = RedisServer::start();
    let prefix = unique_prefix("chunks");
    let store = RedisStore::builder(server.url())
        .prefix(prefix.clone())
        .batch(1_500)
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 2, DAY);
    // The scripts loaded, so every call runs the first time it arrives, in order.
    let warm: Vec<Key> = (0..3).map(|i| Key::new(format!("warm{i}"))).collect();
    assert!(
        decide(&store, &policy, &warm, 1)
            .await
            .iter()
            .all(Result::is_ok)
    );
    // Two keys whose TAT is far ahead (a backlog clamped to full: nothing left), one in each
    // chunk.
    for full in ["k7", "k1107"] {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}:p:{{{full}}}:gc0"))
            .arg(format!("{} 43200000000", u64::MAX / 2))
            .query(&mut server.connection())
            .unwrap();
    }
    let _: () = redis::cmd("RPUSH")
        .arg(format!("{prefix}:p:{{k1234}}:gc0"))
        .arg("x")
        .query(&mut server.connection())
        .unwrap();
    // 1 300 keys, then the first 100 again (a second decision each).
    let keys: Vec<Key> = (0..1_400)
        .map(|i| Key::new(format!("k{}", i % 1_300)))
        .collect();
    let before = evalsha_calls(&server);
    let results = decide(&store, &policy, &keys, 1).await;
    let calls = evalsha_calls(&server) - before;
    assert!(calls <= 2, "{calls} calls");
    for (i, (key, result)) in keys.iter().zip(&results).enumerate() {
        match key.as_str() {
            "k1234" => {
                let err = result.as_ref().unwrap_err();
                let source = std::error::Error::source(err).expect("the redis error");
                let redis = source.downcast_ref::<redis::RedisError>().unwrap();
                assert_eq!(redis.code(), Some("WRONGTYPE"), "{redis}");
            }
            name => {
                let d = result.as_ref().unwrap_or_else(|e| panic!("{name}: {e:?}"));
                let full = name == "k7" || name == "k1107";
                let left = if full || i >= 1_300 { 0 } else { 1 };
                assert_eq!(d.remaining(), Some(left), "decision {i}, {name}");
            }
        }
    }
}
