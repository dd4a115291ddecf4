//! OpenTelemetry tracing, as envoyproxy/ratelimit does it (its `src/trace/trace.go`): with
//! `TRACING_ENABLED`, a span per `ShouldRateLimit` exported over OTLP (`TRACING_EXPORTER_PROTOCOL`
//! `http`, protobuf, or `grpc`) to where the standard `OTEL_EXPORTER_OTLP_*` variables say
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, as Envoy Gateway sets it), in batches (`OTEL_BSP_*`).
//!
//! - The resource: `service.name` (`TRACING_SERVICE_NAME`), `service.namespace`,
//!   `service.instance.id` (a random UUID unless `TRACING_SERVICE_INSTANCE_ID`), over the
//!   attributes of `OTEL_RESOURCE_ATTRIBUTES`.
//! - Sampling: parent-based on a trace-id ratio (`TRACING_SAMPLING_RATE`): a call whose caller
//!   sent a trace context (W3C `traceparent`, or B3) is sampled as the caller decided; any
//!   other call at that rate.
//! - The exports run on a runtime of their own (one thread, `otlp-export`): the calls' thread
//!   only starts and ends spans and hands them over. With tracing off there is no provider,
//!   no thread, and a call takes no step of this module.
//! - On shutdown the spans not yet sent are flushed, for at most 5 s (the Go service's limit).

mod b3;
mod propagation;
mod span;

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{IdGenerator as _, RandomIdGenerator, Sampler, SdkTracerProvider};

use crate::settings::{ExporterProtocol, TracingSettings};

pub(crate) use span::{CallTracer, Traced};

/// How long a shutdown waits for the last spans to be sent (the Go service's 5 s).
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The tracer provider and the runtime its exports run on.
#[derive(Debug)]
pub(crate) struct Tracing {
    provider: SdkTracerProvider,
    /// `None` once shut down.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Tracing {
    /// The provider `settings` describe, and the calls' tracer; `None` when tracing is off.
    pub(crate) fn start(
        settings: &TracingSettings,
    ) -> Result<Option<(Tracing, CallTracer)>, String> {
        if !settings.tracing_enabled {
            return Ok(None);
        }
        plaintext_endpoint(settings.tracing_exporter_protocol, |name| {
            std::env::var(name).ok()
        })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-export")
            .enable_all()
            .build()
            .map_err(|e| format!("tracing: cannot start the export thread: {e}"))?;
        // The exporter's client and the batch task live on that runtime.
        let provider = {
            let _on_export_runtime = runtime.enter();
            let exporter = exporter(settings.tracing_exporter_protocol)?;
            let batches =
                BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
            SdkTracerProvider::builder()
                .with_span_processor(batches)
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                    settings.tracing_sampling_rate,
                ))))
                .with_resource(resource(settings))
                .build()
        };
        let tracer = CallTracer::new(provider.tracer("redlimit-server"));
        tracing::info!(
            "tracing: OTLP over {:?}, service {:?}, sampling rate {}",
            settings.tracing_exporter_protocol,
            settings.tracing_service_name,
            settings.tracing_sampling_rate
        );
        Ok(Some((
            Tracing {
                provider,
                runtime: Some(runtime),
            },
            tracer,
        )))
    }

    /// Sends the spans not yet sent (for at most [`FLUSH_TIMEOUT`]), then stops the exports.
    pub(crate) async fn shutdown(mut self) {
        let provider = self.provider.clone();
        let runtime = self.runtime.take();
        // The provider's shutdown blocks until the export task answers: off this thread.
        let flushed = tokio::task::spawn_blocking(move || {
            let result = provider.shutdown();
            if let Some(runtime) = runtime {
                runtime.shutdown_background();
            }
            result
        });
        match tokio::time::timeout(FLUSH_TIMEOUT, flushed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!("tracing: the last spans were not all sent: {e}"),
            Ok(Err(e)) => tracing::warn!("tracing: the flush failed: {e}"),
            Err(_) => {
                tracing::warn!("tracing: the last spans were not sent within {FLUSH_TIMEOUT:?}")
            }
        }
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        // Not shut down (the server stopped on an error): drop the exports without blocking.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The OTLP exporter: the endpoint, headers, timeout and compression from `OTEL_EXPORTER_OTLP_*`.
fn exporter(protocol: ExporterProtocol) -> Result<SpanExporter, String> {
    let built = match protocol {
        // The Go service picks the transport by TRACING_EXPORTER_PROTOCOL alone, whatever
        // OTEL_EXPORTER_OTLP_PROTOCOL says.
        ExporterProtocol::Http => SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build(),
        ExporterProtocol::Grpc => SpanExporter::builder()
            .with_tonic()
            .with_protocol(Protocol::Grpc)
            .build(),
    };
    built.map_err(|e| format!("tracing: the OTLP exporter: {e}"))
}

/// Refuses a collector endpoint that asks for TLS, which the exporter is built without: an
/// `https://` one, or over gRPC one without a scheme (which the SDK reads as `https://`
/// unless `OTEL_EXPORTER_OTLP_INSECURE=true`).
fn plaintext_endpoint(
    protocol: ExporterProtocol,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    let Some((name, endpoint)) = ENDPOINTS
        .iter()
        .find_map(|name| env(name).filter(|v| !v.is_empty()).map(|v| (*name, v)))
    else {
        return Ok(());
    };
    let scheme = endpoint
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    let insecure = [
        "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
        "OTEL_EXPORTER_OTLP_INSECURE",
    ]
    .iter()
    .find_map(|name| env(name))
    .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let tls = match scheme.as_deref() {
        Some("https") => true,
        None => protocol == ExporterProtocol::Grpc && !insecure,
        Some(_) => false,
    };
    if tls {
        return Err(format!(
            "{name}=`{endpoint}`: TLS to the collector is not supported; give it as http://HOST:PORT"
        ));
    }
    Ok(())
}

/// Where the spans go: the traces' own variable first, as the SDK reads them.
const ENDPOINTS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// `service.*` from the settings, over `OTEL_RESOURCE_ATTRIBUTES` and the SDK's own.
fn resource(settings: &TracingSettings) -> Resource {
    let instance_id = match settings.tracing_service_instance_id.as_str() {
        "" => random_uuid(),
        id => id.to_owned(),
    };
    Resource::builder()
        .with_service_name(settings.tracing_service_name.clone())
        .with_attributes([
            KeyValue::new(
                "service.namespace",
                settings.tracing_service_namespace.clone(),
            ),
            KeyValue::new("service.instance.id", instance_id),
        ])
        .build()
}

/// A random (version 4) UUID, as the Go service's default instance id.
fn random_uuid() -> String {
    let mut bytes = RandomIdGenerator::default().new_trace_id().to_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_asking_for_tls_are_refused_by_name() {
        let check = |protocol, vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            plaintext_endpoint(protocol, |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })
        };
        let (http, grpc) = (ExporterProtocol::Http, ExporterProtocol::Grpc);
        assert_eq!(check(http, &[]), Ok(()), "the default, http://localhost");
        let eg = [(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://otel-collector.monitoring:4318",
        )];
        assert_eq!(check(http, &eg), Ok(()), "as Envoy Gateway sets it");
        assert_eq!(check(grpc, &eg), Ok(()));
        let https = [("OTEL_EXPORTER_OTLP_ENDPOINT", "HTTPS://collector:4318")];
        let refused = check(http, &https).unwrap_err();
        assert!(
            refused.starts_with("OTEL_EXPORTER_OTLP_ENDPOINT="),
            "{refused}"
        );
        let traces = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector:4318/v1/traces",
            ),
        ];
        let refused = check(http, &traces).unwrap_err();
        assert!(
            refused.starts_with("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="),
            "{refused}"
        );
        let bare = [("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")];
        assert!(check(grpc, &bare).is_err(), "https to the SDK");
        let insecure = [bare[0], ("OTEL_EXPORTER_OTLP_INSECURE", "TRUE")];
        assert_eq!(check(grpc, &insecure), Ok(()));
    }

    #[test]
    fn instance_ids_are_random_version_4_uuids() {
        let (a, b) = (random_uuid(), random_uuid());
        assert_ne!(a, b);
        let parts: Vec<_> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{a}");
        assert_eq!(&a[14..15], "4", "{a}");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    }
}
