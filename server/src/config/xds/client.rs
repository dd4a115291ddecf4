//! The ADS stream: one `StreamAggregatedResources` call at a time, subscribed to
//! `RateLimitConfig`, each response ACKed (its version and nonce) once its resources built a
//! config, or NACKed (the version in force, the nonce and an `error_detail`) when they did
//! not; reconnected with the backoff when the stream ends.

use prost_types::{Struct, Value, value::Kind};
use redlimit::rls::proto::envoy::config::core::v3::{Node, node::UserAgentVersionType};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use super::backoff::Backoff;
use super::convert::{self, TYPE_URL};
use super::proto::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use super::proto::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use super::proto::google::rpc::Status;
use crate::config::InForce;
use crate::settings::XdsSettings;

/// gRPC's `INVALID_ARGUMENT`: the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;
/// How long a connection may take before it counts as failed (and is tried again), so that a
/// server whose packets vanish does not hold the client for the system's TCP timeout.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the client needs, checked once at start.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    endpoint: Endpoint,
    node: Node,
    headers: MetadataMap,
    max_message: Option<usize>,
    merge_domains: bool,
}

/// How a session ended.
enum Ended {
    /// No stream was opened (no connection, or the call was refused).
    NotOpened(String),
    /// An open stream ended.
    Closed(String),
}

impl Client {
    /// Checks the settings: a bad URL or header stops the start, as it does the Go service's.
    pub(crate) fn new(s: &XdsSettings, merge_domains: bool) -> Result<Client, String> {
        let uri = s.server_uri()?;
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| format!("CONFIG_GRPC_XDS_SERVER_URL `{uri}`: {e}"))?
            .connect_timeout(CONNECT_TIMEOUT);
        if s.config_grpc_xds_server_use_tls {
            endpoint = endpoint
                .tls_config(tls(s)?)
                .map_err(|e| format!("CONFIG_GRPC_XDS_SERVER_USE_TLS: {e}"))?;
        }
        let mut headers = MetadataMap::new();
        for (name, value) in s.additional_headers()? {
            let bad = |e: &dyn std::fmt::Display| {
                format!("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS `{name}`: {e}")
            };
            let key = MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
                .map_err(|e| bad(&e))?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|e| bad(&e))?;
            headers.insert(key, value);
        }
        let metadata = s.node_metadata().into_iter().map(|(k, v)| {
            let value = Value {
                kind: Some(Kind::StringValue(v)),
            };
            (k, value)
        });
        let node = Node {
            id: s.config_grpc_xds_node_id.clone(),
            metadata: Some(Struct {
                fields: metadata.collect(),
            }),
            user_agent_name: "redlimit-server".into(),
            user_agent_version_type: Some(UserAgentVersionType::UserAgentVersion(
                env!("CARGO_PKG_VERSION").into(),
            )),
            ..Default::default()
        };
        Ok(Client {
            endpoint,
            node,
            headers,
            max_message: s.xds_client_max_msg_size_in_bytes,
            merge_domains,
        })
    }

    /// Streams for ever, putting each accepted config in force in `target`.
    pub(crate) async fn run(self, mut backoff: Backoff, target: InForce) {
        // The version in force: sent when a stream opens, and in every NACK.
        let mut version = String::new();
        loop {
            let wait = match self.session(&mut version, &mut backoff, &target).await {
                Ended::NotOpened(e) => {
                    let wait = backoff.after_connect_failure();
                    tracing::warn!("xDS server {}: {e}; again in {wait:?}", self.endpoint.uri());
                    wait
                }
                Ended::Closed(e) => {
                    let wait = backoff.after_stream();
                    tracing::warn!(
                        "xDS stream from {} ended: {e}; again in {wait:?}",
                        self.endpoint.uri()
                    );
                    wait
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    fn request(&self, version: &str, nonce: &str, error: Option<String>) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: version.to_owned(),
            node: Some(self.node.clone()),
            type_url: TYPE_URL.into(),
            response_nonce: nonce.to_owned(),
            error_detail: error.map(|message| Status {
                code: INVALID_ARGUMENT,
                message,
                details: Vec::new(),
            }),
            ..Default::default()
        }
    }

    async fn session(
        &self,
        version: &mut String,
        backoff: &mut Backoff,
        target: &InForce,
    ) -> Ended {
        let channel = match self.endpoint.connect().await {
            Ok(channel) => channel,
            Err(e) => return Ended::NotOpened(format!("cannot connect: {}", chain(&e))),
        };
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        if let Some(max) = self.max_message {
            client = client.max_decoding_message_size(max);
        }
        // A request is sent only after the response before it is handled: a few is plenty.
        let (requests, outgoing) = mpsc::channel(4);
        if requests
            .send(self.request(version, "", None))
            .await
            .is_err()
        {
            return Ended::NotOpened("the request stream closed".into());
        }
        let mut call = tonic::Request::new(ReceiverStream::new(outgoing));
        *call.metadata_mut() = self.headers.clone();
        let mut responses = match client.stream_aggregated_resources(call).await {
            Ok(response) => response.into_inner(),
            Err(status) => return Ended::NotOpened(format!("stream refused: {status}")),
        };
        tracing::info!("xDS stream open to {}", self.endpoint.uri());
        loop {
            let response = match responses.message().await {
                Ok(Some(response)) => response,
                Ok(None) => return Ended::Closed("the server closed it".into()),
                Err(status) => return Ended::Closed(status.to_string()),
            };
            let reply = self.handle(response, version, backoff, target).await;
            if requests.send(reply).await.is_err() {
                return Ended::Closed("the request stream closed".into());
            }
        }
    }

    /// Builds the response's config: put in force, then ACKed; or counted and NACKed.
    async fn handle(
        &self,
        response: DiscoveryResponse,
        version: &mut String,
        backoff: &mut Backoff,
        target: &InForce,
    ) -> DiscoveryRequest {
        // Off the runtime's thread (the server's only one by default), as a file reload is
        // read: a large config is built without stalling the decisions.
        let DiscoveryResponse {
            version_info,
            resources,
            type_url,
            nonce,
            ..
        } = response;
        let merge = self.merge_domains;
        let outcome =
            tokio::task::spawn_blocking(move || convert::config(&type_url, &resources, merge))
                .await
                .unwrap_or_else(|e| Err(format!("the config was not built: {e}")));
        let (version_info, nonce) = (&version_info, &nonce);
        super::record(version_info, &outcome);
        match outcome {
            Ok(config) => {
                backoff.reset();
                version.clone_from(version_info);
                target.put_in_force(config);
                self.request(version, nonce, None)
            }
            Err(e) => self.request(version, nonce, Some(e)),
        }
    }
}

/// An error and its sources (tonic's connect error says "transport error" alone; why is in
/// its sources: refused, a certificate for another name, ...).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The TLS of `CONFIG_GRPC_XDS_SERVER_USE_TLS`: the server verified against
/// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT` (else the webpki roots), for the name
/// `CONFIG_GRPC_XDS_SERVER_TLS_SAN` (else the URL's host); a client certificate when
/// `CONFIG_GRPC_XDS_CLIENT_TLS_CERT` and `_KEY` are given (both or neither).
fn tls(s: &XdsSettings) -> Result<ClientTlsConfig, String> {
    let read =
        |var: &str, path: &str| std::fs::read(path).map_err(|e| format!("{var} `{path}`: {e}"));
    let mut config = ClientTlsConfig::new();
    config = match s.config_grpc_xds_server_tls_cacert.as_str() {
        "" => config.with_webpki_roots(),
        path => config.ca_certificate(Certificate::from_pem(read(
            "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
            path,
        )?)),
    };
    match (
        s.config_grpc_xds_client_tls_cert.as_str(),
        s.config_grpc_xds_client_tls_key.as_str(),
    ) {
        ("", "") => {}
        ("", _) | (_, "") => {
            return Err(
                "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together"
                    .into(),
            );
        }
        (cert, key) => {
            config = config.identity(Identity::from_pem(
                read("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", cert)?,
                read("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", key)?,
            ));
        }
    }
    if !s.config_grpc_xds_server_tls_san.is_empty() {
        config = config.domain_name(s.config_grpc_xds_server_tls_san.clone());
    }
    Ok(config)
}
