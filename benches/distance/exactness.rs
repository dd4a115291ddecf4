//! Part 2, exactness: concurrent bursts on two freshly connected instances against a Redis
//! that has never seen the service.

use std::time::{Duration, Instant};

use http::{HeaderValue, StatusCode};
use redlimit::layer::OnStoreError;
use redlimit::{Limit, Policy};
use tokio::runtime::Handle;

use crate::app::{Tally, call, layered, start_proxy};
use crate::report::ms;
use crate::support::redis_server::RedisServer;
use crate::support::redis_store;
use crate::support::{Report, Table};

fn flush(redis: &RedisServer) {
    let mut con = redis.connection();
    redis::cmd("FLUSHALL").exec(&mut con).expect("FLUSHALL");
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut con)
        .expect("SCRIPT FLUSH");
}

pub(crate) async fn exactness(
    report: &mut Report,
    proxies: &Handle,
    redis: &RedisServer,
    rtts: &[f64],
) {
    const BURSTS: usize = 4;
    const PER_BURST: usize = 40;
    const LIMIT: u64 = 5;
    let table = Table::new(&[
        "RTT ms",
        "admitted per burst (goal 5 each)",
        "decisions by source",
        "connect ms",
        "slowest request ms",
    ])
    .left(1)
    .left(2);
    report.line(
        "\n### Exactness: 2 instances freshly connected, 4 concurrent bursts of 40 (20 each), GCRA 5 per hour\n",
    );
    report.line(table.header());
    for &rtt_ms in rtts {
        flush(redis);
        let rtt = Duration::from_secs_f64(rtt_ms / 1e3);
        let (one, two) = tokio::join!(
            start_proxy(proxies, redis.port(), rtt),
            start_proxy(proxies, redis.port(), rtt)
        );
        let policy = Policy::new(
            "exact",
            [Limit::gcra(LIMIT, Duration::from_secs(3600)).expect("a valid limit")],
        )
        .expect("a valid policy");
        let started = Instant::now();
        let (one_url, two_url) = (one.url(), two.url());
        let (first, second) = tokio::join!(
            redis_store(&one_url, "exact"),
            redis_store(&two_url, "exact")
        );
        let instances = [
            layered(first, policy.clone(), OnStoreError::local()),
            layered(second, policy, OnStoreError::local()),
        ];
        let connect = started.elapsed();
        let mut tasks = Vec::new();
        for burst in 0..BURSTS {
            let key =
                HeaderValue::from_str(&format!("exact-{rtt_ms}-{burst}")).expect("a header value");
            for i in 0..PER_BURST {
                let app = instances[i % 2].clone();
                let key = key.clone();
                tasks.push(tokio::spawn(async move { (burst, call(&app, key).await) }));
            }
        }
        let mut admitted = [0u64; BURSTS];
        let mut tally = Tally::default();
        let mut slowest = Duration::ZERO;
        for task in tasks {
            let (burst, outcome) = task.await.expect("a burst task");
            admitted[burst] += u64::from(outcome.status == StatusCode::OK);
            tally.add(&outcome);
            slowest = slowest.max(outcome.took);
        }
        let exact = admitted.iter().all(|&n| n == LIMIT);
        report.line(table.row([
            rtt_ms.to_string(),
            format!(
                "{}{}",
                admitted.map(|n| n.to_string()).join(", "),
                if exact { "" } else { " (missed)" }
            ),
            tally.sources(),
            ms(connect.as_secs_f64() * 1e3),
            ms(slowest.as_secs_f64() * 1e3),
        ]));
        drop(instances);
    }
}
