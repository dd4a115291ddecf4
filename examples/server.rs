//! A server whose rate limit is set on the command line: for trying policies by hand and for
//! black-box tests. Every GET answers `200 ok` unless the limit says otherwise.
//!
//! ```text
//! cargo run --release --example server -- --redis redis://127.0.0.1:6379 \
//!   --algorithm sliding-log --limit 5/3s --limit 20/60s --key ip
//! ```
//!
//! The flags, their values and defaults: `--help`, or the flag table in examples/README.md; both are
//! generated from the one declaration in `examples/cli/flags.rs`. Secrets (`--redis` with a
//! password, `--jwt-secret`, `--admin-token`) also come from `REDLIMIT_*` variables or files
//! (`--admin-token-file`, `REDLIMIT_ADMIN_TOKEN_FILE`), so they stay out of the process list.
//! The admin endpoints are the library's `redlimit::admin::router`. Once the listener is bound
//! the server prints `listening on ADDR` (the real address, so `--bind 127.0.0.1:0` reveals
//! its port), after `metrics on ADDR` and `admin on ADDR` for the listeners of
//! `--metrics-bind` and `--admin-bind`. A bad flag prints one line on stderr and exits with status 2. Logs go to stderr
//! at `warn`; `RUST_LOG` overrides. Run the tests of the flag parser with `cargo test
//! --examples`.

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
    // Before the first request: the layer takes its metric handles from the recorder then.
    if let Some(addr) = args.metrics_bind {
        let handle = match cli::metrics::install() {
            Ok(handle) => handle,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        };
        match cli::listen_for("metrics", addr).await {
            Ok(listener) => cli::serve_beside(listener, cli::metrics::router(handle)),
            Err(status) => return status,
        }
    }
    if let (Some(addr), Some(token)) = (args.admin_bind, args.admin_token.as_deref()) {
        let token = match redlimit::admin::AdminToken::new(token) {
            Ok(token) => token,
            Err(e) => return cli::usage_error(&format!("--admin-token: {e}")),
        };
        // The handle of the very layer that serves requests: a reset clears its deny cache too.
        let admin = redlimit::admin::router(layer.handle(), token);
        match cli::listen_for("admin", addr).await {
            Ok(listener) => cli::serve_beside(listener, admin),
            Err(status) => return status,
        }
    }
    // Before the layer goes into the router: the handle reaches every clone of it.
    let _watcher = match cli::watch_config(&args, &layer) {
        Ok(watcher) => watcher,
        Err(status) => return status,
    };
    // Every path answers `ok` (after `--handler-delay-ms`) but `GET /fail`, which answers 500
    // (for `--refund-5xx`); the fallback leaves the URI path to `--key route`.
    let delay = args.handler_delay;
    let handler = move || async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        "ok"
    };
    let fail = || async { (http::StatusCode::INTERNAL_SERVER_ERROR, "failed\n") };
    let app = Router::new()
        .route("/fail", axum::routing::get(fail))
        .fallback(handler)
        .layer(layer);

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
