//! How long a batch waits for more while a call is in flight (`RedisStoreBuilder::batch_linger`):
//! until that call is answered, a batch is full or the linger has passed, and only while the
//! store's calls are answered within the linger.
//!
//! As in `batching`, the tests run on a current-thread runtime and start checks by polling
//! them once; a frozen proxy holds every call in flight, so which decisions share a call is
//! known without any timing.

use crate::support;

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use futures_util::future::{MaybeDone, join_all, maybe_done};
use redlimit::key::Key;
use redlimit::store::{RedisStore, RedisStoreBuilder, Store};
use redlimit::{Decision, StoreError};
use support::*;

use super::batching::{DAY, decide, evalsha_calls};

/// Checks started (polled once each) and not yet awaited.
type Started<F> = Vec<MaybeDone<F>>;

/// Starts a check of `policy` for each of `keys`, then lets the runtime's other tasks (the
/// batcher's) run for a while.
async fn start(
    store: &RedisStore,
    policy: &redlimit::Policy,
    keys: Vec<String>,
) -> Started<impl Future<Output = Result<Decision, StoreError>> + Unpin> {
    let mut checks: Vec<_> = keys
        .into_iter()
        .map(|key| maybe_done(store.check(policy, &Key::new(key), 1).into_future()))
        .collect();
    std::future::poll_fn(|cx| {
        for check in &mut checks {
            let _ = pin!(check).poll(cx);
        }
        Poll::Ready(())
    })
    .await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    checks
}

/// Awaits started checks.
async fn finish<F: Future + Unpin>(mut checks: Started<F>) -> Vec<F::Output> {
    join_all(checks.iter_mut().map(|c| async { (&mut *c).await })).await;
    checks
        .into_iter()
        .map(|mut c| std::pin::Pin::new(&mut c).take_output().expect("done"))
        .collect()
}

/// A store of `settings` with the scripts loaded and its round trip measured.
async fn warm_store(name: &str, settings: RedisStoreBuilder) -> RedisStore {
    let store = settings
        .prefix(unique_prefix(name))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 1_000, DAY);
    let warm: Vec<Key> = (0..3).map(|i| Key::new(format!("warm{i}"))).collect();
    for _ in 0..3 {
        let results = decide(&store, &policy, &warm, 1).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
    store
}

/// The first check alone, then two groups of ten started one after the other while it is in
/// flight (frozen): the calls they took, and every check's outcome.
async fn two_groups_behind_a_frozen_call(
    server: &RedisServer,
    proxy: &Proxy,
    store: &RedisStore,
) -> u64 {
    let policy = gcra_policy("p", 1_000, DAY);
    let before = evalsha_calls(server);
    proxy.freeze();
    let first = start(store, &policy, vec!["first".to_owned()]).await;
    let one = start(store, &policy, (0..10).map(|i| format!("a{i}")).collect()).await;
    let two = start(store, &policy, (0..10).map(|i| format!("b{i}")).collect()).await;
    proxy.thaw();
    for checks in [first, one, two] {
        for result in finish(checks).await {
            assert!(result.expect("decided").is_allowed());
        }
    }
    evalsha_calls(server) - before
}

#[tokio::test]
async fn a_batch_waits_for_the_call_in_flight_and_takes_what_came_meanwhile() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let settings = RedisStore::builder(proxy.url()).batch_linger(Duration::from_secs(3_600));
    let store = warm_store("held", settings).await;
    let calls = two_groups_behind_a_frozen_call(&server, &proxy, &store).await;
    assert_eq!(calls, 2, "the first alone, then both groups in one call");
}

#[tokio::test]
async fn without_a_linger_each_batch_goes_out_at_once() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let settings = RedisStore::builder(proxy.url()).batch_linger(Duration::ZERO);
    let store = warm_store("unheld", settings).await;
    let calls = two_groups_behind_a_frozen_call(&server, &proxy, &store).await;
    assert_eq!(calls, 3, "the first alone, then each group in its own call");
}

#[tokio::test]
async fn a_store_further_away_than_its_linger_holds_nothing() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(20)).await;
    // Every call has taken 20 ms or more: longer than the linger.
    let settings = RedisStore::builder(proxy.url()).batch_linger(Duration::from_millis(1));
    let store = warm_store("far", settings).await;
    // Its last batch held several decisions, yet with nothing in flight the first of ten
    // goes out alone, at once.
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let before = evalsha_calls(&server);
    let keys: Vec<Key> = (0..10).map(|i| Key::new(format!("k{i}"))).collect();
    let results = decide(&store, &gcra_policy("p", 1_000, DAY), &keys, 1).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        evalsha_calls(&server) - before,
        2,
        "the first alone, then nine"
    );
    let calls = two_groups_behind_a_frozen_call(&server, &proxy, &store).await;
    assert_eq!(calls, 3, "the first alone, then each group in its own call");
}

/// A store that has only ever sent decisions one at a time knows its round trip from those:
/// further away than its linger, its first batches are not held either.
#[tokio::test]
async fn calls_sent_alone_tell_the_linger_the_round_trip() {
    let server = RedisServer::start();
    let proxy = Proxy::with_rtt(server.port(), Duration::from_millis(40)).await;
    // Long enough that a hold would outlast the test's turns, shorter than the round trip.
    let store = RedisStore::builder(proxy.url())
        .batch_linger(Duration::from_millis(20))
        .prefix(unique_prefix("alone"))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 1_000, DAY);
    for i in 0..3 {
        let decision = store.check(&policy, &Key::new(format!("warm{i}")), 1).await;
        assert!(decision.expect("decided").is_allowed());
    }
    let calls = two_groups_behind_a_frozen_call(&server, &proxy, &store).await;
    assert_eq!(calls, 3, "the first alone, then each group in its own call");
}

/// A batch held behind a call that is never answered (its reply withheld) still goes out:
/// after the linger, or once that call fails (the linger's own bound: `linger.rs`'s tests).
#[tokio::test]
async fn a_batch_held_behind_a_call_never_answered_goes_out() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let settings = RedisStore::builder(proxy.url()).batch_linger(Duration::from_millis(50));
    let store = warm_store("unanswered", settings).await;
    let policy = gcra_policy("p", 1_000, DAY);
    let before = evalsha_calls(&server);
    proxy.withhold_replies();
    let first = start(&store, &policy, vec!["first".to_owned()]).await;
    let ten = start(&store, &policy, (0..10).map(|i| format!("k{i}")).collect()).await;
    let sent = eventually(Duration::from_secs(20), async || {
        evalsha_calls(&server) - before >= 2
    })
    .await;
    assert!(
        sent,
        "{} calls reached Redis",
        evalsha_calls(&server) - before
    );
    proxy.sever_withheld();
    for checks in [first, ten] {
        for result in finish(checks).await {
            assert!(result.unwrap_err().is_connection());
        }
    }
}

/// With nothing in flight, a decision goes out alone at once, unless the last batch held
/// several: decisions then come several at a time, and those made in one turn share a call.
#[tokio::test]
async fn once_decisions_come_several_at_a_time_those_of_one_turn_share_a_call() {
    let server = RedisServer::start();
    // Redis always counts as near (a debug build's calls may take longer than the default).
    let settings = RedisStore::builder(server.url()).batch_linger(Duration::from_secs(3_600));
    let store = settings
        .prefix(unique_prefix("busy"))
        .connect()
        .await
        .unwrap();
    let policy = gcra_policy("p", 1_000, DAY);
    let keys = |tag: &str| -> Vec<Key> { (0..10).map(|i| Key::new(format!("{tag}{i}"))).collect() };
    let calls_for = async |keys: Vec<Key>| {
        let before = evalsha_calls(&server);
        for result in decide(&store, &policy, &keys, 1).await {
            assert!(result.expect("decided").is_allowed());
        }
        // The call answered stops counting as in flight once its callers have run.
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        evalsha_calls(&server) - before
    };
    assert_eq!(calls_for(keys("a")).await, 2, "the first alone, then nine");
    assert_eq!(calls_for(keys("b")).await, 1, "ten in one call");
    assert_eq!(calls_for(keys("c")[..1].to_vec()).await, 1, "one alone");
    assert_eq!(
        calls_for(keys("d")).await,
        2,
        "a batch of one: the first alone again"
    );
}
