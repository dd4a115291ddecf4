//! The floor of an RLS server's cost per call, as processes of their own in the same harness
//! (the bench binary run again with `REDLIMIT_BENCH_FLOOR` set, so each is measured as the
//! real servers are: its own `/proc/PID/stat`, its own Redis connection):
//!
//! - `ok`: a tonic server whose `ShouldRateLimit` answers `OK` without a store: the protocol's
//!   floor (HTTP/2, gRPC framing, protobuf, one task per call as tonic serves them);
//! - `evalsha`: the same server sending one `EVALSHA` per call, awaited, over one multiplexed
//!   redis-rs connection: the minimal fixed window of `benches/redis_cost/`
//!   (`minimal_fixed_window.lua`: `TIME`, `GET`, `SET ... PX`, the same state text as ours),
//!   keyed on the first descriptor's first value; `OVER_LIMIT` when it denies. No batching,
//!   no deadline, no breaker, no stats, no headers: what a hand-written RLS costs.
//!
//! Both run on a current-thread runtime, as ours runs on one worker thread by default.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse, rate_limit_response::Code,
};
use tonic::{Request, Response, Status};

use crate::servers::{Kind, Server};

/// The variable that makes the bench binary a floor server (`ok` or `evalsha`).
const FLOOR: &str = "REDLIMIT_BENCH_FLOOR";
/// The Redis port the `evalsha` floor connects to.
const FLOOR_REDIS: &str = "REDLIMIT_BENCH_FLOOR_REDIS";
const SCRIPT: &str = include_str!("../redis_cost/minimal_fixed_window.lua");
/// Domain `bench`'s limit: 10^9 an hour.
const COUNT: u64 = 1_000_000_000;
const PERIOD_US: u64 = 3_600_000_000;

/// Starts the floor server `kind` (`Kind::FloorOk` or `Kind::FloorEvalsha`) on `redis_port`.
pub(crate) fn start(kind: Kind, redis_port: u16) -> Server {
    let which = match kind {
        Kind::FloorOk => "ok",
        Kind::FloorEvalsha => "evalsha",
        other => panic!("{other:?} is not a floor server"),
    };
    let exe = std::env::current_exe().expect("the bench's own path");
    let child = Command::new(exe)
        .env_clear()
        .env(FLOOR, which)
        .env(FLOOR_REDIS, redis_port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn a floor server");
    Server::from_child(kind, child, crate::servers::scratch(which))
}

/// When this process was started as a floor server: serves until killed, never returns.
pub(crate) fn serve_if_asked() {
    let Ok(which) = std::env::var(FLOOR) else {
        return;
    };
    // A dispatcher that records nothing, as a server's own subscriber would at its usual
    // level: without one, every span tonic and h2 open goes to the `log` crate instead (the
    // `log` feature of `tracing`, on in this build), some 10 000 instructions a call that no
    // real server pays.
    let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the floor server's runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let addr: SocketAddr = listener.local_addr().expect("its address");
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let router = match which.as_str() {
            "ok" => tonic::transport::Server::builder()
                .add_service(RateLimitServiceServer::new(Floor { redis: None })),
            "evalsha" => {
                let port = std::env::var(FLOOR_REDIS).expect("REDLIMIT_BENCH_FLOOR_REDIS");
                let client =
                    redis::Client::open(format!("redis://127.0.0.1:{port}")).expect("a Redis URL");
                let mut connection = client
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect to Redis");
                let sha: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(SCRIPT)
                    .query_async(&mut connection)
                    .await
                    .expect("load the script");
                tonic::transport::Server::builder().add_service(RateLimitServiceServer::new(
                    Floor {
                        redis: Some((connection, sha)),
                    },
                ))
            }
            other => panic!("{FLOOR}={other}: expected ok or evalsha"),
        };
        println!("grpc on {addr}");
        router.serve_with_incoming(incoming).await.expect("serve");
    });
    std::process::exit(0);
}

struct Floor {
    redis: Option<(redis::aio::MultiplexedConnection, String)>,
}

#[tonic::async_trait]
impl RateLimitService for Floor {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let Some((connection, sha)) = &self.redis else {
            return Ok(Response::new(answer(Code::Ok)));
        };
        let request = request.into_inner();
        let value = request
            .descriptors
            .first()
            .and_then(|d| d.entries.first())
            .map_or("", |e| e.value.as_str());
        let reply: Vec<i64> = redis::cmd("EVALSHA")
            .arg(sha)
            .arg(1)
            .arg(format!("floor:{{bench}}:{value}"))
            .arg(COUNT)
            .arg(PERIOD_US)
            .arg(request.hits_addend.max(1))
            .query_async(&mut connection.clone())
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let code = if reply.get(1) == Some(&1) {
            Code::Ok
        } else {
            Code::OverLimit
        };
        Ok(Response::new(answer(code)))
    }
}

fn answer(code: Code) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code as i32,
        ..Default::default()
    }
}
