//! `AcquireLayer` on a client service: requests over the quota are delayed, not refused;
//! keys are per request (one host's quota does not delay another's); `poll_ready` is the
//! inner service's, and a waiting request holds the readiness it was given (a concurrency
//! limit below the layer stays honest).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use redlimit::limiter::{AcquireError, AcquireLayer, Limiter, per_host};
use redlimit::store::MemoryStore;
use redlimit::{Limit, Policy};
use tower::{Service, ServiceBuilder, ServiceExt};

fn limiter(count: u64, period: Duration) -> Limiter {
    let policy = Policy::new("client", [Limit::gcra(count, period).unwrap()]).unwrap();
    Limiter::new(MemoryStore::new(), policy)
}

fn request(host: &str) -> http::Request<()> {
    http::Request::get(format!("http://{host}/x"))
        .body(())
        .unwrap()
}

#[tokio::test]
async fn requests_over_the_quota_wait_their_turn() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let client = ServiceBuilder::new()
        .layer(AcquireLayer::new(
            limiter(5, Duration::from_secs(1)),
            per_host,
        ))
        .service_fn(move |_: http::Request<()>| {
            seen.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, std::convert::Infallible>(()) }
        });
    let started = Instant::now();
    let answers = futures_util::future::join_all(
        (0..8).map(|_| client.clone().oneshot(request("api.example"))),
    )
    .await;
    assert!(answers.iter().all(Result::is_ok), "none refused");
    assert_eq!(calls.load(Ordering::Relaxed), 8);
    // The burst of 5, then one every 200 ms: the 8th went 600 ms after the first.
    assert!(started.elapsed() >= Duration::from_millis(600));
}

#[tokio::test]
async fn one_host_s_quota_does_not_delay_another_s() {
    let mut client = ServiceBuilder::new()
        .layer(
            AcquireLayer::new(limiter(1, Duration::from_secs(60)), per_host)
                .max_wait(Duration::ZERO),
        )
        .service_fn(|_: http::Request<()>| async { Ok::<_, std::convert::Infallible>(()) });
    client
        .ready()
        .await
        .unwrap()
        .call(request("a.example"))
        .await
        .unwrap();
    let refused = client
        .ready()
        .await
        .unwrap()
        .call(request("a.example"))
        .await;
    let err = refused.unwrap_err().downcast::<AcquireError>().unwrap();
    assert!(matches!(*err, AcquireError::TooLong { .. }), "{err}");
    client
        .ready()
        .await
        .unwrap()
        .call(request("b.example"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_waiting_request_holds_the_readiness_it_was_given() {
    let limiter = limiter(1, Duration::from_secs(60));
    limiter.try_acquire("global", 1).await.unwrap();
    let mut client = ServiceBuilder::new()
        .layer(AcquireLayer::global(limiter))
        .concurrency_limit(1)
        .service_fn(|()| async { Ok::<_, std::convert::Infallible>(()) });
    client.ready().await.unwrap();
    let waiting = client.call(());
    // The one permit of the concurrency limit is held by the request waiting its slot.
    assert!(
        client.ready().now_or_never().is_none(),
        "not ready while it waits"
    );
    drop(waiting);
    assert!(
        client.ready().now_or_never().is_some(),
        "ready once it is dropped"
    );
}
