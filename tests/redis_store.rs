//! The Redis store's contract: TTLs on every key, recovery from a flushed script cache, one
//! round trip per decision, and typed errors for state it cannot read.

mod support;

use std::sync::Arc;
use std::time::Duration;

use redis::Commands;
use redlimit::{Algorithm, Key, Limit, Policy, RedisStore, Store, StoreError};
use support::{unique_prefix, RedisServer};

async fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(prefix)
        .connect()
        .await
        .expect("connect")
}

fn every_algorithm(count: u64, period: Duration) -> Arc<Policy> {
    Arc::new(Algorithm::ALL.into_iter().fold(Policy::new("all"), |p, a| {
        p.limit(Limit::new(a, count, period))
    }))
}

#[tokio::test]
async fn every_key_written_has_a_ttl_no_longer_than_its_state_needs() {
    let server = RedisServer::start();
    let prefix = unique_prefix("ttl");
    let store = store(&server, &prefix).await;
    let period = Duration::from_secs(30);
    let policy = every_algorithm(10, period);
    for i in 0..3 {
        let d = store
            .check(&policy, &Key::new(format!("k{i}")), 2)
            .await
            .unwrap();
        assert!(d.is_allowed());
    }
    let mut conn = server.connection();
    let keys: Vec<String> = conn.keys(format!("{prefix}:*")).unwrap();
    // One key per limit and client key.
    assert_eq!(keys.len(), 3 * 5, "{keys:?}");
    for key in keys {
        let ttl: i64 = conn.pttl(&key).unwrap();
        // The sliding window keeps its count through the next window: at most 2P.
        let most = if key.contains(":sw:") { 60_000 } else { 30_000 };
        assert!(ttl > 0 && ttl <= most, "{key}: PTTL {ttl}");
    }
}

#[tokio::test]
async fn recovers_after_script_flush() {
    let server = RedisServer::start();
    let store = store(&server, &unique_prefix("flush")).await;
    let policy = Arc::new(Policy::new("p").limit(Limit::gcra(2, Duration::from_secs(60))));
    let key = Key::new("k");
    assert!(store.check(&policy, &key, 1).await.unwrap().is_allowed());
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .unwrap();
    let d = store
        .check(&policy, &key, 1)
        .await
        .expect("reloads on NOSCRIPT");
    assert!(d.is_allowed());
    assert_eq!(
        d.remaining(),
        Some(0),
        "counted once: the reload did not double-count"
    );
    assert!(!store.check(&policy, &key, 1).await.unwrap().is_allowed());
}

#[tokio::test]
async fn one_script_call_per_decision() {
    let server = RedisServer::start();
    let store = store(&server, &unique_prefix("calls")).await;
    let policy = every_algorithm(100, Duration::from_secs(60));
    // Load the script, then count.
    store.check(&policy, &Key::new("warm"), 1).await.unwrap();
    let mut conn = server.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
    for i in 0..50 {
        store
            .check(&policy, &Key::new(format!("k{i}")), 1)
            .await
            .unwrap();
    }
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    let calls = |name: &str| {
        stats
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
            .and_then(|l| l.split("calls=").nth(1))
            .and_then(|v| v.split(',').next())
            .map_or(0, |v| v.parse::<u64>().unwrap())
    };
    assert_eq!(calls("evalsha"), 50);
    assert_eq!(calls("eval"), 0);
    assert_eq!(calls("script"), 0);
}

#[tokio::test]
async fn unreadable_state_is_reset_and_a_wrong_type_is_a_typed_error() {
    let server = RedisServer::start();
    let prefix = unique_prefix("garbage");
    let store = store(&server, &prefix).await;
    let policy = Arc::new(Policy::new("p").limit(Limit::gcra(1, Duration::from_secs(60))));
    let mut conn = server.connection();
    let key = format!("{prefix}:p:{{garbage}}:gc:1:60000000");
    let _: () = conn.set(&key, "not a number").unwrap();
    let d = store.check(&policy, &Key::new("garbage"), 1).await.unwrap();
    assert!(d.is_allowed(), "unparsable state counts as fresh");
    let _: () = conn.del(&key).unwrap();
    let _: () = conn.lpush(&key, "x").unwrap();
    let err = store
        .check(&policy, &Key::new("garbage"), 1)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Backend(_)), "{err:?}");
}

#[tokio::test]
async fn hostile_key_text_stays_inside_one_hash_tag() {
    let server = RedisServer::start();
    let prefix = unique_prefix("hostile");
    let store = store(&server, &prefix).await;
    let policy = every_algorithm(5, Duration::from_secs(60));
    let hostile = b"}{x}\r\n*3\r\n$3\r\nDEL{\xff\x00 ".repeat(100);
    let d = store.check(&policy, &Key::new(&hostile), 1).await.unwrap();
    assert!(d.is_allowed());
    let keys: Vec<String> = server.connection().keys(format!("{prefix}:*")).unwrap();
    assert_eq!(keys.len(), 5);
    for key in &keys {
        assert!(key.len() < 120, "bounded: {key}");
        let open = key.find('{').unwrap();
        let close = key.find('}').unwrap();
        assert_eq!(key.matches('{').count(), 1, "{key}");
        assert_eq!(
            key[open..=close],
            keys[0][keys[0].find('{').unwrap()..=keys[0].find('}').unwrap()]
        );
    }
}

#[tokio::test]
async fn connect_errors_are_typed() {
    let err = RedisStore::builder("not a url").connect_lazy().unwrap_err();
    assert!(matches!(err, StoreError::Config(_)), "{err:?}");
    let err = RedisStore::builder("redis://127.0.0.1:1")
        .prefix("bad{prefix}")
        .connect_lazy()
        .unwrap_err();
    assert!(matches!(err, StoreError::Config(_)), "{err:?}");
}
