//! A server whose rate limit is set on the command line: for trying policies by hand and for
//! black-box tests. Every GET answers `200 ok` unless the limit says otherwise.
//!
//! ```text
//! cargo run --release --example server -- \
//!   --bind 127.0.0.1:3000            # address to listen on (default 127.0.0.1:3000)
//!   --redis redis://127.0.0.1:6379   # Redis URL; without it: in-memory store
//!   --redis-cluster URL,URL,...      # or: a Redis Cluster, seeded with some of its nodes
//!   --redis-sentinel URL,URL,... --sentinel-master NAME   # or: a master behind Sentinels
//!   --algorithm fixed-window|sliding-window|sliding-log|token-bucket|gcra   # default gcra
//!   --limit 5/3s --limit 20/60s      # repeatable; N/DURATION with s, m, h or ms
//!   --key ip|header:NAME|query:NAME|jwt|route|global   # or several: route+ip; default ip
//!   --trusted-proxy CIDR             # repeatable: believe X-Forwarded-For from these proxies
//!   --ipv6-prefix N                  # group IPv6 clients by /N (default 64)
//!   --jwt-secret SECRET              # HS256 secret for --key jwt (feature jwt)
//!   --on-store-error open|closed|local  # default open
//!   --store-timeout-ms 100
//!   --prefix NAME                    # Redis key prefix
//! ```
//!
//! Flags also take the `--flag=value` form. Once the listener is bound the server prints
//! `listening on ADDR` (the real address, so `--bind 127.0.0.1:0` reveals its port). A bad
//! flag prints one line on stderr and exits with status 2. Logs go to stderr at `warn`;
//! `RUST_LOG` overrides. Run the tests of the flag parser with `cargo test --examples`.

mod cli;

use std::net::SocketAddr;
use std::process::ExitCode;

use axum::Router;
use cli::shutdown_signal;

#[tokio::main]
async fn main() -> ExitCode {
    let (args, layer) = match cli::setup("server") {
        Ok(setup) => setup,
        Err(status) => return status,
    };
    // Every path answers `ok`; the fallback leaves the URI path to `--key route`.
    let app = Router::new().fallback(|| async { "ok" }).layer(layer);

    let listener = match cli::listen(args.bind).await {
        Ok(listener) => listener,
        Err(status) => return status,
    };

    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: server failed: {e}");
            ExitCode::FAILURE
        }
    }
}
