//! The Redis store's contract: TTLs on every key, recovery from a flushed script cache (each
//! policy's own script), one round trip per decision, the largest policy in one script, typed
//! errors that keep the Redis error as their source, and no credentials in any `Debug` output
//! or error message.

use crate::support;

use std::time::Duration;

use redis::Commands;
use redlimit::store::{ManualClock, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, ConfigError, Key, Limit, MAX_LIMITS, Policy, StoreError};
use support::*;

async fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::builder(server.url())
        .prefix(prefix)
        .connect()
        .await
        .expect("connect")
}

fn every_algorithm(count: u64, period: Duration) -> redlimit::Policy {
    every_algorithm_policy("all", count, period)
}

/// What the credential tests put in URLs; none may ever be shown.
const SECRETS: [&str; 3] = ["alice", "hunter2", "s3cr3t"];

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn assert_not_shown(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "`{secret}` shown in: {text}");
    }
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
        let most = if key.contains("}:sw") { 60_000 } else { 30_000 };
        assert!(ttl > 0 && ttl <= most, "{key}: PTTL {ttl}");
    }
}

#[tokio::test]
async fn recovers_after_script_flush() {
    let server = RedisServer::start();
    let store = redis_store(&server, "flush").await;
    let policy = gcra_policy("p", 2, Duration::from_secs(60));
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
async fn a_rewritten_window_keeps_the_ttl_its_first_write_set() {
    let server = RedisServer::start();
    let prefix = unique_prefix("keepttl");
    let store = store(&server, &prefix).await;
    let period = Duration::from_secs(3_600);
    let policy = Policy::new(
        "w",
        [
            Limit::fixed_window(100, period).unwrap(),
            Limit::sliding_window(100, period).unwrap(),
        ],
    )
    .unwrap();
    let key = Key::new("k");
    let mut conn = server.connection();
    assert!(store.check(&policy, &key, 1).await.unwrap().is_allowed());
    let keys: Vec<String> = conn.keys(format!("{prefix}:*")).unwrap();
    assert_eq!(keys.len(), 2);
    let first: Vec<i64> = keys.iter().map(|k| conn.pttl(k).unwrap()).collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    for _ in 0..3 {
        assert!(store.check(&policy, &key, 1).await.unwrap().is_allowed());
    }
    for (key, first) in keys.iter().zip(first) {
        let ttl: i64 = conn.pttl(key).unwrap();
        // Still counting down from the window's first write, never renewed nor removed.
        assert!(ttl > 0 && ttl < first, "{key}: PTTL {ttl} after {first}");
        let state: String = conn.get(key).unwrap();
        assert!(state.contains(" 4"), "{key}: {state}");
    }
}

#[tokio::test]
async fn each_policy_s_own_script_is_reloaded_after_a_flush() {
    let server = RedisServer::start();
    let store = redis_store(&server, "mixes").await;
    let minute = Duration::from_secs(60);
    let policies = [
        gcra_policy("one", 2, minute),
        every_algorithm(2, minute),
        Policy::new(
            "logs",
            [
                Limit::sliding_log(2, minute).unwrap(),
                Limit::gcra(2, minute).unwrap(),
                Limit::sliding_log(3, Duration::from_secs(120)).unwrap(),
            ],
        )
        .unwrap(),
    ];
    let key = Key::new("k");
    for policy in &policies {
        assert!(store.check(policy, &key, 1).await.unwrap().is_allowed());
    }
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut server.connection())
        .unwrap();
    for policy in &policies {
        let d = store
            .check(policy, &key, 1)
            .await
            .expect("reloads the policy's script on NOSCRIPT");
        assert!(d.is_allowed(), "{}", policy.name());
        assert_eq!(d.remaining(), Some(0), "{}: counted once", policy.name());
        assert!(!store.check(policy, &key, 1).await.unwrap().is_allowed());
    }
}

#[tokio::test]
async fn the_largest_policy_runs_in_one_script_and_decides_as_the_memory_store() {
    // MAX_LIMITS limits cycling through every algorithm (so several sliding logs of different
    // periods share one key), counts and periods all different.
    let limits: Vec<Limit> = (0..MAX_LIMITS as u64)
        .map(|i| {
            let algorithm = Algorithm::ALL[i as usize % Algorithm::ALL.len()];
            Limit::new(algorithm, 3 + i, Duration::from_millis(700 + 130 * i)).unwrap()
        })
        .collect();
    let policy = Policy::new("sixteen", limits).unwrap();
    assert_eq!(policy.limits().len(), MAX_LIMITS);
    let server = RedisServer::start();
    let redis = redis_store(&server, "sixteen").await;
    let t0 = 1_700_000_123_456_789;
    let clock = ManualClock::new(t0);
    let memory = MemoryStore::with_clock(clock.clone());
    let key = Key::new("k");
    let (mut allowed, mut denied) = (0, 0);
    for step in 0..60u64 {
        let now = t0 + step * 47_000;
        clock.set(now);
        let cost = step % 3;
        let from_redis = redlimit::__private::check_at(&redis, &policy, &key, cost, now)
            .await
            .unwrap();
        assert_eq!(
            from_redis,
            memory.check_now(&policy, &key, cost),
            "step {step}"
        );
        if from_redis.is_allowed() {
            allowed += 1;
        } else {
            denied += 1;
        }
    }
    assert!(
        allowed > 0 && denied > 0,
        "{allowed} allowed, {denied} denied"
    );
}

#[tokio::test]
async fn one_script_call_per_decision() {
    let server = RedisServer::start();
    let store = redis_store(&server, "calls").await;
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
    let policy = gcra_policy("p", 1, Duration::from_secs(60));
    let mut conn = server.connection();
    let key = format!("{prefix}:p:{{garbage}}:gc0");
    let _: () = conn.set(&key, "not a number").unwrap();
    let d = store.check(&policy, &Key::new("garbage"), 1).await.unwrap();
    assert!(d.is_allowed(), "unparsable state counts as fresh");
    let _: () = conn.del(&key).unwrap();
    let _: () = conn.lpush(&key, "x").unwrap();
    let err = store
        .check(&policy, &Key::new("garbage"), 1)
        .await
        .unwrap_err();
    // WRONGTYPE: the server answered with an error.
    assert!(err.is_script(), "{err:?}");
    let source = std::error::Error::source(&err).expect("the redis error");
    assert!(source.downcast_ref::<redis::RedisError>().is_some());
}

#[tokio::test]
async fn a_stopped_server_is_a_connection_error_with_the_redis_error_as_source() {
    let mut server = RedisServer::start();
    let store = redis_store(&server, "stopped").await;
    let policy = gcra_policy("p", 5, Duration::from_secs(60));
    assert!(store.check(&policy, &Key::new("k"), 1).await.is_ok());
    server.kill();
    for _ in 0..2 {
        let err = store.check(&policy, &Key::new("k"), 1).await.unwrap_err();
        assert!(err.is_connection(), "{err:?}");
        let source = std::error::Error::source(&err).expect("the redis error");
        assert!(
            source.downcast_ref::<redis::RedisError>().is_some(),
            "{source:?}"
        );
    }
    let err = RedisStore::connect(&server.url()).await.unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    let source = std::error::Error::source(&err).expect("the redis error");
    assert!(source.downcast_ref::<redis::RedisError>().is_some());
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
    assert!(matches!(err, ConfigError::Redis(_)), "{err:?}");
    let err = RedisStore::builder("redis://127.0.0.1:1")
        .prefix("bad{prefix}")
        .connect_lazy()
        .unwrap_err();
    assert!(matches!(err, ConfigError::InvalidPrefix(_)), "{err:?}");
    let err = RedisStore::builder("not a url")
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Config(ConfigError::Redis(_))),
        "{err:?}"
    );
}

#[tokio::test]
async fn debug_output_shows_no_credentials() {
    let standalone = RedisStore::builder("redis://alice:hunter2@127.0.0.1:6379/2").prefix("rl");
    let text = format!("{standalone:?}");
    assert_not_shown(&text);
    assert!(text.contains("redis://127.0.0.1:6379"), "{text}");
    let store = standalone.connect_lazy().unwrap();
    let text = format!("{store:?} {store:#?}");
    assert_not_shown(&text);
    assert!(
        text.contains("redis://127.0.0.1:6379") && text.contains("rl"),
        "{text}"
    );

    let cluster = RedisStore::cluster([
        "redis://:hunter2@10.0.0.1:6379",
        "redis://alice:s3cr3t@10.0.0.2:6379",
    ]);
    let text = format!("{cluster:?}");
    assert_not_shown(&text);
    assert!(text.contains("redis://10.0.0.1:6379") && text.contains("redis://10.0.0.2:6379"));
    // The client refuses nodes with different passwords: the error names them, redacted.
    let err = cluster.connect_lazy().unwrap_err();
    assert!(err.to_string().contains("redis://10.0.0.2:6379"), "{err}");
    assert_no_secret(&err, &SECRETS);
    let cluster = RedisStore::cluster([
        "redis://alice:hunter2@10.0.0.1:6379",
        "redis://alice:hunter2@10.0.0.2:6379",
    ]);
    assert_not_shown(&format!("{cluster:?}"));
    assert_not_shown(&format!("{:?}", cluster.connect_lazy().unwrap()));

    let sentinel = RedisStore::sentinel(
        [
            "redis://:hunter2@10.0.0.1:26379",
            "redis://alice:s3cr3t@10.0.0.2:26379",
        ],
        "mymaster",
    );
    let text = format!("{sentinel:?}");
    assert_not_shown(&text);
    assert!(
        text.contains("redis://10.0.0.2:26379") && text.contains("mymaster"),
        "{text}"
    );
    assert_not_shown(&format!("{:?}", sentinel.connect_lazy().unwrap()));
}

#[tokio::test]
async fn an_invalid_url_is_not_echoed() {
    for url in [
        "redis://alice:hunter2@host:6379/notadb",
        "redis://:hunter2@0.0.0.0:6379",
        "alice:hunter2@host",
        "http://alice:hunter2@host",
    ] {
        let err = RedisStore::builder(url).connect_lazy().unwrap_err();
        assert!(matches!(err, ConfigError::Redis(_)), "{url}: {err:?}");
        assert_no_secret(&err, &SECRETS);
        let err = RedisStore::cluster([url]).connect_lazy().unwrap_err();
        assert_no_secret(&err, &SECRETS);
    }
    let err = RedisStore::builder("alice:hunter2")
        .connect_lazy()
        .unwrap_err();
    assert!(err.to_string().contains("<invalid url>"), "{err}");
}

#[tokio::test]
async fn connect_failures_show_no_credentials() {
    // Nothing listens.
    let port = dead_port();
    let url = format!("redis://alice:hunter2@127.0.0.1:{port}");
    let err = RedisStore::connect(&url).await.unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert_no_secret(&err, &SECRETS);
    let err = RedisStore::cluster([url.as_str()])
        .connect()
        .await
        .unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert_no_secret(&err, &SECRETS);
    let err = RedisStore::sentinel([url.as_str()], "mymaster")
        .connect()
        .await
        .unwrap_err();
    assert!(err.is_connection(), "{err:?}");
    assert_no_secret(&err, &SECRETS);

    // A server that refuses the password.
    let server = RedisServer::start_with(&["--requirepass", "s3cr3t-right"]);
    let wrong = format!("redis://:hunter2@127.0.0.1:{}", server.port());
    let err = RedisStore::connect(&wrong).await.unwrap_err();
    assert!(err.is_connection(), "authentication failed: {err:?}");
    assert_no_secret(&err, &SECRETS);
    let right = format!("redis://:s3cr3t-right@127.0.0.1:{}", server.port());
    let store = RedisStore::builder(right)
        .prefix(unique_prefix("auth"))
        .connect()
        .await
        .expect("the right password");
    assert_not_shown(&format!("{store:?}"));
    let policy = gcra_policy("p", 1, Duration::from_secs(60));
    assert!(
        store
            .check(&policy, &Key::new("k"), 1)
            .await
            .unwrap()
            .is_allowed()
    );
}
