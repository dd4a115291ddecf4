//! The caller's trace, read from a call's headers (gRPC metadata are HTTP/2 headers) as the Go
//! service's composite propagator reads it: W3C Trace Context (`traceparent`, `tracestate`),
//! then B3, which wins when both are valid (its propagators run in that order, each replacing
//! the context the one before found).

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;

use super::b3;

/// The context a call's span starts in: the caller's span, remote, when the headers carry a
/// valid one; else an empty context (the span is then a trace's root).
pub(crate) fn parent(headers: &HeaderMap) -> Context {
    let headers = Headers(headers);
    let context = TraceContextPropagator::new().extract_with_context(&Context::new(), &headers);
    match b3::extract(&headers) {
        Some(span) => context.with_remote_span_context(span),
        None => context,
    }
}

/// A call's headers, read as text.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    http::HeaderName::from_static(k),
                    http::HeaderValue::from_static(v),
                )
            })
            .collect()
    }

    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn traceparent_is_continued() {
        let context = parent(&headers(&[("traceparent", TRACEPARENT)]));
        let span = context.span();
        let span = span.span_context();
        assert!(span.is_valid() && span.is_remote() && span.is_sampled());
        assert_eq!(
            span.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(span.span_id().to_string(), "b7ad6b7169203331");
    }

    #[test]
    fn b3_is_continued_and_wins_over_traceparent() {
        let both = headers(&[
            ("traceparent", TRACEPARENT),
            ("b3", "463ac35c9f6413ad48485a3953bb6124-a2fb4a1d1a96d312-0"),
        ]);
        let context = parent(&both);
        let span = context.span();
        let span = span.span_context();
        assert_eq!(
            span.trace_id().to_string(),
            "463ac35c9f6413ad48485a3953bb6124"
        );
        assert!(!span.is_sampled());
    }

    #[test]
    fn no_valid_context_is_a_root() {
        for pairs in [
            &[][..],
            &[(
                "traceparent",
                "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            )][..],
            &[("traceparent", "garbage"), ("b3", "1")][..],
        ] {
            let context = parent(&headers(pairs));
            assert!(!context.has_active_span(), "{pairs:?}");
        }
    }
}
