//! A `LocalFirstStore` is a `RedisStore` to the layer and the health check: it loads the
//! policies' scripts ahead (`Store::prepare`) and answers probes (`Store::probe`) through the
//! Redis store it wraps, so the first cold decision costs one round trip and a frozen Redis
//! opens the breaker at once, as without local-first mode.

use crate::support::{RedisServer, eventually, unique_prefix};

use std::time::Duration;

use redlimit::store::{LocalFirstStore, RedisStore, Store};
use redlimit::{Limit, Policy};

async fn local_first(server: &RedisServer, name: &str) -> LocalFirstStore {
    let redis = RedisStore::builder(server.url())
        .prefix(unique_prefix(name))
        .connect()
        .await
        .expect("connect");
    LocalFirstStore::builder(redis)
        .build()
        .expect("local-first")
}

#[tokio::test]
async fn prepare_loads_the_policys_script_into_redis() {
    let server = RedisServer::start();
    let store = local_first(&server, "prepare").await;
    // Two limits of two algorithms: a script nothing else loads.
    let policy = Policy::new(
        "prepared",
        [
            Limit::sliding_window(7, Duration::from_secs(3)).unwrap(),
            Limit::token_bucket(11, Duration::from_secs(5)).unwrap(),
        ],
    )
    .unwrap();
    let sha = redis::Script::new(RedisStore::script_source_for(&policy))
        .get_hash()
        .to_owned();
    let mut redis = server.connection();
    let mut loaded = move || -> bool {
        redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&sha)
            .query::<Vec<bool>>(&mut redis)
            .expect("SCRIPT EXISTS")
            == [true]
    };
    assert!(
        !loaded(),
        "no decision was made: the script is not loaded yet"
    );
    store.prepare(&policy);
    assert!(
        eventually(Duration::from_secs(10), async || loaded()).await,
        "prepare did not load the policy's script"
    );
}

#[tokio::test]
async fn probe_pings_the_redis_behind() {
    let server = RedisServer::start();
    let store = local_first(&server, "probe").await;
    let probe = store.probe(0).expect("a local-first store offers probes");
    tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .expect("the probe answers")
        .expect("Redis answers the probe");
    server.freeze();
    let frozen = store.probe(0).expect("a probe");
    let answer = tokio::time::timeout(Duration::from_millis(500), frozen).await;
    server.thaw();
    assert!(
        !matches!(answer, Ok(Ok(()))),
        "a frozen Redis must not answer the probe"
    );
}
