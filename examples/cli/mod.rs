//! The command line shared by `examples/server.rs` (HTTP) and `examples/grpc.rs` (gRPC):
//!
//! - `flags.rs`: every flag, declared once; `--help` and the flag table of `examples/README.md` are generated
//!   from that table.
//! - `args.rs`: the command line parsed and checked into plain [`Args`].
//! - `layer.rs`: the layer the arguments describe, the only code calling the library's
//!   constructors.
//! - `metrics.rs`: `--metrics-bind`, the Prometheus recorder and `GET /metrics`.
//!
//! `--admin-bind` serves the library's admin router (`redlimit::admin`, in `server.rs`).
#![allow(dead_code)] // each example uses a different part

mod args;
mod flags;
mod layer;
pub(crate) mod metrics;

use std::net::SocketAddr;

use args::Args;
use redlimit::RateLimitLayer;

/// Resolves on ctrl-c or, on Unix, SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Parses the command line of `program`, prints the help if asked or else any warnings, starts
/// logging to stderr (`warn`, or `RUST_LOG`), and builds the layer. `Err` carries the exit
/// status to return: success after `--help`, 2 after a bad flag.
pub(crate) fn setup(program: &str) -> Result<(Args, RateLimitLayer), std::process::ExitCode> {
    use std::io::IsTerminal;

    let args =
        args::parse_args(std::env::args().skip(1)).map_err(|message| usage_error(&message))?;
    if args.help {
        println!("{}", flags::usage(program));
        return Err(std::process::ExitCode::SUCCESS);
    }
    for warning in &args.warnings {
        eprintln!("warning: {warning}");
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let layer = layer::build_layer(&args).map_err(|message| usage_error(&message))?;
    Ok((args, layer))
}

/// Binds `addr` and prints `listening on ADDR` (the real address: `:0` reveals its port);
/// `Err` carries the exit status after a message on stderr.
pub(crate) async fn listen(
    addr: SocketAddr,
) -> Result<tokio::net::TcpListener, std::process::ExitCode> {
    use std::io::Write;

    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        eprintln!("error: cannot listen on {addr}: {e}");
        std::process::ExitCode::FAILURE
    })?;
    println!("listening on {}", listener.local_addr().unwrap_or(addr));
    let _ = std::io::stdout().flush();
    Ok(listener)
}

/// Serves `app` on `listener` in the background (the admin and metrics listeners: they stop with
/// the process).
pub(crate) fn serve_beside(listener: tokio::net::TcpListener, app: axum::Router) {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("error: listener failed: {e}");
        }
    });
}

/// Binds `addr` for `what` and prints `WHAT on ADDR`; `Err` carries the exit status.
pub(crate) async fn listen_for(
    what: &str,
    addr: SocketAddr,
) -> Result<tokio::net::TcpListener, std::process::ExitCode> {
    use std::io::Write;

    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        eprintln!("error: cannot listen on {addr} for {what}: {e}");
        std::process::ExitCode::FAILURE
    })?;
    println!("{what} on {}", listener.local_addr().unwrap_or(addr));
    let _ = std::io::stdout().flush();
    Ok(listener)
}

/// Prints a bad flag's message and the exit status for it.
pub(crate) fn usage_error(message: &str) -> std::process::ExitCode {
    eprintln!("error: {message} (see --help)");
    std::process::ExitCode::from(2)
}

/// With `--config`: reloads the file whenever it changes, until the returned watcher drops.
#[cfg(feature = "config")]
pub(crate) fn watch_config(
    args: &Args,
    layer: &RateLimitLayer,
) -> Result<Option<redlimit::config::Watcher>, std::process::ExitCode> {
    let Some(path) = &args.config else {
        return Ok(None);
    };
    match redlimit::config::Reloader::new(layer.handle()).watch(path) {
        Ok(watcher) => Ok(Some(watcher)),
        Err(e) => {
            eprintln!("error: --config: {e}");
            Err(std::process::ExitCode::FAILURE)
        }
    }
}

/// Without the `config` feature, `--config` is refused when the layer is built.
#[cfg(not(feature = "config"))]
pub(crate) fn watch_config(
    _: &Args,
    _: &RateLimitLayer,
) -> Result<Option<()>, std::process::ExitCode> {
    Ok(None)
}
