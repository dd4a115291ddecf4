//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the rate limit config from an xDS server, as
//! envoyproxy/ratelimit takes it (Envoy Gateway's way of configuring it). The client opens an
//! ADS stream (`CONFIG_GRPC_XDS_SERVER_URL`) as node `CONFIG_GRPC_XDS_NODE_ID`, subscribed to
//! `type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig`. Each response is the
//! whole config (state of the world, one resource per domain): it is built as a directory of
//! files is, counted as a file reload is (`config_load_success` / `config_load_error`), and
//! put in force through the same path, or NACKed with the old config kept.
//!
//! The client lives in the server, not the library: it is an operational concern of the
//! drop-in (its settings, its stats, its place in the start), on its own generated ADS code
//! (`proto/`) and the library's `RlsConfig`.
//!
//! The listeners open without waiting for the xDS server (`FORCE_START_WITHOUT_INITIAL_CONFIG`
//! or not): until the first config is in force, decisions answer as the Go service answers
//! with no config (see `InForce`). envoyproxy/ratelimit opens none before its first config event
//! unless forced, so a slow xDS server failed liveness probes with "connection refused".
//! A response is ACKed once its config is in force.

mod backoff;
mod client;
mod convert;
mod proto;

use redlimit::rls::config::RlsConfig;

use super::InForce;
use crate::settings::XdsSettings;

/// The client, checked, not yet started.
#[derive(Debug)]
pub(crate) struct Xds {
    client: client::Client,
    backoff: backoff::Backoff,
}

/// Checks the client's settings: settings that cannot work (a bad URL or header) stop the
/// start.
pub(crate) fn prepare(settings: &XdsSettings, merge_domains: bool) -> Result<Xds, String> {
    Ok(Xds {
        client: client::Client::new(settings, merge_domains)?,
        backoff: backoff::Backoff::new(settings),
    })
}

impl Xds {
    /// Streams for ever, putting each accepted config in force.
    pub(crate) fn start(self, target: InForce) -> tokio::task::JoinHandle<()> {
        tracing::warn!(
            "no config until the xDS server sends one: until then decisions answer UNKNOWN ({})",
            super::NO_CONFIG
        );
        tokio::spawn(self.client.run(self.backoff, target))
    }
}

/// Counts and logs a response's outcome, as a file reload's is counted.
fn record(version: &str, outcome: &Result<RlsConfig, String>) {
    match outcome {
        Ok(config) => {
            metrics::counter!("ratelimit_service_config_load_success").increment(1);
            tracing::info!(
                "config version {version:?} from the xDS server: {} domains",
                config.domains().count()
            );
        }
        Err(e) => {
            metrics::counter!("ratelimit_service_config_load_error").increment(1);
            tracing::error!(
                "config version {version:?} from the xDS server NACKed, the one in force stays: {e}"
            );
        }
    }
}
