//! `CONFIG_TYPE=GRPC_XDS_SOTW`: the rate limit config from an xDS server, as
//! envoyproxy/ratelimit takes it (Envoy Gateway's way of configuring it). The client opens an
//! ADS stream (`CONFIG_GRPC_XDS_SERVER_URL`) as node `CONFIG_GRPC_XDS_NODE_ID`, subscribed to
//! `type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig`. Each response is the
//! whole config (state of the world, one resource per domain): it is built as a directory of
//! files is, counted as a file reload is (`config_load_success` / `config_load_error`), and
//! put in force through the same path, or NACKed with the old config kept.
//!
//! The client lives in the server, not the library: it is an operational concern of the
//! drop-in (its settings, its stats, its place in the start), on the library's generated ADS
//! code and `RlsConfig`.
//!
//! Without `FORCE_START_WITHOUT_INITIAL_CONFIG` the server waits for the first accepted config
//! before it opens its listeners (envoyproxy/ratelimit waits for the first config event too);
//! with it, it serves at once with no domain.

mod backoff;
mod client;
mod convert;

use redlimit::rls::RateLimitService;
use redlimit::rls::config::RlsConfig;
use tokio::sync::watch;

use crate::health::Health;
use crate::settings::XdsSettings;

/// The running client and the configs it accepts.
#[derive(Debug)]
pub(crate) struct Xds {
    configs: watch::Receiver<Option<RlsConfig>>,
    _client: tokio::task::JoinHandle<()>,
}

/// Starts the client: settings that cannot work (a bad URL or header) stop the start.
pub(crate) fn start(settings: &XdsSettings, merge_domains: bool) -> Result<Xds, String> {
    let client = client::Client::new(settings, merge_domains)?;
    let (sender, configs) = watch::channel(None);
    let backoff = backoff::Backoff::new(settings);
    Ok(Xds {
        configs,
        _client: tokio::spawn(client.run(backoff, sender)),
    })
}

impl Xds {
    /// The config to start with: without `force_start`, the first the server sends that
    /// builds (for as long as that takes); with it, none.
    pub(crate) async fn first(&mut self, force_start: bool) -> RlsConfig {
        if force_start {
            return self.configs.borrow_and_update().clone().unwrap_or_default();
        }
        tracing::warn!("waiting for the first config from the xDS server");
        match self.configs.wait_for(Option::is_some).await {
            Ok(config) => config.clone().unwrap_or_default(),
            Err(_) => RlsConfig::default(),
        }
    }

    /// Puts each later config in force, for ever.
    pub(crate) fn follow(
        mut self,
        service: RateLimitService,
        health: Health,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let _client = self._client;
            while self.configs.changed().await.is_ok() {
                let config = self.configs.borrow_and_update().clone();
                if let Some(config) = config {
                    crate::reload::apply(config, &service, &health);
                }
            }
        })
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
