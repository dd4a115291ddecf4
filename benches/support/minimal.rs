//! The baseline for the layer on Redis: a minimal axum middleware that keys on the
//! `x-key` header and sends one `EVALSHA` of a minimal GCRA script (`minimal_gcra.lua`) over
//! one multiplexed connection, with no deadline, no breaker, no batching, no decision and no
//! headers on the response. What a hand-written Redis check costs the service, nothing more.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// The script: `TIME`, `GET`, `SET ... PX`; 1 admitted, 0 denied.
pub(crate) const MINIMAL_GCRA: &str = include_str!("minimal_gcra.lua");

/// What the middleware holds: the connection and the script's hash.
#[derive(Clone)]
pub(crate) struct Minimal {
    connection: redis::aio::MultiplexedConnection,
    sha: Arc<str>,
    /// The emission interval and the tolerance, µs.
    interval_us: u64,
    tolerance_us: u64,
}

impl Minimal {
    /// Connects to `url` and loads the script, for `count` requests per `period_us`.
    pub(crate) async fn connect(url: &str, count: u64, period_us: u64) -> Self {
        let client = redis::Client::open(url).expect("a Redis URL");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the bench redis");
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(MINIMAL_GCRA)
            .query_async(&mut connection)
            .await
            .expect("load the minimal script");
        let interval_us = period_us.div_ceil(count);
        Minimal {
            connection,
            sha: sha.into(),
            interval_us,
            tolerance_us: interval_us * count,
        }
    }

    /// `router` behind the middleware.
    pub(crate) fn layer(self, router: axum::Router) -> axum::Router {
        router.layer(middleware::from_fn_with_state(self, check))
    }
}

/// The middleware: no key → 400; denied → 429; a store error → 503 (counted as an error by
/// the load generator, so a baseline that fails is never mistaken for a fast one).
async fn check(State(mut minimal): State<Minimal>, request: Request, next: Next) -> Response {
    let Some(key) = request.headers().get("x-key") else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let allowed: redis::RedisResult<i64> = redis::cmd("EVALSHA")
        .arg(&*minimal.sha)
        .arg(1)
        .arg(key.as_bytes())
        .arg(minimal.interval_us)
        .arg(minimal.tolerance_us)
        .query_async(&mut minimal.connection)
        .await;
    match allowed {
        Ok(0) => StatusCode::TOO_MANY_REQUESTS.into_response(),
        Ok(_) => next.run(request).await,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}
