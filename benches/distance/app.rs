//! The app under measure and its variants (the layer on a memory or a Redis store, the raw
//! one-`EVALSHA` floor), one request through it, and what its responses saw.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::{HeaderValue, StatusCode};
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, IntoConnectionInfo};
use redlimit::key::Header;
use redlimit::layer::OnStoreError;
use redlimit::store::Store;
use redlimit::{Decision, DecisionSource, Limit, Policy, RateLimitLayer};
use tokio::runtime::Handle;
use tower::ServiceExt;

use crate::support::proxy::Proxy;

/// The latency cells' limit: 10^6 per second, so every request is admitted.
const RATE: u64 = 1_000_000;
/// The minimal script's arguments: N per P µs, cost 1.
const PERIOD_US: u64 = 1_000_000;
const MINIMAL_GCRA: &str = include_str!("../redis_cost/minimal_gcra.lua");

/// Where a response's decision came from, as the handler (or the raw middleware) saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    Store,
    Local,
    FailOpen,
    DenyCache,
    /// The raw middleware's `EVALSHA` answered.
    Raw,
    /// No decision, or another source.
    Other,
}

impl Seen {
    pub(crate) fn of(decision: Option<&Decision>) -> Self {
        match decision.map(Decision::source) {
            Some(DecisionSource::Store) => Seen::Store,
            Some(DecisionSource::Local) => Seen::Local,
            Some(DecisionSource::FailOpen) => Seen::FailOpen,
            Some(DecisionSource::DenyCache) => Seen::DenyCache,
            _ => Seen::Other,
        }
    }
}

/// The app: `GET /` → `ok`, telling the client (in the response's extensions) where the
/// layer's decision came from.
fn app() -> Router {
    Router::new().route(
        "/",
        get(|decision: Option<Decision>| async move {
            (Extension(Seen::of(decision.as_ref())), "ok")
        }),
    )
}

fn api_key() -> Header {
    Header::new("x-api-key").expect("a valid header name")
}

pub(crate) fn layered(store: impl Store, policy: Policy, mode: OnStoreError) -> Router {
    app().layer(
        RateLimitLayer::builder(store, policy)
            .key(api_key())
            .on_store_error(mode)
            .build()
            .expect("a valid layer"),
    )
}

pub(crate) fn wide_policy() -> Policy {
    Policy::new(
        "distance",
        [Limit::gcra(RATE, Duration::from_secs(1)).expect("a valid limit")],
    )
    .expect("a valid policy")
}

/// The floor: one `EVALSHA` of the minimal GCRA per request, one multiplexed connection.
#[derive(Clone)]
struct Raw {
    connection: redis::aio::MultiplexedConnection,
    sha: Arc<str>,
}

async fn raw_evalsha(State(raw): State<Raw>, request: Request, next: Next) -> Response {
    let Some(key) = request.headers().get("x-api-key") else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut call = redis::cmd("EVALSHA");
    call.arg(&*raw.sha)
        .arg(1)
        .arg([b"raw:".as_slice(), key.as_bytes()].concat())
        .arg(RATE)
        .arg(PERIOD_US)
        .arg(1);
    let reply: redis::RedisResult<Vec<i64>> = call.query_async(&mut raw.connection.clone()).await;
    match reply {
        Ok(reply) if reply.get(1) == Some(&1) => {
            let mut response = next.run(request).await;
            response.extensions_mut().insert(Seen::Raw);
            response
        }
        Ok(_) => StatusCode::TOO_MANY_REQUESTS.into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// A multiplexed connection with `TCP_NODELAY` and no response timeout.
pub(crate) async fn raw_connection(url: &str) -> redis::aio::MultiplexedConnection {
    let info = url
        .into_connection_info()
        .expect("a redis URL")
        .set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info).expect("a redis client");
    client
        .get_multiplexed_async_connection_with_config(
            &AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .expect("connect to the bench redis through the proxy")
}

pub(crate) async fn raw_app(url: &str) -> Router {
    let mut connection = raw_connection(url).await;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(MINIMAL_GCRA)
        .query_async(&mut connection)
        .await
        .expect("SCRIPT LOAD");
    let state = Raw {
        connection,
        sha: sha.into(),
    };
    app().layer(middleware::from_fn_with_state(state, raw_evalsha))
}

/// One request's fate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outcome {
    pub(crate) status: StatusCode,
    pub(crate) seen: Seen,
    pub(crate) took: Duration,
}

pub(crate) async fn call(app: &Router, key: HeaderValue) -> Outcome {
    let request = http::Request::get("/")
        .header("x-api-key", key)
        .body(Body::empty())
        .expect("a request");
    let started = Instant::now();
    let response = app
        .clone()
        .oneshot(request)
        .await
        .unwrap_or_else(|never| match never {});
    let took = started.elapsed();
    let extensions = response.extensions();
    let seen = extensions
        .get::<Seen>()
        .copied()
        .unwrap_or_else(|| Seen::of(extensions.get::<Decision>()));
    Outcome {
        status: response.status(),
        seen,
        took,
    }
}

/// Responses by status and by where their decision came from.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    pub(crate) admitted: u64,
    pub(crate) denied: u64,
    pub(crate) failed: u64,
    pub(crate) store: u64,
    pub(crate) local: u64,
    pub(crate) fail_open: u64,
    pub(crate) deny_cache: u64,
    pub(crate) raw: u64,
    pub(crate) other: u64,
}

impl Tally {
    pub(crate) fn add(&mut self, outcome: &Outcome) {
        match outcome.status {
            StatusCode::OK => self.admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => self.denied += 1,
            _ => self.failed += 1,
        }
        *match outcome.seen {
            Seen::Store => &mut self.store,
            Seen::Local => &mut self.local,
            Seen::FailOpen => &mut self.fail_open,
            Seen::DenyCache => &mut self.deny_cache,
            Seen::Raw => &mut self.raw,
            Seen::Other => &mut self.other,
        } += 1;
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.admitted += other.admitted;
        self.denied += other.denied;
        self.failed += other.failed;
        self.store += other.store;
        self.local += other.local;
        self.fail_open += other.fail_open;
        self.deny_cache += other.deny_cache;
        self.raw += other.raw;
        self.other += other.other;
    }

    pub(crate) fn total(&self) -> u64 {
        self.admitted + self.denied + self.failed
    }

    /// The decisions' sources, e.g. `store 12, local 4`.
    pub(crate) fn sources(&self) -> String {
        let parts: Vec<String> = [
            ("store", self.store),
            ("local", self.local),
            ("fail-open", self.fail_open),
            ("deny cache", self.deny_cache),
            ("raw", self.raw),
            ("none", self.other),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
        parts.join(", ")
    }
}

/// Starts a proxy on the proxies' runtime.
pub(crate) async fn start_proxy(proxies: &Handle, port: u16, rtt: Duration) -> Proxy {
    proxies
        .spawn(Proxy::with_rtt(port, rtt))
        .await
        .expect("start a proxy")
}
