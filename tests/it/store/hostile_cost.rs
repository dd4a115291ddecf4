//! A request's cost must not buy it work in the store: a sliding-log decision of cost 10⁶
//! writes one log entry, not a million (before, it blocked Redis for 5 s and added 126 MB).

use crate::support;

use std::time::Duration;

use redlimit::store::{MemoryStore, RedisStore, Store};
use redlimit::{Key, Limit, Policy};
use support::{RedisServer, unique_prefix};

fn redis_usec_per_evalsha(server: &RedisServer) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec_per_call=")))
        .and_then(|v| v.parse().ok())
        .expect("evalsha stats")
}

#[tokio::test]
async fn a_huge_cost_writes_one_log_entry() {
    let server = RedisServer::start();
    let prefix = unique_prefix("cost");
    let store = RedisStore::builder(server.url())
        .prefix(prefix.clone())
        .connect()
        .await
        .unwrap();
    let policy = Policy::new(
        "bulk",
        [
            Limit::sliding_log(3_000_000, Duration::from_secs(3600)).unwrap(),
            Limit::sliding_log(2_000_000, Duration::from_secs(60)).unwrap(),
        ],
    )
    .unwrap();
    let memory = MemoryStore::new();
    let key = Key::new("tenant");
    for left in [1_000_000, 0] {
        let d = store.check(&policy, &key, 1_000_000).await.unwrap();
        assert!(d.is_allowed());
        assert_eq!(d.remaining(), Some(left));
        assert!(memory.check_now(&policy, &key, 1_000_000).is_allowed());
    }
    let d = store.check(&policy, &key, 1).await.unwrap();
    assert!(!d.is_allowed(), "2 000 000 of 2 000 000 per minute used");
    assert!(!memory.check_now(&policy, &key, 1).is_allowed());

    let mut connection = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut connection)
        .unwrap();
    assert_eq!(
        keys.len(),
        1,
        "one log for both sliding-log limits: {keys:?}"
    );
    let entries: u64 = redis::cmd("ZCARD")
        .arg(&keys[0])
        .query(&mut connection)
        .unwrap();
    // The log's marker (total 0), then one entry per admission.
    assert_eq!(entries, 3, "one entry per admission, whatever its cost");
    // Generous: a regression to one entry per unit took seconds per call.
    let usec = redis_usec_per_evalsha(&server);
    assert!(usec < 100_000.0, "a decision took {usec} µs of Redis time");
    eprintln!("sliding-log decisions of cost 10^6: {usec} µs of Redis time per call");
}
