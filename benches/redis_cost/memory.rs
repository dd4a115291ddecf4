//! The memory rows: client keys driven to a typical state, and the bytes Redis holds for each
//! (`MEMORY USAGE`, `used_memory`).

use std::time::Duration;

use redlimit::{Algorithm, Limit, Policy};

use crate::support::redis_info;
use crate::throughput::{Workload, send};
use crate::{PREFIX, flush};

/// One memory scenario: client keys driven to a typical state.
pub(crate) struct MemoryRow {
    pub(crate) name: String,
    pub(crate) algorithm: Algorithm,
    /// At the typical limit (100/60s), so it goes in the main table.
    pub(crate) typical: bool,
    /// Sliding log entries per key.
    pub(crate) entries: Option<usize>,
    pub(crate) redis_keys_per_client: f64,
    pub(crate) usage_per_client: f64,
    pub(crate) used_memory_per_client: f64,
    pub(crate) encoding: String,
}

/// Drives `clients` client keys with `calls` allowed checks each (interleaved, so every check
/// of a key has its own time), then sums `MEMORY USAGE` over the keys written.
fn memory_scenario(
    con: &mut redis::Connection,
    name: &str,
    limit: Limit,
    calls: usize,
    clients: usize,
) -> MemoryRow {
    flush(con);
    let policy_name = "api";
    let policy = Policy::new(policy_name, [limit]).unwrap();
    let used_memory = |con: &mut redis::Connection| -> f64 {
        redis_info(con, "memory")["used_memory"]
            .parse()
            .expect("used_memory")
    };
    let used_before = used_memory(con);
    let workload = Workload::script(con, &policy, (0..calls).flat_map(|_| 0..clients));
    for (pipeline, commands) in &workload.pipelines {
        let (n, allowed, errors) = send(con, pipeline, *commands);
        assert_eq!(
            (n, allowed, errors),
            (*commands as u64, n, 0),
            "{name}: every check should be allowed"
        );
    }
    drop(workload);
    let used_after = used_memory(con);
    let pattern = format!("{PREFIX}:{policy_name}:*");
    let mut keys: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .cursor_arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query(con)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    assert!(!keys.is_empty(), "{name}: no keys written");
    let mut usage = 0u64;
    for key in &keys {
        let bytes: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(con)
            .expect("MEMORY USAGE");
        usage += bytes;
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).expect("PTTL");
        assert!(ttl > 0, "{key} has no TTL");
    }
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&keys[0])
        .query(con)
        .expect("OBJECT ENCODING");
    let encoding = if limit.algorithm() == Algorithm::SlidingLog {
        let entries: u64 = redis::cmd("ZCARD").arg(&keys[0]).query(con).expect("ZCARD");
        format!("{encoding}, {entries} entries, key `{}`", keys[0])
    } else {
        let value: String = redis::cmd("GET").arg(&keys[0]).query(con).expect("GET");
        format!("{encoding} `{value}`, key `{}`", keys[0])
    };
    MemoryRow {
        name: name.to_owned(),
        algorithm: limit.algorithm(),
        typical: limit.count() == 100,
        entries: (limit.algorithm() == Algorithm::SlidingLog).then_some(calls),
        redis_keys_per_client: keys.len() as f64 / clients as f64,
        usage_per_client: usage as f64 / clients as f64,
        used_memory_per_client: (used_after - used_before) / clients as f64,
        encoding,
    }
}

/// Every memory scenario: each algorithm at 100/60s after 10 checks, and the sliding log at
/// several fills.
pub(crate) fn scenarios(con: &mut redis::Connection) -> Vec<MemoryRow> {
    let typical = Duration::from_secs(60);
    let mut memory = Vec::new();
    for algorithm in Algorithm::ALL {
        let limit = Limit::new(algorithm, 100, typical).unwrap();
        if algorithm == Algorithm::SlidingLog {
            memory.push(memory_scenario(
                con,
                "sliding-log 100/60s, 10 entries",
                limit,
                10,
                1000,
            ));
            memory.push(memory_scenario(
                con,
                "sliding-log 100/60s, 100 entries (full)",
                limit,
                100,
                1000,
            ));
            memory.push(memory_scenario(
                con,
                "sliding-log 200/60s, 200 entries (full)",
                Limit::sliding_log(200, typical).unwrap(),
                200,
                100,
            ));
        } else {
            memory.push(memory_scenario(
                con,
                &format!("{algorithm} 100/60s, after 10 checks"),
                limit,
                10,
                1000,
            ));
        }
    }
    memory
}
