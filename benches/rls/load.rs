//! The load: a tonic client on our generated RLS stubs, `concurrency` calls in flight over a
//! few HTTP/2 connections (as an Envoy fleet keeps a few per RLS host), each call one
//! descriptor `user=<u>` in the domain asked for.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{
    RateLimitRequest, rate_limit_response::Code, rate_limit_service_client::RateLimitServiceClient,
};
use tonic::transport::Channel;

/// HTTP/2 connections the calls share, round robin.
pub(crate) const CONNECTIONS: usize = 4;
/// A call's own bound: a stuck server costs the bench this, never a hang.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections to one server.
#[derive(Clone)]
pub(crate) struct Clients(Vec<RateLimitServiceClient<Channel>>);

impl Clients {
    /// Opens [`CONNECTIONS`] connections to `addr` (`127.0.0.1:PORT`).
    pub(crate) async fn connect(addr: &str) -> Clients {
        let mut clients = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let channel = Channel::from_shared(format!("http://{addr}"))
                .expect("a valid URI")
                .tcp_nodelay(true)
                .connect()
                .await
                .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
            clients.push(RateLimitServiceClient::new(channel));
        }
        Clients(clients)
    }

    fn get(&self, i: usize) -> RateLimitServiceClient<Channel> {
        self.0[i % self.0.len()].clone()
    }
}

/// One `ShouldRateLimit` on `domain` for `user`: its overall code, or the gRPC error.
async fn call(
    client: &mut RateLimitServiceClient<Channel>,
    domain: &str,
    user: &str,
) -> Result<Code, tonic::Status> {
    let descriptor = RateLimitDescriptor {
        entries: vec![Entry {
            key: "user".into(),
            value: user.into(),
        }],
        ..Default::default()
    };
    let mut request = tonic::Request::new(RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![descriptor],
        hits_addend: 0,
    });
    request.set_timeout(CALL_TIMEOUT);
    let response = client.should_rate_limit(request).await?.into_inner();
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

    pub(crate) fn merge(&mut self, other: &Tally) {
        self.decisions += other.decisions;
        self.errors += other.errors;
        self.latency.add(&other.latency).expect("same bounds");
    }
}

/// Runs `concurrency` callers on `domain` `bench` over `users` users from `start` until `end`,
/// counting only calls that complete in `[measure_from, end)`; the caller snapshots CPU at
/// those two instants meanwhile. User `i` of caller `c` is `u{(c * 7919 + i) % users}`: every
/// caller walks all users, from places far apart.
pub(crate) async fn run(
    clients: &Clients,
    concurrency: usize,
    users: usize,
    measure_from: Instant,
    end: Instant,
    decided: &std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Tally {
    let names: std::sync::Arc<Vec<String>> =
        std::sync::Arc::new((0..users).map(|u| format!("u{u}")).collect());
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let mut client = clients.get(c);
            let names = std::sync::Arc::clone(&names);
            let decided = std::sync::Arc::clone(decided);
            tokio::spawn(async move {
                let mut tally = Tally::new();
                let mut i = c * 7919;
                while Instant::now() < end {
                    let user = &names[i % names.len()];
                    i += 1;
                    let started = Instant::now();
                    let result = call(&mut client, "bench", user).await;
                    let done = Instant::now();
                    if let Ok(Code::Ok | Code::OverLimit) = result {
                        decided.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    if done < measure_from || done >= end {
                        continue;
                    }
                    match result {
                        Ok(Code::Ok | Code::OverLimit) => {
                            tally.decisions += 1;
                            let us = (done - started).as_micros().max(1) as u64;
                            tally.latency.saturating_record(us);
                        }
                        _ => tally.errors += 1,
                    }
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
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(concurrency));
    let tasks: Vec<_> = (0..concurrency)
        .map(|c| {
            let mut client = clients.get(c);
            let start = std::sync::Arc::clone(&start);
            let user = user.to_owned();
            tokio::spawn(async move {
                start.wait().await;
                call(&mut client, "small", &user).await
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
    let then = call(&mut clients.get(0), "small", user).await;
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
    let mut client = clients.get(0);
    let mut codes = Vec::with_capacity(5);
    for _ in 0..5 {
        codes.push(match call(&mut client, "small", user).await {
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
    let mut client = clients.get(0);
    loop {
        match call(&mut client, "bench", "warm-up").await {
            Ok(Code::Ok) => return,
            other if Instant::now() > deadline => panic!("the server never answered OK: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
