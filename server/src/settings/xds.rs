//! Where the config comes from (`CONFIG_TYPE`), and the xDS client's settings for
//! `CONFIG_TYPE=GRPC_XDS_SOTW`: envoyproxy/ratelimit's `CONFIG_GRPC_XDS_*` and `XDS_CLIENT_*`
//! variables, with its defaults.

use std::time::Duration;

use clap::Args;

use super::parse::{go_bool, go_duration};

/// Where the rate limit config comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigType {
    /// YAML files under `RUNTIME_ROOT`, reloaded on change.
    File,
    /// An xDS server's `RateLimitConfig` resources, over ADS (state of the world).
    GrpcXdsSotw,
}

/// `CONFIG_TYPE`'s values, spelt as the Go service spells them.
pub(super) fn config_type(text: &str) -> Result<ConfigType, String> {
    match text {
        "FILE" => Ok(ConfigType::File),
        "GRPC_XDS_SOTW" => Ok(ConfigType::GrpcXdsSotw),
        _ => Err(format!(
            "`{text}` is not a config type (FILE or GRPC_XDS_SOTW)"
        )),
    }
}

/// The xDS client: which server, as which node, with what headers, and how it retries.
#[derive(Debug, Clone, Args)]
pub(crate) struct XdsSettings {
    /// GRPC_XDS_SOTW: the node id sent to the xDS server (its snapshots are set per node).
    #[arg(long, env = "CONFIG_GRPC_XDS_NODE_ID", default_value = "default")]
    pub(crate) config_grpc_xds_node_id: String,
    /// GRPC_XDS_SOTW: the node's metadata, `key1=value1,key2=value2` (string values).
    #[arg(long, env = "CONFIG_GRPC_XDS_NODE_METADATA", default_value = "")]
    pub(crate) config_grpc_xds_node_metadata: String,
    /// GRPC_XDS_SOTW: the xDS server, `host:port` (or `dns:///host:port`).
    #[arg(
        long,
        env = "CONFIG_GRPC_XDS_SERVER_URL",
        default_value = "localhost:18000"
    )]
    pub(crate) config_grpc_xds_server_url: String,
    /// GRPC_XDS_SOTW: how long to wait (±50%) before connecting again after a connection or
    /// a stream could not be opened.
    #[arg(long, env = "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", default_value = "3s", value_parser = go_duration)]
    pub(crate) config_grpc_xds_server_connect_retry_interval: Duration,
    /// GRPC_XDS_SOTW: gRPC metadata sent with the stream, `name1:value1,name2:value2`.
    #[arg(
        long,
        env = "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
        default_value = ""
    )]
    pub(crate) config_grpc_xds_client_additional_headers: String,
    /// GRPC_XDS_SOTW: connect to the xDS server over TLS (its certificate verified against
    /// CONFIG_GRPC_XDS_SERVER_TLS_CACERT, else the webpki roots).
    #[arg(long, env = "CONFIG_GRPC_XDS_SERVER_USE_TLS", default_value = "false", value_parser = go_bool)]
    pub(crate) config_grpc_xds_server_use_tls: bool,
    /// GRPC_XDS_SOTW over TLS: a PEM file of this client's certificate (chain), for an xDS
    /// server that asks for one (mTLS), with CONFIG_GRPC_XDS_CLIENT_TLS_KEY.
    #[arg(long, env = "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", default_value = "")]
    pub(crate) config_grpc_xds_client_tls_cert: String,
    /// GRPC_XDS_SOTW over TLS: a PEM file of CONFIG_GRPC_XDS_CLIENT_TLS_CERT's private key.
    #[arg(long, env = "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", default_value = "")]
    pub(crate) config_grpc_xds_client_tls_key: String,
    /// GRPC_XDS_SOTW over TLS: a PEM file of the authority that signed the xDS server's
    /// certificate.
    #[arg(long, env = "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", default_value = "")]
    pub(crate) config_grpc_xds_server_tls_cacert: String,
    /// GRPC_XDS_SOTW over TLS: the name the xDS server's certificate must carry (default:
    /// the host of CONFIG_GRPC_XDS_SERVER_URL).
    #[arg(long, env = "CONFIG_GRPC_XDS_SERVER_TLS_SAN", default_value = "")]
    pub(crate) config_grpc_xds_server_tls_san: String,
    /// GRPC_XDS_SOTW: after an open stream ends, the first wait before connecting again.
    #[arg(long, env = "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", default_value = "10s", value_parser = go_duration)]
    pub(crate) xds_client_backoff_initial_interval: Duration,
    /// GRPC_XDS_SOTW: the longest wait before connecting again.
    #[arg(long, env = "XDS_CLIENT_BACKOFF_MAX_INTERVAL", default_value = "60s", value_parser = go_duration)]
    pub(crate) xds_client_backoff_max_interval: Duration,
    /// GRPC_XDS_SOTW: each wait is the previous one times this factor (within the initial
    /// and the max interval; jpillora/backoff's `Factor`, as the Go service uses it).
    #[arg(long, env = "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", default_value_t = 0.5)]
    pub(crate) xds_client_backoff_random_factor: f64,
    /// GRPC_XDS_SOTW: pick each wait at random between the initial interval and the computed
    /// one.
    #[arg(long, env = "XDS_CLIENT_BACKOFF_JITTER", default_value = "true", value_parser = go_bool)]
    pub(crate) xds_client_backoff_jitter: bool,
    /// GRPC_XDS_SOTW: the largest response accepted, in bytes (empty: gRPC's 4 MiB).
    #[arg(long, env = "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES")]
    pub(crate) xds_client_max_msg_size_in_bytes: Option<usize>,
}

impl XdsSettings {
    /// `CONFIG_GRPC_XDS_NODE_METADATA` as the Go service reads it: entries split on `,`, each
    /// `key=value` split on the first `=`; an entry without `=` is skipped.
    ///
    /// ```text
    /// "zone=a,team=edge=x,junk" -> [("zone", "a"), ("team", "edge=x")]
    /// ```
    pub(crate) fn node_metadata(&self) -> Vec<(String, String)> {
        self.config_grpc_xds_node_metadata
            .split(',')
            .filter_map(|entry| entry.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS` as envconfig reads a map: `k1:v1,k2:v2`,
    /// each pair split on the first `:`. A pair without `:` is an error, as in envconfig.
    pub(crate) fn additional_headers(&self) -> Result<Vec<(String, String)>, String> {
        let text = self.config_grpc_xds_client_additional_headers.as_str();
        if text.is_empty() {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|pair| {
                pair.split_once(':')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| {
                        format!(
                            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: `{pair}` is not name:value"
                        )
                    })
            })
            .collect()
    }

    /// The server's URI for the gRPC client: `host:port` (gRPC-Go's default `passthrough`
    /// target, or `dns:///host:port`) as `http://host:port` (`https://` over TLS).
    pub(crate) fn server_uri(&self) -> Result<String, String> {
        let url = self.config_grpc_xds_server_url.as_str();
        let authority = url
            .strip_prefix("dns:///")
            .or_else(|| url.strip_prefix("passthrough:///"))
            .unwrap_or(url);
        if authority.is_empty() || authority.contains("://") || authority.contains('/') {
            return Err(format!(
                "CONFIG_GRPC_XDS_SERVER_URL: `{url}` is not host:port (or dns:///host:port)"
            ));
        }
        let scheme = if self.config_grpc_xds_server_use_tls {
            "https"
        } else {
            "http"
        };
        Ok(format!("{scheme}://{authority}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Only {
        #[command(flatten)]
        xds: XdsSettings,
    }

    fn parse(args: &[&str]) -> XdsSettings {
        Only::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .expect("parses")
            .xds
    }

    #[test]
    fn values_are_read_as_the_go_service_reads_them() {
        let s = parse(&[
            "--config-grpc-xds-node-metadata",
            "zone=a,team=edge=x,junk",
            "--config-grpc-xds-client-additional-headers",
            "x-token:abc,x-b:c:d",
            "--config-grpc-xds-server-url",
            "dns:///xds.example:18000",
        ]);
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        assert_eq!(
            s.node_metadata(),
            pairs(&[("zone", "a"), ("team", "edge=x")])
        );
        assert_eq!(
            s.additional_headers(),
            Ok(pairs(&[("x-token", "abc"), ("x-b", "c:d")]))
        );
        assert_eq!(s.server_uri().as_deref(), Ok("http://xds.example:18000"));
        let bad = parse(&["--config-grpc-xds-client-additional-headers", "nocolon"]);
        assert!(bad.additional_headers().is_err());
        let bad = parse(&["--config-grpc-xds-server-url", "unix:///run/x.sock"]);
        assert!(bad.server_uri().is_err());
    }

    #[test]
    fn defaults_are_the_go_services() {
        if let Some((name, _)) = std::env::vars()
            .find(|(n, _)| n.starts_with("CONFIG_GRPC_XDS_") || n.starts_with("XDS_CLIENT_"))
        {
            eprintln!("{name} is set: the defaults cannot be seen");
            return;
        }
        let s = parse(&[]);
        assert_eq!(s.config_grpc_xds_node_id, "default");
        assert_eq!(s.server_uri().as_deref(), Ok("http://localhost:18000"));
        assert_eq!(
            s.config_grpc_xds_server_connect_retry_interval,
            Duration::from_secs(3)
        );
        assert_eq!(
            (
                s.xds_client_backoff_initial_interval,
                s.xds_client_backoff_max_interval
            ),
            (Duration::from_secs(10), Duration::from_secs(60))
        );
        assert_eq!(s.xds_client_backoff_random_factor, 0.5);
        assert!(s.xds_client_backoff_jitter);
        assert_eq!(s.xds_client_max_msg_size_in_bytes, None);
        assert!(s.node_metadata().is_empty());
        assert_eq!(s.additional_headers(), Ok(Vec::new()));
    }

    #[test]
    fn config_types_are_the_go_services() {
        assert_eq!(config_type("FILE"), Ok(ConfigType::File));
        assert_eq!(config_type("GRPC_XDS_SOTW"), Ok(ConfigType::GrpcXdsSotw));
        assert!(config_type("file").is_err(), "spelt as Go spells it");
    }
}
