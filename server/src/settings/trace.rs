//! Tracing's settings: envoyproxy/ratelimit's `TRACING_*` variables, with its defaults. Where
//! the spans go (`OTEL_EXPORTER_OTLP_ENDPOINT`, its headers, timeout, certificates) is read
//! from the standard `OTEL_*` variables by the exporter, as the Go service's OpenTelemetry SDK
//! reads them.

use clap::Args;

use super::parse::go_bool;

/// Whether a span is made per `ShouldRateLimit`, and how it is exported.
#[derive(Debug, Clone, Args)]
pub(crate) struct TracingSettings {
    /// Export an OpenTelemetry span per `ShouldRateLimit` over OTLP, to
    /// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), continuing the
    /// caller's trace (W3C `traceparent`, or B3).
    #[arg(long, env = "TRACING_ENABLED", default_value = "false", value_parser = go_bool)]
    pub(crate) tracing_enabled: bool,
    /// The spans' `service.name`.
    #[arg(long, env = "TRACING_SERVICE_NAME", default_value = "RateLimit")]
    pub(crate) tracing_service_name: String,
    /// The spans' `service.namespace`.
    #[arg(long, env = "TRACING_SERVICE_NAMESPACE", default_value = "")]
    pub(crate) tracing_service_namespace: String,
    /// The spans' `service.instance.id`; a random UUID when empty.
    #[arg(long, env = "TRACING_SERVICE_INSTANCE_ID", default_value = "")]
    pub(crate) tracing_service_instance_id: String,
    /// OTLP over `http` (protobuf; port 4318 by default) or `grpc` (port 4317).
    #[arg(long, env = "TRACING_EXPORTER_PROTOCOL", default_value = "http", value_parser = exporter_protocol)]
    pub(crate) tracing_exporter_protocol: ExporterProtocol,
    /// The share of traces started here that are sampled (≥ 1: all, ≤ 0: none); a call whose
    /// caller sent a trace context is sampled as the caller says.
    #[arg(long, env = "TRACING_SAMPLING_RATE", default_value = "1", value_parser = sampling_rate)]
    pub(crate) tracing_sampling_rate: f64,
}

/// How spans are sent to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExporterProtocol {
    /// OTLP/HTTP, protobuf bodies (`POST /v1/traces`).
    Http,
    /// OTLP/gRPC (`TraceService/Export`).
    Grpc,
}

/// The Go service's values: `http` (or empty) and `grpc`, as written.
fn exporter_protocol(text: &str) -> Result<ExporterProtocol, String> {
    match text {
        "http" | "" => Ok(ExporterProtocol::Http),
        "grpc" => Ok(ExporterProtocol::Grpc),
        _ => Err(format!("`{text}` is not an OTLP protocol (http or grpc)")),
    }
}

/// A number, as Go's `strconv.ParseFloat` reads it; out of [0, 1] it means all or none.
fn sampling_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if !rate.is_nan() => Ok(rate),
        _ => Err(format!(
            "`{text}` is not a sampling rate (a number from 0 to 1)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::Settings;
    use super::*;
    use clap::Parser;

    #[test]
    fn the_go_services_names_and_defaults() {
        let names = [
            "TRACING_ENABLED",
            "TRACING_SERVICE_NAME",
            "TRACING_SERVICE_NAMESPACE",
            "TRACING_SERVICE_INSTANCE_ID",
            "TRACING_EXPORTER_PROTOCOL",
            "TRACING_SAMPLING_RATE",
        ];
        if let Some(set) = names.iter().find(|v| std::env::var_os(v).is_some()) {
            eprintln!("{set} is set: the defaults cannot be seen");
            return;
        }
        let s = Settings::try_parse_from(["redlimit-server"]).unwrap();
        let t = &s.tracing;
        assert!(!t.tracing_enabled, "off unless asked");
        assert_eq!(t.tracing_service_name, "RateLimit");
        assert_eq!(t.tracing_service_namespace, "");
        assert_eq!(t.tracing_service_instance_id, "");
        assert_eq!(t.tracing_exporter_protocol, ExporterProtocol::Http);
        assert_eq!(t.tracing_sampling_rate, 1.0);
        let on = Settings::try_parse_from([
            "redlimit-server",
            "--tracing-enabled",
            "--tracing-exporter-protocol",
            "grpc",
            "--tracing-sampling-rate",
            "0.1",
        ])
        .unwrap();
        assert!(on.tracing.tracing_enabled);
        assert_eq!(on.tracing.tracing_exporter_protocol, ExporterProtocol::Grpc);
        assert_eq!(on.tracing.tracing_sampling_rate, 0.1);
    }

    #[test]
    fn values_are_read_as_the_go_service_reads_them() {
        assert_eq!(exporter_protocol(""), Ok(ExporterProtocol::Http));
        assert!(
            exporter_protocol("GRPC").is_err(),
            "case-sensitive, as there"
        );
        assert!(exporter_protocol("http/protobuf").is_err());
        // Envoy Gateway writes its percentage over 100 with one decimal.
        assert_eq!(sampling_rate("1.0"), Ok(1.0));
        assert_eq!(sampling_rate("0.5"), Ok(0.5));
        assert_eq!(sampling_rate("2"), Ok(2.0), "all, as ParseFloat reads it");
        assert!(sampling_rate("NaN").is_err());
        assert!(sampling_rate("half").is_err());
    }
}
