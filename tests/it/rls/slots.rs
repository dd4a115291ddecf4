//! The RLS on a Redis Cluster of three masters: under `HashTag::Domain` a request is one call
//! on its domain's slot; under `HashTag::Descriptor` its descriptors live on slots of their
//! own, are checked at once, and (all or none) a refusal on one shard refunds what another
//! charged, or (every hit landing, the default) each shard's counters are charged their hits,
//! nothing refunded.

use std::time::Duration;

use redlimit::rls::config::RlsConfig;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use redlimit::rls::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use redlimit::rls::{HashTag, RateLimitService};
use redlimit::store::{Commit, RedisStore};

use super::service::d;
use crate::support::{Proxy, RedisCluster, eventually, unique_prefix};

/// Day-long windows: no test runs across a window's end (but one started at midnight UTC).
const CONFIG: &str = "
domain: spread
descriptors:
  - {key: a, rate_limit: {unit: day, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: day, requests_per_unit: 5}}
";

/// How long a condition that holds at once on a quiet machine may take on a busy one.
const PATIENCE: Duration = Duration::from_secs(10);

/// The all-or-none service over the cluster, `tag` for its domain, with a deadline no busy
/// machine misses.
async fn service(cluster: &RedisCluster, prefix: &str, tag: HashTag) -> RateLimitService {
    service_committing(cluster, prefix, tag, Commit::AllOrNone).await
}

async fn service_committing(
    cluster: &RedisCluster,
    prefix: &str,
    tag: HashTag,
    commit: Commit,
) -> RateLimitService {
    let store = RedisStore::cluster(cluster.urls())
        .prefix(prefix)
        .connect()
        .await
        .expect("connect to the cluster");
    RateLimitService::builder(store)
        .commit(commit)
        .config(RlsConfig::parse([("spread.yaml", CONFIG)], false).expect("config"))
        .store_deadline(Duration::from_secs(30))
        .hash_tag(tag)
        .build()
}

/// A descriptor's hash tag under `HashTag::Descriptor`, as documented: `rls:` and the 64-bit
/// FNV-1a of the domain and each entry's key and value, each after a NUL, and a closing NUL.
fn descriptor_tag(key: &str, value: &str) -> String {
    let text = format!("spread\0{key}\0{value}\0");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("rls:{hash:016x}")
}

/// The master serving `tag`'s slot.
fn master_of(cluster: &RedisCluster, tag: &str) -> usize {
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(format!("{{{tag}}}"))
        .query(&mut cluster.nodes[0].connection())
        .expect("CLUSTER KEYSLOT");
    cluster.master_of(slot)
}

/// Values of `a` and `b` whose descriptors live on two different masters, and those masters.
fn on_two_shards(cluster: &RedisCluster) -> ((String, usize), (String, usize)) {
    let a = (
        "1".to_owned(),
        master_of(cluster, &descriptor_tag("a", "1")),
    );
    let b = (0..1000)
        .map(|i| i.to_string())
        .map(|v| {
            let master = master_of(cluster, &descriptor_tag("b", &v));
            (v, master)
        })
        .find(|(_, master)| *master != a.1)
        .expect("a value of b on another shard");
    (a, b)
}

/// The keys under `prefix` on node `index` (its own, through no proxy).
fn keys_on(cluster: &RedisCluster, index: usize, prefix: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut cluster.nodes[index].connection())
        .expect("KEYS")
}

/// Whether node `index` holds a key of `prefix` on `tag`'s slot.
fn holds(cluster: &RedisCluster, index: usize, prefix: &str, tag: &str) -> bool {
    keys_on(cluster, index, prefix)
        .iter()
        .any(|k| k.contains(&format!("{{{tag}}}")))
}

/// The count in the fixed window of the counter of `prefix` on `tag`'s slot, on node `index`
/// (its state, `...:fw`: `<window end> <count>`); `None` while it has none.
fn count_on(cluster: &RedisCluster, index: usize, prefix: &str, tag: &str) -> Option<u64> {
    let key = keys_on(cluster, index, prefix)
        .into_iter()
        // The state, not a refund's marker beside it.
        .find(|k| k.contains(&format!("{{{tag}}}")) && k.ends_with(":fw"))?;
    let state: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query(&mut cluster.nodes[index].connection())
        .expect("GET");
    state?.split(' ').nth(1)?.parse().ok()
}

/// A value of `key` other than `except` whose descriptor lives on `master`.
fn value_on(cluster: &RedisCluster, key: &str, master: usize, except: &str) -> String {
    (0..1000)
        .map(|i| format!("w{i}"))
        .find(|v| v != except && master_of(cluster, &descriptor_tag(key, v)) == master)
        .expect("a value on that master")
}

/// `EVALSHA` calls node `index` ran so far.
fn evalsha_calls(cluster: &RedisCluster, index: usize) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut cluster.nodes[index].connection())
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
        .and_then(|stats| stats.split(',').find_map(|f| f.strip_prefix("calls=")))
        .map_or(0, |calls| calls.parse().expect("a count"))
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "spread".into(),
        descriptors,
        hits_addend: 1,
    }
}

/// A descriptor checked without being charged.
fn read_only(key: &str, value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        hits_addend: Some(0),
        ..d(&[(key, value)])
    }
}

/// The masters whose keys include one of `prefix`.
fn masters_holding(cluster: &RedisCluster, prefix: &str) -> Vec<usize> {
    (0..cluster.nodes.len())
        .filter(|&i| {
            keys_on(cluster, i, prefix)
                .iter()
                .any(|k| k.starts_with(prefix))
        })
        .filter(|&i| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut cluster.nodes[i].connection())
                .expect("INFO replication");
            info.contains("role:master")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptor_tags_put_one_requests_counters_on_different_shards() {
    let cluster = RedisCluster::start();
    let ((a, a_master), (b, b_master)) = on_two_shards(&cluster);
    let prefix = unique_prefix("slots-spread");
    let service = service(&cluster, &prefix, HashTag::Descriptor).await;
    let both = || request(vec![d(&[("a", a.as_str())]), d(&[("b", b.as_str())])]);
    let first = service.should_rate_limit(both()).await.expect("answered");
    assert_eq!(first.overall_code(), Code::Ok);
    let remaining: Vec<u32> = first.statuses.iter().map(|s| s.limit_remaining).collect();
    assert_eq!(remaining, [0, 4]);
    let a_keys = keys_on(&cluster, a_master, &prefix);
    let b_keys = keys_on(&cluster, b_master, &prefix);
    assert!(
        holds(&cluster, a_master, &prefix, &descriptor_tag("a", &a)),
        "{a_keys:?}"
    );
    assert!(
        holds(&cluster, b_master, &prefix, &descriptor_tag("b", &b)),
        "{b_keys:?}"
    );
    assert_eq!(a_keys.len() + b_keys.len(), 2, "{a_keys:?} {b_keys:?}");
    assert_eq!(masters_holding(&cluster, &prefix).len(), 2);
    // `a` is spent: refused, and `b` as it was (given back whatever its call charged).
    let second = service.should_rate_limit(both()).await.expect("answered");
    assert_eq!(second.overall_code(), Code::OverLimit);
    assert_eq!(second.statuses[0].code(), Code::OverLimit);
    let b_left = async || {
        let read = request(vec![read_only("b", &b)]);
        service
            .should_rate_limit(read)
            .await
            .expect("answered")
            .statuses[0]
            .limit_remaining
    };
    assert!(eventually(PATIENCE, async || b_left().await == 4).await);
}

/// Every hit landing, descriptors on two shards: one call per shard, at once, each charged its
/// hits whatever the other answers; nothing to refund.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hit_lands_on_each_shard_of_a_request() {
    let cluster = RedisCluster::start();
    let ((a, a_master), (b, b_master)) = on_two_shards(&cluster);
    let prefix = unique_prefix("slots-always");
    let service = service_committing(&cluster, &prefix, HashTag::Descriptor, Commit::Always).await;
    let both = || request(vec![d(&[("a", a.as_str())]), d(&[("b", b.as_str())])]);
    for (code, a_left, b_left) in [
        (Code::Ok, 0, 4),
        (Code::OverLimit, 0, 3),
        (Code::OverLimit, 0, 2),
    ] {
        let answer = service.should_rate_limit(both()).await.expect("answered");
        assert_eq!(answer.overall_code(), code);
        let left: Vec<u32> = answer.statuses.iter().map(|s| s.limit_remaining).collect();
        assert_eq!(left, [a_left, b_left]);
    }
    // `a` holds its debt on its shard (3 of 1, capped at 2), `b` its three hits on the other.
    assert_eq!(
        count_on(&cluster, a_master, &prefix, &descriptor_tag("a", &a)),
        Some(2)
    );
    assert_eq!(
        count_on(&cluster, b_master, &prefix, &descriptor_tag("b", &b)),
        Some(3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_domain_tag_keeps_a_request_on_one_shard_in_one_call() {
    let cluster = RedisCluster::start();
    let ((a, _), (b, _)) = on_two_shards(&cluster);
    let prefix = unique_prefix("slots-domain");
    let service = service(&cluster, &prefix, HashTag::Domain).await;
    let both = || request(vec![d(&[("a", a.as_str())]), d(&[("b", b.as_str())])]);
    let first = service.should_rate_limit(both()).await.expect("answered");
    assert_eq!(first.overall_code(), Code::Ok);
    let masters = masters_holding(&cluster, &prefix);
    assert_eq!(masters.len(), 1, "the domain's keys on {masters:?}");
    // One call (its script loaded by the first request).
    let calls = |c: &RedisCluster| (0..c.nodes.len()).map(|i| evalsha_calls(c, i)).sum::<u64>();
    let before = calls(&cluster);
    let second = service.should_rate_limit(both()).await.expect("answered");
    assert_eq!(second.overall_code(), Code::OverLimit);
    assert_eq!(calls(&cluster) - before, 1, "one atomic call per request");
    assert_eq!(second.statuses[1].limit_remaining, 4, "b as it stands");
    // Refused in that one call: `b` charged once, by the first request alone.
    let read = request(vec![read_only("b", &b)]);
    let left = service.should_rate_limit(read).await.expect("answered");
    assert_eq!(left.statuses[0].limit_remaining, 4);
    assert_eq!(masters_holding(&cluster, &prefix), masters);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_shards_are_called_at_once() {
    let cluster = RedisCluster::start();
    let ((a, a_master), (b, b_master)) = on_two_shards(&cluster);
    // Other descriptors on the same shards, to warm them with.
    let a_warm = value_on(&cluster, "a", a_master, &a);
    let b_warm = value_on(&cluster, "b", b_master, &b);
    // Clients reach `a`'s master through a proxy that can hold its traffic (from here on the
    // cluster names the proxy's port for it).
    let proxy = Proxy::start(cluster.nodes[a_master].port()).await;
    cluster.announce_port(a_master, proxy.port());
    let prefix = unique_prefix("slots-parallel");
    let service = service(&cluster, &prefix, HashTag::Descriptor).await;
    // Scripts loaded and connections made on both shards first, on other descriptors.
    let warm = request(vec![
        d(&[("a", a_warm.as_str())]),
        d(&[("b", b_warm.as_str())]),
    ]);
    service.should_rate_limit(warm).await.expect("answered");
    assert!(
        proxy.accepted() > 0,
        "a's master not reached through its proxy"
    );
    let (a_tag, b_tag) = (descriptor_tag("a", &a), descriptor_tag("b", &b));

    // `a` first: made one after the other, `b`'s call would wait for `a`'s answer.
    proxy.freeze();
    let both = request(vec![d(&[("a", a.as_str())]), d(&[("b", b.as_str())])]);
    let answer = tokio::spawn({
        let service = service.clone();
        async move { service.should_rate_limit(both).await }
    });
    let b_charged = eventually(PATIENCE, async || {
        holds(&cluster, b_master, &prefix, &b_tag)
    });
    assert!(
        b_charged.await,
        "b's shard was not called while a's was frozen"
    );
    assert!(
        !holds(&cluster, a_master, &prefix, &a_tag),
        "a's shard ran through the freeze"
    );
    assert!(!answer.is_finished(), "answered without a's shard");
    proxy.thaw();
    let answer = answer.await.expect("joined").expect("answered");
    assert_eq!(answer.overall_code(), Code::Ok);
    assert!(holds(&cluster, a_master, &prefix, &a_tag));

    // The reads too: `b`'s is made while `a`'s waits.
    let before = evalsha_calls(&cluster, b_master);
    proxy.freeze();
    let reads = request(vec![read_only("a", &a), read_only("b", &b)]);
    let answer = tokio::spawn({
        let service = service.clone();
        async move { service.should_rate_limit(reads).await }
    });
    let b_read = eventually(PATIENCE, async || {
        evalsha_calls(&cluster, b_master) > before
    });
    assert!(b_read.await, "b's shard was not read while a's was frozen");
    assert!(!answer.is_finished(), "answered without a's shard");
    proxy.thaw();
    let answer = answer.await.expect("joined").expect("answered");
    let remaining: Vec<u32> = answer.statuses.iter().map(|s| s.limit_remaining).collect();
    assert_eq!(remaining, [0, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_on_one_shard_refunds_the_charge_on_another() {
    let cluster = RedisCluster::start();
    let ((a, a_master), (b, b_master)) = on_two_shards(&cluster);
    let b_tag = descriptor_tag("b", &b);
    // `a`'s shard behind a proxy: held until `b`'s shard has charged, so that the refusal
    // comes after the charge (an answer from `a` before `b`'s call starts spares `b` any).
    let proxy = Proxy::start(cluster.nodes[a_master].port()).await;
    cluster.announce_port(a_master, proxy.port());
    let prefix = unique_prefix("slots-refund");
    let service = service(&cluster, &prefix, HashTag::Descriptor).await;
    let spend = service.should_rate_limit(request(vec![d(&[("a", a.as_str())])]));
    assert_eq!(spend.await.expect("answered").overall_code(), Code::Ok);
    assert_eq!(count_on(&cluster, b_master, &prefix, &b_tag), None);
    // `a` over on its shard, `b` within on another: `b` charged, then refunded.
    proxy.freeze();
    let both = request(vec![d(&[("a", a.as_str())]), d(&[("b", b.as_str())])]);
    let refused = tokio::spawn({
        let service = service.clone();
        async move { service.should_rate_limit(both).await }
    });
    let charged = async || count_on(&cluster, b_master, &prefix, &b_tag) == Some(1);
    assert!(
        eventually(PATIENCE, charged).await,
        "b not charged while a was held"
    );
    proxy.thaw();
    let refused = refused.await.expect("joined").expect("answered");
    assert_eq!(refused.overall_code(), Code::OverLimit);
    assert_eq!(refused.statuses[0].code(), Code::OverLimit);
    assert_eq!(refused.statuses[1].code(), Code::Ok);
    assert_eq!(
        refused.statuses[1].limit_remaining, 5,
        "b as it stands once refunded"
    );
    let refunded = async || count_on(&cluster, b_master, &prefix, &b_tag) == Some(0);
    assert!(
        eventually(PATIENCE, refunded).await,
        "the refused request's charge on b was not refunded"
    );
    let read = request(vec![read_only("b", &b)]);
    let left = service.should_rate_limit(read).await.expect("answered");
    assert_eq!(left.statuses[0].limit_remaining, 5);
}
