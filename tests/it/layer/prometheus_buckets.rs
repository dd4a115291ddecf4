//! `redlimit::telemetry::HISTOGRAM_BUCKETS` given to a Prometheus recorder: the store latency
//! of requests through a layer on a real Redis renders as `_bucket` series, which aggregate
//! across instances (without buckets the exporter renders a summary).

use crate::support;

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};
use redlimit::telemetry::{HISTOGRAM_BUCKETS, STORE_DURATION};
use redlimit::{Limit, Policy, RateLimitLayer};
use support::{RedisServer, app, redis_store, status_of};

fn recorder(buckets: bool) -> PrometheusRecorder {
    let mut builder = PrometheusBuilder::new();
    if buckets {
        for (name, buckets) in HISTOGRAM_BUCKETS {
            builder = builder
                .set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
                .expect("valid buckets");
        }
    }
    builder.build_recorder()
}

/// Renders what `recorder` holds after 5 requests through a fresh layer on `redis`. The
/// recorder is this thread's (the test runs on a current-thread runtime), so it does not
/// meet the process-wide recorder other tests install.
async fn five_requests(redis: &RedisServer, recorder: &PrometheusRecorder) -> String {
    let _local = metrics::set_default_local_recorder(recorder);
    let policy = Policy::new(
        "buckets",
        [Limit::gcra(3, Duration::from_secs(60)).unwrap()],
    )
    .unwrap();
    let app = app(RateLimitLayer::new(
        redis_store(redis, "buckets").await,
        policy,
    ));
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(status_of(&app, "127.0.0.1").await.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429], "decided by Redis");
    recorder.handle().render()
}

#[tokio::test(flavor = "current_thread")]
async fn store_latency_renders_as_buckets() {
    let redis = RedisServer::start();
    let text = five_requests(&redis, &recorder(true)).await;
    let buckets: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{STORE_DURATION}_bucket{{")))
        .collect();
    let le = |l: &&str| l.contains("store=\"redis\"") && l.contains("le=\"");
    assert!(
        buckets.iter().any(|l| le(l) && l.contains("le=\"0.1\"")),
        "{text}"
    );
    assert!(
        buckets.iter().any(|l| le(l) && l.contains("le=\"+Inf\"")),
        "{text}"
    );
    assert_eq!(
        buckets.len(),
        HISTOGRAM_BUCKETS[0].1.len() + 1,
        "one series per bucket and +Inf: {text}"
    );
    // The +Inf bucket counts every call that waited for Redis: a denial may come from the
    // deny cache, so between the 3 admissions and all 5.
    let inf: u64 = buckets
        .iter()
        .find(|l| l.contains("le=\"+Inf\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!((3..=5).contains(&inf), "{text}");
    assert!(
        !text.contains(&format!("{STORE_DURATION}{{store=\"redis\",quantile=")),
        "{text}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn without_the_buckets_it_is_a_summary() {
    let redis = RedisServer::start();
    let text = five_requests(&redis, &recorder(false)).await;
    assert!(
        !text.contains(&format!("{STORE_DURATION}_bucket")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{STORE_DURATION}{{store=\"redis\",quantile=")),
        "{text}"
    );
}
