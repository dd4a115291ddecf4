//! One instance: first reports answered at once, rules as blankets, shares by demand among
//! streams, idle buckets abandoned, the bounds, and TTL 0 on shutdown.

use std::time::Duration;

use redlimit::rls::proto::envoy::r#type::v3::rate_limit_strategy::BlanketRule;

use super::{Assigned, Stream, bucket, builder, serve, usage};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_first_report_is_answered_at_once_with_a_token_bucket() {
    let channel = serve(builder().build().unwrap()).await;
    let mut stream = Stream::open(&channel).await;
    // As Envoy's filter sends a new bucket: one request, time_elapsed 0.
    stream.send("edge", vec![usage(&bucket("tenant", "a"), 1, 0)]);
    stream
        .next(WAIT)
        .await
        .expect("no error")
        .expect("an answer");
    // Alone, the only stream holds the whole rate: 1000 tokens a second, TTL 15 s; its demand
    // not measured yet, a fifth of the burst of half a second (Envoy fills a new bucket).
    assert_eq!(
        stream.latest["a"],
        Assigned::Tokens {
            per_fill: 1000,
            fill_seconds: 1,
            max: 100,
            ttl: 15
        }
    );
    // A small limit is split in at least 1000 tokens over a longer (whole-second) interval.
    stream.send("edge", vec![usage(&bucket("slow", "s"), 1, 0)]);
    stream
        .next(WAIT)
        .await
        .expect("no error")
        .expect("an answer");
    assert_eq!(
        stream.latest["s"],
        Assigned::Tokens {
            per_fill: 1000,
            fill_seconds: 100,
            max: 3,
            ttl: 15
        }
    );
}

#[tokio::test]
async fn rules_without_a_rate_are_blanket_rules() {
    let channel = serve(builder().build().unwrap()).await;
    let mut stream = Stream::open(&channel).await;
    stream.send(
        "edge",
        vec![
            usage(&bucket("banned", "x"), 0, 1),
            usage(&bucket("free", "y"), 1, 0),
            usage(&bucket("unknown", "z"), 1, 0),
        ],
    );
    let all = |l: &std::collections::HashMap<String, Assigned>| l.len() == 3;
    assert!(stream.until(WAIT, all).await, "{:?}", stream.latest);
    assert_eq!(stream.latest["x"], Assigned::Blanket(BlanketRule::DenyAll));
    assert_eq!(stream.latest["y"], Assigned::Blanket(BlanketRule::AllowAll));
    assert_eq!(stream.latest["z"], Assigned::Blanket(BlanketRule::AllowAll));
}

#[tokio::test]
async fn two_streams_share_by_demand_and_sum_to_the_limit() {
    let channel = serve(builder().build().unwrap()).await;
    let id = bucket("tenant", "shared");
    let mut heavy = Stream::open(&channel).await;
    let mut light = Stream::open(&channel).await;
    heavy.send("edge", vec![usage(&id, 1, 0)]);
    light.send("edge", vec![usage(&id, 1, 0)]);
    // Demands under the limit (400 and 100 a second of 1000) split it in proportion: 800 and
    // 200, so each has room to grow.
    let _h = heavy.demand("edge", &id, 400.0);
    let _l = light.demand("edge", &id, 100.0);
    let near = |t: Option<u32>, want: u32| t.is_some_and(|t| t.abs_diff(want) <= 40);
    let mut settled = false;
    for _ in 0..40 {
        heavy.pump(Duration::from_millis(300)).await;
        light.pump(Duration::from_millis(300)).await;
        let (h, l) = (heavy.tokens("shared"), light.tokens("shared"));
        if near(h, 800) && near(l, 200) {
            let sum = h.unwrap() + l.unwrap();
            // Pushed only on material change (3 %): the sum stays within that of the limit.
            assert!(sum.abs_diff(1000) <= 30, "{h:?} + {l:?}");
            settled = true;
            break;
        }
    }
    assert!(settled, "{:?} and {:?}", heavy.latest, light.latest);
}

#[tokio::test]
async fn a_reconnecting_envoys_first_report_is_its_demand_at_once() {
    let channel = serve(builder().build().unwrap()).await;
    let id = bucket("tenant", "back");
    let quiet = Stream::open(&channel).await;
    let mut busy = Stream::open(&channel).await;
    quiet.send("edge", vec![usage(&id, 1, 0)]);
    busy.send("edge", vec![usage(&id, 1, 0)]);
    let _q = quiet.demand("edge", &id, 200.0);
    let _b = busy.demand("edge", &id, 2000.0);
    // Once both are measured: the quiet one under the fair level gets its 200 (and
    // headroom), the busy one the rest, 800.
    assert!(
        busy.until(WAIT, |l| near(tokens_in(l, "back"), 800, 30))
            .await,
        "{:?}",
        busy.latest
    );
    // An Envoy reconnecting (its instance stopped) reports what it saw since its last report:
    // 1500 requests over 5 seconds (300/s). Its very first assignment is its demand and
    // headroom (300 * 1.1 + 2 * sqrt(300 / 5) = 345), the busy one's falling to 500; a guess
    // (the mean of the measured ones, 1100/s) would have given it 400.
    let mut back = Stream::open(&channel).await;
    let mut first = usage(&id, 1000, 500);
    first.time_elapsed = Some(prost_types::Duration {
        seconds: 5,
        nanos: 0,
    });
    back.send("edge", vec![first]);
    back.next(WAIT).await.expect("no error").expect("an answer");
    assert!(near(back.tokens("back"), 345, 10), "{:?}", back.latest);
}

fn tokens_in(latest: &std::collections::HashMap<String, Assigned>, name: &str) -> Option<u32> {
    match latest.get(name) {
        Some(Assigned::Tokens { per_fill, .. }) => Some(*per_fill),
        _ => None,
    }
}

fn near(tokens: Option<u32>, want: u32, within: u32) -> bool {
    tokens.is_some_and(|t| t.abs_diff(want) <= within)
}

#[tokio::test]
async fn an_idle_bucket_is_abandoned() {
    let service = builder()
        .bucket_idle_timeout(Duration::from_millis(600))
        .build()
        .unwrap();
    let channel = serve(service).await;
    let mut stream = Stream::open(&channel).await;
    stream.send("edge", vec![usage(&bucket("tenant", "quiet"), 1, 0)]);
    assert!(
        stream
            .until(WAIT, |l| matches!(
                l.get("quiet"),
                Some(Assigned::Tokens { .. })
            ))
            .await
    );
    // Reported, but with no usage (as Envoy reports every cached bucket each interval).
    stream.send("edge", vec![usage(&bucket("tenant", "quiet"), 0, 0)]);
    assert!(
        stream
            .until(WAIT, |l| l.get("quiet") == Some(&Assigned::Abandoned))
            .await,
        "{:?}",
        stream.latest
    );
    // Its next request watches it anew.
    stream.send("edge", vec![usage(&bucket("tenant", "quiet"), 1, 0)]);
    assert!(
        stream
            .until(WAIT, |l| matches!(
                l.get("quiet"),
                Some(Assigned::Tokens { .. })
            ))
            .await
    );
}

#[tokio::test]
async fn bounds_end_the_stream_with_a_clear_status() {
    let service = builder()
        .max_buckets_per_stream(2)
        .max_bucket_id_bytes(64)
        .build()
        .unwrap();
    let channel = serve(service).await;

    let mut stream = Stream::open(&channel).await;
    stream.send(
        "edge",
        vec![
            usage(&bucket("tenant", "1"), 1, 0),
            usage(&bucket("tenant", "2"), 1, 0),
            usage(&bucket("tenant", "3"), 1, 0),
        ],
    );
    let status = loop {
        match stream.next(WAIT).await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without an error"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("more than 2 buckets"),
        "{status:?}"
    );

    let mut stream = Stream::open(&channel).await;
    stream.send(
        "edge",
        vec![usage(&bucket("tenant", &"x".repeat(100)), 1, 0)],
    );
    let status = stream.next(WAIT).await.expect_err("an error");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("over this server's limit of 64"),
        "{status:?}"
    );

    let mut stream = Stream::open(&channel).await;
    stream.send("", vec![usage(&bucket("tenant", "a"), 1, 0)]);
    let status = stream.next(WAIT).await.expect_err("an error");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("no domain"), "{status:?}");

    let mut stream = Stream::open(&channel).await;
    let mut empty = bucket("tenant", "a");
    empty.bucket.clear();
    stream.send("edge", vec![usage(&empty, 1, 0)]);
    let status = stream.next(WAIT).await.expect_err("an error");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");

    // The server lives on: a good stream is served.
    let mut stream = Stream::open(&channel).await;
    stream.send("edge", vec![usage(&bucket("tenant", "ok"), 1, 0)]);
    assert!(stream.next(WAIT).await.expect("no error").is_some());
}

#[tokio::test]
async fn shutdown_sends_ttl_zero_then_ends_every_stream() {
    let service = builder().build().unwrap();
    let channel = serve(service.clone()).await;
    let mut stream = Stream::open(&channel).await;
    stream.send(
        "edge",
        vec![
            usage(&bucket("tenant", "t"), 1, 0),
            usage(&bucket("banned", "b"), 1, 0),
        ],
    );
    assert!(stream.until(WAIT, |l| l.len() == 2).await);
    assert_eq!(service.shutdown(), 1);
    let response = stream
        .next(WAIT)
        .await
        .expect("no error")
        .expect("the TTL 0");
    assert_eq!(response.bucket_action.len(), 2);
    assert_eq!(
        stream.latest["t"],
        Assigned::Tokens {
            per_fill: 1000,
            fill_seconds: 1,
            max: 100,
            ttl: 0
        },
        "the assignment in force, expired now"
    );
    assert_eq!(stream.latest["b"], Assigned::Blanket(BlanketRule::DenyAll));
    assert!(stream.next(WAIT).await.expect("a clean end").is_none());
    // New streams are refused.
    let refused = Stream::try_open(&channel).await;
    let Err(refused) = refused else {
        panic!("a new stream after the shutdown was served")
    };
    assert_eq!(refused.code(), tonic::Code::Unavailable);
}
