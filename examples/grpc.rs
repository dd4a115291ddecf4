//! A tonic gRPC server behind the layer, serving the standard health service
//! (`grpc.health.v1.Health`, from `tonic-health`: no protoc needed). Calls past the limit fail
//! with `RESOURCE_EXHAUSTED` and `google.rpc.ErrorInfo` / `RetryInfo` / `QuotaFailure` details.
//!
//! ```text
//! cargo run --features grpc --example grpc -- \
//!   --bind 127.0.0.1:50051 --limit 5/10s --key metadata:x-api-key
//! ```
//!
//! The flags are those of `examples/server.rs` (`--help`, or the flag table in README.md), with
//! gRPC's words for keys: `--key metadata:NAME` and `--key method` (default ip: tonic's peer
//! address). It prints `listening on ADDR` once bound; a bad flag prints one line on stderr
//! and exits with 2.
//! Try it with grpcurl: `grpcurl -plaintext -H 'x-api-key: k' 127.0.0.1:50051
//! grpc.health.v1.Health/Check`.

mod cli;

use std::process::ExitCode;

use cli::shutdown_signal;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

#[tokio::main]
async fn main() -> ExitCode {
    let (args, layer) = match cli::setup("grpc") {
        Ok(setup) => setup,
        Err(status) => return status,
    };
    let _watcher = match cli::watch_config(&args, &layer) {
        Ok(watcher) => watcher,
        Err(status) => return status,
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", ServingStatus::Serving)
        .await;

    let listener = match cli::listen(args.bind).await {
        Ok(listener) => listener,
        Err(status) => return status,
    };

    let served = Server::builder()
        .layer(layer)
        .add_service(health)
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown_signal())
        .await;
    drop(reporter);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: server failed: {e}");
            ExitCode::FAILURE
        }
    }
}
