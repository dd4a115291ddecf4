//! A per-second store (envoyproxy/ratelimit's `REDIS_PERSECOND`) over two real redis-servers:
//! the limits whose unit is `second` count in the second, every other limit in the first; a
//! request spread over both is one call per store, and a refusal by either charges nothing in
//! the other; the second failing gets the domain's failure mode.

use std::time::Duration;

use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::rls::proto::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use redlimit::rls::{FailureMode, RateLimitService};
use redlimit::store::Commit;
use tonic::Status;

use super::service::d;
use crate::support::redis_server::RedisServer;
use crate::support::{eventually, redis_store, unique_prefix};

/// `fast` is one per second for an hour (unit `second`: the per-second store, whatever its
/// multiplier), `tick` one per plain second, `slow` five a minute for a day (unit `minute`:
/// the main store). The day-long windows keep the counts from resetting during a test.
const CONFIG: &str = "
domain: split
descriptors:
  - {key: fast, rate_limit: {unit: second, unit_multiplier: 3600, requests_per_unit: 1}}
  - {key: tick, rate_limit: {unit: second, requests_per_unit: 1000}}
  - {key: slow, rate_limit: {unit: minute, unit_multiplier: 1440, requests_per_unit: 5}}
";

/// How long a condition that holds at once on a quiet machine may take on a busy one.
const PATIENCE: Duration = Duration::from_secs(10);

struct Two {
    main: RedisServer,
    per_second: RedisServer,
    prefix: String,
    service: RateLimitService,
}

/// A service over two redis-servers, both stores under one key prefix.
async fn two(name: &str, mode: FailureMode) -> Two {
    let (main, per_second) = (RedisServer::start(), RedisServer::start());
    let prefix = unique_prefix(name);
    let store = |server: &RedisServer| {
        redlimit::store::RedisStore::builder(server.url())
            .prefix(prefix.clone())
            .connect()
    };
    let service = RateLimitService::builder(store(&main).await.expect("the main store"))
        .commit(Commit::AllOrNone)
        .per_second_store(store(&per_second).await.expect("the per-second store"))
        .config(RlsConfig::parse([("split.yaml", CONFIG)], false).expect("config"))
        // Generous for a busy machine.
        .store_deadline(Duration::from_secs(5))
        .on_store_error(mode)
        .build();
    Two {
        main,
        per_second,
        prefix,
        service,
    }
}

impl Two {
    async fn ask(&self, descriptors: &[(&str, &str)]) -> Result<RateLimitResponse, Status> {
        let request = RateLimitRequest {
            domain: "split".into(),
            descriptors: descriptors.iter().map(|&entry| d(&[entry])).collect(),
            hits_addend: 0,
        };
        self.service.should_rate_limit(request).await
    }

    /// What `descriptor` has left, read without charging.
    async fn left(&self, descriptor: (&str, &str)) -> u32 {
        let mut read = d(&[descriptor]);
        read.hits_addend = Some(0);
        let request = RateLimitRequest {
            domain: "split".into(),
            descriptors: vec![read],
            hits_addend: 0,
        };
        let answer = self.service.should_rate_limit(request).await.expect("read");
        answer.statuses[0].limit_remaining
    }
}

/// The keys of `server` under `prefix`.
fn keys(server: &RedisServer, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut server.connection())
        .expect("KEYS");
    keys.sort();
    keys
}

/// The script calls `server` has run (`EVALSHA` and `EVAL`; not those refused for a script
/// not loaded yet, which the store loads and calls again).
fn script_calls(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO commandstats");
    info.lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .map(|line| stat(line, "calls=") - stat(line, "failed_calls="))
        .sum()
}

/// The number after `name` in a line of `INFO commandstats`.
fn stat(line: &str, name: &str) -> u64 {
    line.split(',')
        .flat_map(|field| field.split(':'))
        .find_map(|field| field.strip_prefix(name)?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_limits_count_in_the_per_second_store_and_the_rest_in_the_main_one() {
    let two = two("persec-homes", FailureMode::Unavailable).await;
    // The first request loads the scripts and reads the admin API's overrides.
    let first = two.ask(&[("fast", "0"), ("slow", "0")]).await.unwrap();
    assert_eq!(first.overall_code(), Code::Ok);
    let (main_calls, per_second_calls) = (script_calls(&two.main), script_calls(&two.per_second));
    let answer = two
        .ask(&[("fast", "1"), ("slow", "1"), ("fast", "2"), ("slow", "2")])
        .await
        .expect("answered");
    assert_eq!(answer.overall_code(), Code::Ok);
    let remaining: Vec<u32> = answer.statuses.iter().map(|s| s.limit_remaining).collect();
    assert_eq!(remaining, [0, 4, 0, 4]);
    // Four descriptors over two stores: one atomic call to each.
    assert_eq!(
        script_calls(&two.main),
        main_calls + 1,
        "calls to the main store"
    );
    assert_eq!(
        script_calls(&two.per_second),
        per_second_calls + 1,
        "calls to the per-second store"
    );
    let (main, per_second) = (
        keys(&two.main, &two.prefix),
        keys(&two.per_second, &two.prefix),
    );
    assert_eq!(main.len(), 3, "the minute counters: {main:?}");
    assert!(main.iter().all(|k| k.contains("slow")), "{main:?}");
    assert_eq!(per_second.len(), 3, "the second counters: {per_second:?}");
    assert!(
        per_second.iter().all(|k| k.contains("fast")),
        "{per_second:?}"
    );

    // A plain per-second limit, whose key lives a second: found in the second store right
    // after a request, on some try, and never in the first.
    let found = eventually(PATIENCE, async || {
        let answer = two.ask(&[("tick", "1")]).await.expect("answered");
        assert_eq!(answer.overall_code(), Code::Ok);
        let in_main = keys(&two.main, &two.prefix);
        assert!(in_main.iter().all(|k| !k.contains("tick")), "{in_main:?}");
        keys(&two.per_second, &two.prefix)
            .iter()
            .any(|k| k.contains("tick"))
    })
    .await;
    assert!(
        found,
        "the per-second counter never showed in the per-second store"
    );
}

/// The number after `name` in the line of `section` (of `INFO`) that starts with `line`.
fn info(server: &RedisServer, section: &str, line: &str, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(&mut server.connection())
        .expect("INFO");
    info.lines()
        .filter(|l| l.starts_with(line))
        .map(|l| stat(l, name))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limits_script_is_loaded_ahead_into_the_store_that_runs_it() {
    let two = two("persec-ahead", FailureMode::Unavailable).await;
    let loads =
        |server: &RedisServer| info(server, "commandstats", "cmdstat_script|load:", "calls=");
    // One limit script and its batch twin in each store (fixed windows alike), before any call;
    // besides the overrides poll's script, which each store loads before its first poll.
    let loaded = eventually(PATIENCE, async || {
        loads(&two.main) >= 3 && loads(&two.per_second) >= 3
    })
    .await;
    assert!(loaded, "the scripts were not loaded ahead");
    for entry in [("fast", "1"), ("slow", "1"), ("tick", "1")] {
        let answer = two.ask(&[entry]).await.expect("answered");
        assert_eq!(answer.overall_code(), Code::Ok);
    }
    for server in [&two.main, &two.per_second] {
        let noscript = info(server, "errorstats", "errorstat_NOSCRIPT:", "count=");
        assert_eq!(noscript, 0, "a first check found its script missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_by_either_store_charges_nothing_in_the_other() {
    let two = two("persec-refusal", FailureMode::Unavailable).await;
    assert_eq!(
        two.ask(&[("fast", "1")]).await.unwrap().overall_code(),
        Code::Ok
    );
    // `fast=1` is spent: the per-second store refuses, and `slow`'s charge in the main store
    // (made at the same time) is given back.
    let refused = two.ask(&[("slow", "1"), ("fast", "1")]).await.unwrap();
    assert_eq!(refused.overall_code(), Code::OverLimit);
    assert_eq!(refused.statuses[1].code(), Code::OverLimit);
    let whole = eventually(PATIENCE, async || two.left(("slow", "1")).await == 5).await;
    assert!(
        whole,
        "the refused request's charge stayed in the main store"
    );

    // The other way round: `slow=2` spent in the main store, `fast=2` not charged.
    for _ in 0..5 {
        let answer = two.ask(&[("slow", "2")]).await.unwrap();
        assert_eq!(answer.overall_code(), Code::Ok);
    }
    let refused = two.ask(&[("fast", "2"), ("slow", "2")]).await.unwrap();
    assert_eq!(refused.overall_code(), Code::OverLimit);
    let whole = eventually(PATIENCE, async || two.left(("fast", "2")).await == 1).await;
    assert!(
        whole,
        "the refused request's charge stayed in the per-second store"
    );
    assert_eq!(
        two.ask(&[("fast", "2")]).await.unwrap().overall_code(),
        Code::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_second_store_down_gets_the_failure_mode_and_spares_the_main_ones_limits() {
    let mut two = two("persec-down", FailureMode::Closed).await;
    assert_eq!(
        two.ask(&[("fast", "1"), ("slow", "1")])
            .await
            .unwrap()
            .overall_code(),
        Code::Ok
    );
    two.per_second.kill();
    // A request with a per-second limit: the store failed, failing closed.
    let closed = two.ask(&[("slow", "1"), ("fast", "3")]).await.unwrap();
    assert_eq!(closed.overall_code(), Code::OverLimit);
    // What the main store charged for it is given back.
    let whole = eventually(PATIENCE, async || two.left(("slow", "1")).await == 4).await;
    assert!(whole, "a failed request's charge stayed in the main store");
    // A request of the main store's limits alone never asks the per-second store.
    let answer = two.ask(&[("slow", "1")]).await.unwrap();
    assert_eq!(answer.overall_code(), Code::Ok);
    assert_eq!(answer.statuses[0].limit_remaining, 3);

    // Failing with an error instead (Envoy's failure_mode_deny decides).
    let service = RateLimitService::builder(redis_store(&two.main, "persec-down-error").await)
        .commit(Commit::AllOrNone)
        .per_second_store(
            redlimit::store::RedisStore::builder(two.per_second.url())
                .connect_lazy()
                .expect("a lazy store"),
        )
        .config(RlsConfig::parse([("split.yaml", CONFIG)], false).expect("config"))
        .store_deadline(Duration::from_secs(5))
        .build();
    let request = RateLimitRequest {
        domain: "split".into(),
        descriptors: vec![d(&[("fast", "1")])],
        hits_addend: 0,
    };
    let error = service.should_rate_limit(request).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unavailable);
}
