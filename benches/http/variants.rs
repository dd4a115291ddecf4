//! The variants measured: bare axum, the layer on each store, tower_governor, the raw
//! one-`EVALSHA` middleware and the minimal middleware, each built fresh for a measurement.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use redlimit::key::Global;
use redlimit::store::{MemoryStore, RedisStore};
use redlimit::{Algorithm, Key, KeyExtractor, Limit, Policy, RateLimitLayer};

use crate::support::{self, redis_store};

const RATE: u64 = 1_000_000;

/// How requests are keyed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    Hot,
    Many,
}

/// The same key text for every limiter: the `x-key` header (no hashing, as governor's
/// string key has none).
fn by_header() -> impl KeyExtractor + Clone {
    |parts: &http::request::Parts| parts.headers.get("x-key").map(|v| Key::new(v.as_bytes()))
}

/// Builds a variant's app inside the server's runtime (Redis connections are driven by the
/// runtime that made them), fresh for every measurement.
pub(crate) type Make =
    Box<dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Router>>>>;

pub(crate) struct Variant {
    pub(crate) name: String,
    pub(crate) keys: Keys,
    pub(crate) make: Make,
    /// Counts Redis commands (the variant uses Redis).
    pub(crate) redis: bool,
}

fn variant<F, Fut>(name: String, keys: Keys, redis: bool, make: F) -> Variant
where
    F: Fn(String) -> Fut + 'static,
    Fut: std::future::Future<Output = Router> + 'static,
{
    Variant {
        name,
        keys,
        redis,
        make: Box::new(move |url| Box::pin(make(url))),
    }
}

fn app() -> Router {
    Router::new().route("/", get(|| async { "ok" }))
}

fn policy(algorithm: Algorithm) -> Policy {
    Policy::new(
        "bench",
        [Limit::new(algorithm, RATE, Duration::from_secs(1)).unwrap()],
    )
    .unwrap()
}

fn redlimit(
    store: impl redlimit::store::Store + Clone,
    algorithm: Algorithm,
    keys: Keys,
) -> Router {
    let layer =
        RateLimitLayer::builder(store, policy(algorithm)).store_deadline(Duration::from_secs(1));
    let layer = match keys {
        Keys::Hot => layer.key(Global),
        Keys::Many => layer.key(by_header()),
    };
    app().layer(layer.build().expect("valid layer"))
}

/// tower_governor's key: the same header, or one global key.
#[derive(Clone)]
struct GovernorKey(Keys);

impl tower_governor::key_extractor::KeyExtractor for GovernorKey {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        Ok(match self.0 {
            Keys::Hot => String::new(),
            Keys::Many => req
                .headers()
                .get("x-key")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
        })
    }
}

fn governor(keys: Keys) -> Router {
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .per_nanosecond(1_000) // 10^6 per second, like the others
        .burst_size(NonZeroU32::new(RATE as u32).unwrap().get())
        .key_extractor(GovernorKey(keys))
        .use_headers()
        .finish()
        .expect("governor config");
    app().layer(tower_governor::GovernorLayer::new(config))
}

/// The physical limit of a Redis-backed check: the very `EVALSHA` the store sends (same
/// script, keys and arguments), over one multiplexed connection, no deadline, no headers.
#[derive(Clone)]
struct Raw {
    connection: redis::aio::MultiplexedConnection,
    policy: Arc<Policy>,
    keys: Keys,
}

async fn raw_evalsha(State(raw): State<Raw>, request: Request, next: Next) -> Response {
    let key = match raw.keys {
        Keys::Hot => Key::new("global"),
        Keys::Many => match request.headers().get("x-key") {
            Some(v) => Key::new(v.as_bytes()),
            None => return StatusCode::BAD_REQUEST.into_response(),
        },
    };
    let reply = redlimit::__private::script_call("raw", &raw.policy, &key, 1)
        .run_async(&mut raw.connection.clone())
        .await;
    match reply {
        // A denial's reply is the long one (`lua/prelude.lua`).
        Ok(reply) if reply.len() == 2 + 4 * raw.policy.limits().len() => {
            StatusCode::TOO_MANY_REQUESTS.into_response()
        }
        _ => next.run(request).await,
    }
}

async fn raw(url: &str, keys: Keys) -> Router {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let policy = policy(Algorithm::Gcra);
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(RedisStore::script_source_for(&policy))
        .query_async(&mut connection)
        .await
        .unwrap();
    let state = Raw {
        connection,
        policy: Arc::new(policy),
        keys,
    };
    app().layer(middleware::from_fn_with_state(state, raw_evalsha))
}

/// Every variant, bare axum first, each with one hot key and with 100k keys.
pub(crate) fn all() -> Vec<Variant> {
    let mut variants = vec![variant("bare axum".into(), Keys::Hot, false, |_| async {
        app()
    })];
    for keys in [Keys::Hot, Keys::Many] {
        let label = if keys == Keys::Hot {
            "hot key"
        } else {
            "100k keys"
        };
        variants.push(variant(
            format!("redlimit memory gcra, {label}"),
            keys,
            false,
            move |_| async move { redlimit(MemoryStore::new(), Algorithm::Gcra, keys) },
        ));
        variants.push(variant(
            format!("tower_governor, {label}"),
            keys,
            false,
            move |_| async move { governor(keys) },
        ));
        variants.push(variant(
            format!("minimal EVALSHA gcra, {label}"),
            keys,
            true,
            move |url| async move {
                support::minimal::Minimal::connect(&url, RATE, 1_000_000)
                    .await
                    .layer(app())
            },
        ));
        variants.push(variant(
            format!("raw EVALSHA gcra, {label}"),
            keys,
            true,
            move |url| async move { raw(&url, keys).await },
        ));
        // Local-first: decided in memory, synced with Redis every 100 ms.
        variants.push(variant(
            format!("redlimit local-first gcra, {label}"),
            keys,
            true,
            move |url| async move {
                let store = redis_store(&url, "local-first")
                    .await
                    .local_first(Duration::from_millis(100))
                    .expect("local-first settings");
                redlimit(store, Algorithm::Gcra, keys)
            },
        ));
        for algorithm in [Algorithm::Gcra, Algorithm::SlidingLog] {
            variants.push(variant(
                format!("redlimit redis {algorithm}, {label}"),
                keys,
                true,
                move |url| async move {
                    redlimit(redis_store(&url, algorithm.name()).await, algorithm, keys)
                },
            ));
        }
    }
    variants
}
