//! The per-request work besides the store: extracting the key from a request head, rendering
//! the rate-limit headers of a decision, and decoding the Redis script's reply.
//!
//! `cargo bench --bench micro` (add `-- --quick` for a fast look).

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::routing::get;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http::request::Parts;
use redlimit::__private::{decode_reply, render_headers};
use redlimit::key::{Both, ClientIp, Header, PeerIp, Route};
use redlimit::layer::HeaderStyle;
use redlimit::store::MemoryStore;
use redlimit::{Decision, Key, KeyExtractor, Limit, Policy};
use tower::ServiceExt;

/// The peer: one of our own proxies, so `ClientIp` walks the forwarded header.
const PEER: &str = "10.0.0.5:41234";
/// Three hops: the client, then two of our proxies (walked from the right).
const FORWARDED: &str = "203.0.113.7, 10.1.2.3, 10.4.5.6";
const API_KEY: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";

/// A request head as a real axum router hands it to the layer: `MatchedPath` set by the
/// router, `ConnectInfo` set by `into_make_service_with_connect_info`.
fn routed_parts() -> Parts {
    let slot: Arc<Mutex<Option<Parts>>> = Arc::default();
    let seen = Arc::clone(&slot);
    let app = Router::new().route(
        "/users/{id}",
        get(move |request: Request| {
            let seen = Arc::clone(&seen);
            async move {
                *seen.lock().unwrap() = Some(request.into_parts().0);
            }
        }),
    );
    let mut request = Request::get("/users/42?expand=orders")
        .header("x-forwarded-for", FORWARDED)
        .header("x-api-key", API_KEY)
        .header("user-agent", "bench/1.0")
        .header("accept", "application/json")
        .body(Body::empty())
        .unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(PEER.parse::<SocketAddr>().unwrap()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let response = runtime.block_on(app.oneshot(request)).unwrap();
    assert!(response.status().is_success());

    slot.lock().unwrap().take().expect("the handler ran")
}

/// The same head without a router: no `MatchedPath`, so `Route` falls back to the URI path.
fn plain_parts() -> Parts {
    let mut request = http::Request::get("/users/42?expand=orders")
        .body(())
        .unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(PEER.parse::<SocketAddr>().unwrap()));
    request.into_parts().0
}

fn bench_extract<K: KeyExtractor>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    extractor: K,
    parts: &Parts,
    expect: impl FnOnce(&str) -> bool,
) {
    let key = extractor.extract(parts).expect("a key");
    assert!(expect(key.as_str()), "{name}: unexpected key {key:?}");
    c.bench_function(name, |b| {
        b.iter(|| black_box(extractor.extract(black_box(parts))))
    });
}

fn key_extraction(c: &mut Criterion) {
    let routed = routed_parts();
    let plain = plain_parts();
    let mut group = c.benchmark_group("key extraction");
    bench_extract(&mut group, "PeerIp (ConnectInfo)", PeerIp, &routed, |k| {
        k == "ip:10.0.0.5"
    });
    bench_extract(
        &mut group,
        "ClientIp trusting 10/8, XFF 3 hops",
        ClientIp::trusting(["10.0.0.0/8"]).unwrap(),
        &routed,
        |k| k == "ip:203.0.113.7",
    );
    bench_extract(
        &mut group,
        "Header x-api-key (SHA-256)",
        Header::new("x-api-key").unwrap(),
        &routed,
        |k| k.starts_with("header:x-api-key:#"),
    );
    bench_extract(&mut group, "Route (MatchedPath)", Route, &routed, |k| {
        k == "route:/users/%7Bid%7D"
    });
    bench_extract(&mut group, "Route (URI path)", Route, &plain, |k| {
        k == "route:/users/42"
    });
    bench_extract(
        &mut group,
        "Both(Route, PeerIp)",
        Both::new(Route, PeerIp),
        &routed,
        |k| k == "route:/users/%7Bid%7D+ip:10.0.0.5",
    );
    group.finish();
}

/// A realistic decision from the memory store for a 2-limit policy: allowed, and denied (which
/// adds `Retry-After`).
fn decisions() -> (Decision, Decision) {
    let policy = Arc::new(
        Policy::new(
            "api",
            [
                Limit::gcra(10, Duration::from_secs(1)).unwrap(),
                Limit::sliding_window(1000, Duration::from_secs(3600)).unwrap(),
            ],
        )
        .unwrap(),
    );
    let store = MemoryStore::new();
    let key = Key::new("ip:203.0.113.7");
    let allowed = store.check_now(&policy, &key, 1);
    assert!(allowed.is_allowed());
    let denied = (0..20)
        .map(|_| store.check_now(&policy, &key, 1))
        .find(|d| !d.is_allowed())
        .expect("the gcra limit denies within 20 requests");
    (allowed, denied)
}

fn header_rendering(c: &mut Criterion) {
    let (allowed, denied) = decisions();
    let mut group = c.benchmark_group("render headers");
    for (verdict, decision) in [("allowed", &allowed), ("denied", &denied)] {
        for (style_name, style) in [
            ("XRateLimit", HeaderStyle::XRateLimit),
            ("Both", HeaderStyle::Both),
        ] {
            let headers = render_headers(decision, style);
            assert!(headers.contains_key("x-ratelimit-limit"));
            assert_eq!(headers.contains_key("retry-after"), verdict == "denied");
            group.bench_function(BenchmarkId::new(style_name, verdict), |b| {
                b.iter(|| black_box(render_headers(black_box(decision), style)))
            });
        }
    }
    group.finish();
}

fn reply_decoding(c: &mut Criterion) {
    let now_us: i64 = 1_760_000_000_123_456;
    let one =
        Arc::new(Policy::new("api", [Limit::gcra(100, Duration::from_secs(60)).unwrap()]).unwrap());
    // allowed (an admission's reply: per limit what cannot be derived); gcra: its backlog,
    // free again in 0.6 s (99 left).
    let one_reply = vec![now_us, 600_000];
    let three = Arc::new(
        Policy::new(
            "api",
            [
                Limit::gcra(10, Duration::from_secs(1)).unwrap(),
                Limit::sliding_window(100, Duration::from_secs(60)).unwrap(),
                Limit::fixed_window(1000, Duration::from_secs(86_400)).unwrap(),
            ],
        )
        .unwrap(),
    );
    let three_reply = vec![
        now_us,  // gcra 10/1s: a backlog of 0.3 s (7 left)
        300_000, // sliding window 100/60s
        58, 97_250_000, // fixed window 1000/day: 913 left (the reset the day's end)
        913,
    ];
    let mut group = c.benchmark_group("decode reply");
    for (name, policy, reply) in [
        ("1 limit", &one, &one_reply),
        ("3 limits", &three, &three_reply),
    ] {
        assert!(decode_reply(policy, reply).unwrap().is_allowed());
        group.bench_function(name, |b| {
            b.iter(|| black_box(decode_reply(black_box(policy), black_box(reply))))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    targets = key_extraction, header_rendering, reply_decoding
}
criterion_main!(benches);
