//! The multi-limit table in real time, through HTTP and Redis `TIME`: sliding log 20/60 s and
//! 5/3 s on one key, rounds of 8 requests every 3.2 s.

use crate::support;

use std::time::{Duration, Instant};

use http::StatusCode;
use redlimit::store::RedisStore;
use redlimit::{Limit, Policy, RateLimitLayer};
use support::*;

#[tokio::test]
async fn rounds_of_eight_admit_five_until_twenty() {
    let server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .prefix(unique_prefix("table"))
        .connect()
        .await
        .unwrap();
    let policy = Policy::new(
        "auth.create_token",
        [
            Limit::sliding_log(20, Duration::from_secs(60)).unwrap(),
            Limit::sliding_log(5, Duration::from_secs(3)).unwrap(),
        ],
    )
    .unwrap();
    let app = app(RateLimitLayer::builder(store, policy)
        .store_deadline(Duration::from_secs(2))
        .build()
        .expect("valid layer"));
    let mut allowed = 0;
    let mut answered = Instant::now();
    for round in 0..5u32 {
        // Each round starts 3.2 s after the previous round's last answer: past the 3 s window
        // of its admissions however long it took (a schedule from the first round's start
        // left 0.2 s for a round and its wake-up, too little on a busy machine).
        if round > 0 {
            tokio::time::sleep_until((answered + Duration::from_millis(3_200)).into()).await;
        }
        for i in 0..8 {
            let res = send(&app, request("/", "192.0.2.1", &[])).await;
            if round < 4 && i < 5 {
                assert_eq!(res.status(), StatusCode::OK, "round {round} request {i}");
                allowed += 1;
                answered = Instant::now();
                continue;
            }
            assert_eq!(
                res.status(),
                StatusCode::TOO_MANY_REQUESTS,
                "round {round} request {i}"
            );
            let retry: u64 = header(&res, "retry-after").parse().unwrap();
            if round < 3 {
                // Denied by the 3 s limit, which the headers name.
                assert!(
                    (1..=3).contains(&retry),
                    "round {round}: retry-after {retry}"
                );
                assert_eq!(header(&res, "x-ratelimit-limit"), "5");
            } else {
                // Denied by the 60 s limit.
                assert!(retry > 3, "round {round}: retry-after {retry}");
                assert_eq!(header(&res, "x-ratelimit-limit"), "20");
            }
        }
    }
    assert_eq!(allowed, 20);
}
