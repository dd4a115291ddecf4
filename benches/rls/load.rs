//! The load: `ShouldRateLimit` calls on our generated RLS messages, `concurrency` calls in
//! flight over a few HTTP/2 connections (as an Envoy fleet keeps a few per RLS host), each call
//! one descriptor `user=<u>` in the domain asked for.
//!
//! The client is a bare gRPC unary call on `h2` ([`call`]): the same request a tonic client
//! sends (the same headers and message bytes), each user's message encoded once per load
//! ([`request_body`]). The load generator shares the machine's two cores with the server, Redis
//! and the proxy, and in a closed loop its CPU per call sets the latency at 256 calls in flight
//! (Little's law): tonic's client channel cost ~2× this per call (its buffer task, layers and
//! codec).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;
use http::{HeaderValue, Request, Uri};
use prost::Message as _;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse, rate_limit_response::Code,
};
use tonic::Status;

/// HTTP/2 connections the calls share, round robin.
pub(crate) const CONNECTIONS: usize = 4;
/// A call's own bound: a stuck server costs the bench this, never a hang.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The bound as a gRPC client says it (`grpc-timeout`), as tonic's did.
const GRPC_TIMEOUT: &str = "2S";
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// One HTTP/2 connection to a server: what opens a stream on it, and the call's URI.
#[derive(Clone)]
pub(crate) struct Connection {
    send: h2::client::SendRequest<Bytes>,
    uri: Uri,
}

/// Connections to one server; they close once every clone is dropped.
#[derive(Clone)]
pub(crate) struct Clients(Arc<Vec<Connection>>);

impl Clients {
    /// Opens [`CONNECTIONS`] connections to `addr` (`127.0.0.1:PORT`), each driven by a task of
    /// the calling runtime.
    pub(crate) async fn connect(addr: &str) -> Clients {
        let uri: Uri = format!("http://{addr}{PATH}").parse().expect("a valid URI");
        let mut connections = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
            tcp.set_nodelay(true).expect("TCP_NODELAY");
            let (send, connection) = h2::client::handshake(tcp)
                .await
                .unwrap_or_else(|e| panic!("HTTP/2 handshake with {addr}: {e}"));
            tokio::spawn(async move {
                let _ = connection.await;
            });
            connections.push(Connection {
                send,
                uri: uri.clone(),
            });
        }
        Clients(Arc::new(connections))
    }

    /// Connection `i`, round robin.
    pub(crate) fn get(&self, i: usize) -> &Connection {
        &self.0[i % self.0.len()]
    }
}

/// The request of each of `users` users (`u0`, `u1`, ...) on domain `bench`, encoded once.
pub(crate) fn user_bodies(users: usize) -> Arc<Vec<Bytes>> {
    Arc::new(
        (0..users)
            .map(|u| request_body("bench", &format!("u{u}")))
            .collect(),
    )
}

/// A `ShouldRateLimit` request for `user` on `domain`, as gRPC frames a message: a flag byte
/// (not compressed), the length (big-endian `u32`), the protobuf bytes.
pub(crate) fn request_body(domain: &str, user: &str) -> Bytes {
    let message = RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: user.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    };
    let len = message.encoded_len();
    let mut frame = BytesMut::with_capacity(5 + len);
    frame.put_u8(0);
    frame.put_u32(u32::try_from(len).expect("a small message"));
    message.encode(&mut frame).expect("room for the message");
    frame.freeze()
}

/// One `ShouldRateLimit` with the framed request `body`: its overall code, or the gRPC error
/// (a timeout after [`CALL_TIMEOUT`] as `DEADLINE_EXCEEDED`).
pub(crate) async fn call(connection: &Connection, body: Bytes) -> Result<Code, Status> {
    match tokio::time::timeout(CALL_TIMEOUT, exchange(connection, body)).await {
        Ok(result) => result,
        Err(_) => Err(Status::deadline_exceeded("the call's own timeout")),
    }
}

fn h2_status(e: &h2::Error) -> Status {
    Status::unavailable(e.to_string())
}

/// `grpc-status` in `headers`: `None` if absent, else OK or the error it says.
fn grpc_status(headers: &http::HeaderMap) -> Option<Result<(), Status>> {
    let value = headers.get("grpc-status")?;
    let code = tonic::Code::from_bytes(value.as_bytes());
    Some(if code == tonic::Code::Ok {
        Ok(())
    } else {
        let message = headers
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .unwrap_or_default();
        Err(Status::new(code, message.to_owned()))
    })
}

async fn exchange(connection: &Connection, body: Bytes) -> Result<Code, Status> {
    let mut send = connection
        .send
        .clone()
        .ready()
        .await
        .map_err(|e| h2_status(&e))?;
    let mut request = Request::new(());
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = connection.uri.clone();
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
    headers.insert("grpc-timeout", HeaderValue::from_static(GRPC_TIMEOUT));
    let (response, mut stream) = send
        .send_request(request, false)
        .map_err(|e| h2_status(&e))?;
    stream.send_data(body, true).map_err(|e| h2_status(&e))?;
    let (head, mut body) = response.await.map_err(|e| h2_status(&e))?.into_parts();
    if head.status != http::StatusCode::OK {
        return Err(Status::unknown(format!("HTTP status {}", head.status)));
    }
    // A trailers-only answer (an error) carries its status in the headers.
    if let Some(Err(status)) = grpc_status(&head.headers) {
        return Err(status);
    }
    let mut message = Bytes::new();
    while let Some(data) = body.data().await {
        let data = data.map_err(|e| h2_status(&e))?;
        let _ = body.flow_control().release_capacity(data.len());
        message = if message.is_empty() {
            data
        } else {
            [message, data].concat().into()
        };
    }
    let trailers = body.trailers().await.map_err(|e| h2_status(&e))?;
    match trailers.as_ref().and_then(grpc_status) {
        Some(Ok(())) => {}
        Some(Err(status)) => return Err(status),
        None if grpc_status(&head.headers).is_some() => {}
        None => return Err(Status::unknown("no grpc-status")),
    }
    if message.len() < 5 || message[0] != 0 {
        return Err(Status::internal("not one uncompressed gRPC message"));
    }
    let response = RateLimitResponse::decode(&message[5..])
        .map_err(|e| Status::internal(format!("decode the answer: {e}")))?;
    Ok(Code::try_from(response.overall_code).unwrap_or(Code::Unknown))
}

/// What one measured window of load got.
pub(crate) struct Tally {
    /// Answers with a decision (`OK` or `OVER_LIMIT`) completed in the window.
    pub(crate) decisions: u64,
    /// Calls that failed (a gRPC status, a timeout, an `UNKNOWN` code) in the window.
    pub(crate) errors: u64,
    /// Latency of the decisions, µs.
    pub(crate) latency: Histogram<u64>,
}

impl Tally {
    pub(crate) fn new() -> Tally {
        Tally {
            decisions: 0,
            errors: 0,
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
        }
    }

    /// Counts one call's `result`, answered `took` after it started.
    pub(crate) fn record<E>(&mut self, result: &Result<Code, E>, took: Duration) {
        match result {
            Ok(Code::Ok | Code::OverLimit) => {
                self.decisions += 1;
                let us = took.as_micros().max(1) as u64;
                self.latency.saturating_record(us);
            }
            _ => self.errors += 1,
        }
    }

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.decisions += other.decisions;
        self.errors += other.errors;
        self.latency.add(&other.latency).expect("same bounds");
    }
}

/// Runs `concurrency` callers on domain `bench` over `users` users from `start` until `end`,
/// counting only calls that complete in `[measure_from, end)`; the caller snapshots CPU at
/// those two instants meanwhile. User `i` of caller `c` is `u{(c * 7919 + i) % users}`: every
/// caller walks all users, from places far apart.
pub(crate) async fn run(
    clients: &Clients,
    concurrency: usize,
    users: usize,
    measure_from: Instant,
    end: Instant,
    decided: &Arc<AtomicU64>,
) -> Tally {
    let bodies = user_bodies(users);
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let clients = clients.clone();
            let bodies = Arc::clone(&bodies);
            let decided = Arc::clone(decided);
            tokio::spawn(async move {
                let connection = clients.get(c);
                let mut tally = Tally::new();
                let mut i = c * 7919;
                while Instant::now() < end {
                    let body = bodies[i % bodies.len()].clone();
                    i += 1;
                    let started = Instant::now();
                    let result = call(connection, body).await;
                    let done = Instant::now();
                    if let Ok(Code::Ok | Code::OverLimit) = result {
                        decided.fetch_add(1, Ordering::Relaxed);
                    }
                    if done < measure_from || done >= end {
                        continue;
                    }
                    tally.record(&result, done - started);
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::new();
    for task in tasks {
        total.merge(&task.await.expect("a load task"));
    }
    total
}

/// What one exactness burst got.
pub(crate) struct Burst {
    pub(crate) admitted: u64,
    /// Calls that failed (a gRPC status: Envoy's `failure_mode_deny` decides those).
    pub(crate) errors: u64,
    /// One more call after the burst: `Some(false)` if `OVER_LIMIT`, as it must be after 3
    /// admitted, `Some(true)` if admitted, `None` if it failed.
    pub(crate) then_admitted: Option<bool>,
}

impl Burst {
    /// More than the limit passed: over 3 admitted, or 3 and the next call still admitted.
    pub(crate) fn over_admitted(&self) -> bool {
        self.admitted > 3 || (self.admitted == 3 && self.then_admitted == Some(true))
    }

    /// Exact: no more than the limit passed, and no fewer unless calls failed (each failed
    /// call may have been one that would have passed).
    pub(crate) fn exact(&self) -> bool {
        let failed = self.errors > 0 || self.then_admitted.is_none();
        !self.over_admitted() && (self.admitted == 3 || failed)
    }
}

/// One burst on domain `small` (3 per minute per user): `concurrency` calls for `user` all at
/// once, then one more call once they have all answered.
pub(crate) async fn burst(clients: &Clients, concurrency: usize, user: &str) -> Burst {
    let start = Arc::new(tokio::sync::Barrier::new(concurrency));
    let body = request_body("small", user);
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let clients = clients.clone();
            let start = Arc::clone(&start);
            let body = body.clone();
            tokio::spawn(async move {
                start.wait().await;
                call(clients.get(c), body).await
            })
        })
        .collect();
    let (mut admitted, mut errors) = (0, 0);
    for task in tasks {
        match task.await.expect("a burst task") {
            Ok(Code::Ok) => admitted += 1,
            Ok(Code::OverLimit) => {}
            _ => errors += 1,
        }
    }
    let then = call(clients.get(0), body).await;
    Burst {
        admitted,
        errors,
        then_admitted: match then {
            Ok(Code::Ok) => Some(true),
            Ok(Code::OverLimit) => Some(false),
            _ => None,
        },
    }
}

/// Five calls in a row on domain `small` for `user`, each after the last answered: the limit
/// as the server reads it, without concurrency (exact is `OK OK OK OVER OVER`). A burst that
/// over-admits against this shows a race, not a limit the server did not match.
pub(crate) async fn in_a_row(clients: &Clients, user: &str) -> String {
    let body = request_body("small", user);
    let mut codes = Vec::with_capacity(5);
    for _ in 0..5 {
        codes.push(match call(clients.get(0), body.clone()).await {
            Ok(Code::Ok) => "OK".to_owned(),
            Ok(Code::OverLimit) => "OVER".to_owned(),
            Ok(other) => format!("{other:?}"),
            Err(status) => format!("error {:?}", status.code()),
        });
    }
    codes.join(" ")
}

/// One call on domain `bench` that must answer: the server is up and its Redis reachable.
pub(crate) async fn ready(clients: &Clients) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = request_body("bench", "warm-up");
    loop {
        match call(clients.get(0), body.clone()).await {
            Ok(Code::Ok) => return,
            other if Instant::now() > deadline => panic!("the server never answered OK: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
