//! Zipkin's B3 headers, read as the Go service's propagator (go.opentelemetry.io/contrib's
//! `propagators/b3`) reads them: the single `b3` header first, and when it is absent or
//! invalid the `x-b3-*` headers. Envoy's Zipkin tracer sends the multi-header form.
//!
//! - `b3: {TraceId}-{SpanId}[-{Sampled}[-{ParentSpanId}]]`, or `b3: {Sampled}` alone;
//! - `x-b3-traceid`, `x-b3-spanid`, `x-b3-sampled`, `x-b3-flags` (`1`: debug, so sampled),
//!   `x-b3-parentspanid` (checked, not used).
//!
//! A trace id of 16 hex digits is the low half of a 128-bit one. Ids are lowercase hex and
//! not all zero. Without a sampling decision ("deferred") the context is not sampled, as
//! there: a parent-based sampler then records nothing.

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

const SINGLE: &str = "b3";
const TRACE_ID: &str = "x-b3-traceid";
const SPAN_ID: &str = "x-b3-spanid";
const SAMPLED: &str = "x-b3-sampled";
const FLAGS: &str = "x-b3-flags";
const PARENT_SPAN_ID: &str = "x-b3-parentspanid";

/// The remote span context the B3 headers carry, if they carry a valid one.
pub(crate) fn extract(headers: &dyn Extractor) -> Option<SpanContext> {
    if let Some(context) = headers.get(SINGLE).and_then(single_header) {
        return Some(context);
    }
    let get = |name| headers.get(name).unwrap_or_default();
    multiple_headers(
        get(TRACE_ID),
        get(SPAN_ID),
        get(PARENT_SPAN_ID),
        get(SAMPLED),
        get(FLAGS),
    )
}

fn multiple_headers(
    trace_id: &str,
    span_id: &str,
    parent_span_id: &str,
    sampled: &str,
    flags: &str,
) -> Option<SpanContext> {
    let mut sampled = match sampled {
        "0" | "false" | "False" | "FALSE" | "" => false,
        "1" | "true" | "True" | "TRUE" => true,
        _ => return None,
    };
    // Debug implies sampled; any other value of the flags is ignored.
    sampled |= flags == "1";
    if trace_id.is_empty() || span_id.is_empty() {
        // Neither is no context; one without the other an invalid one.
        return None;
    }
    let trace_id = parse_trace_id(trace_id)?;
    let span_id = parse_span_id(span_id)?;
    if !parent_span_id.is_empty() {
        parse_span_id(parent_span_id)?;
    }
    Some(remote(trace_id, span_id, sampled))
}

fn single_header(header: &str) -> Option<SpanContext> {
    // `{Sampled}` alone, or a trace id alone, carries no span context.
    let mut parts = header.split('-');
    let trace_id = parse_trace_id(parts.next()?)?;
    let span_id = parse_span_id(parts.next()?)?;
    let sampled = match parts.next() {
        None => false,
        Some("1" | "d") => true,
        Some("0") => false,
        Some(_) => return None,
    };
    if let Some(parent) = parts.next() {
        parse_span_id(parent)?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(remote(trace_id, span_id, sampled))
}

fn remote(trace_id: TraceId, span_id: SpanId, sampled: bool) -> SpanContext {
    let flags = if sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(trace_id, span_id, flags, true, TraceState::default())
}

/// 32 hex digits, or 16 (the low 64 bits); not all zero.
fn parse_trace_id(text: &str) -> Option<TraceId> {
    let mut bytes = [0u8; 16];
    match text.len() {
        32 => hex(text, &mut bytes)?,
        16 => hex(text, &mut bytes[8..])?,
        _ => return None,
    }
    let id = TraceId::from_bytes(bytes);
    (id != TraceId::INVALID).then_some(id)
}

/// 16 hex digits, not all zero.
fn parse_span_id(text: &str) -> Option<SpanId> {
    let mut bytes = [0u8; 8];
    if text.len() != 16 {
        return None;
    }
    hex(text, &mut bytes)?;
    let id = SpanId::from_bytes(bytes);
    (id != SpanId::INVALID).then_some(id)
}

/// Lowercase hex into `out`, exactly filling it.
fn hex(text: &str, out: &mut [u8]) -> Option<()> {
    let digits = text.as_bytes();
    if digits.len() != out.len() * 2 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const TRACE: &str = "463ac35c9f6413ad48485a3953bb6124";
    const SPAN: &str = "a2fb4a1d1a96d312";

    fn extract_from(pairs: &[(&str, &str)]) -> Option<SpanContext> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        extract(&map)
    }

    fn ids(context: &SpanContext) -> (String, String, bool) {
        (
            context.trace_id().to_string(),
            context.span_id().to_string(),
            context.is_sampled(),
        )
    }

    #[test]
    fn the_single_header_in_its_forms() {
        let full = format!("{TRACE}-{SPAN}-1-{SPAN}");
        let context = extract_from(&[("b3", &full)]).expect("a context");
        assert!(context.is_remote());
        assert_eq!(ids(&context), (TRACE.into(), SPAN.into(), true));
        let debug = extract_from(&[("b3", &format!("{TRACE}-{SPAN}-d"))]).unwrap();
        assert!(debug.is_sampled());
        let off = extract_from(&[("b3", &format!("{TRACE}-{SPAN}-0"))]).unwrap();
        assert!(!off.is_sampled());
        let deferred = extract_from(&[("b3", &format!("{TRACE}-{SPAN}"))]).unwrap();
        assert!(!deferred.is_sampled(), "deferred is not sampled, as in Go");
        let short = extract_from(&[("b3", &format!("48485a3953bb6124-{SPAN}-1"))]).unwrap();
        assert_eq!(
            short.trace_id().to_string(),
            "000000000000000048485a3953bb6124"
        );
    }

    #[test]
    fn invalid_single_headers_carry_nothing() {
        for bad in [
            "1".to_owned(),
            TRACE.to_owned(),
            format!("{TRACE}-{SPAN}-"),
            format!("{TRACE}-{SPAN}-x"),
            format!("{TRACE}-{SPAN}-{SPAN}"),
            format!("{TRACE}-{SPAN}-1-{SPAN}-1"),
            format!("{}-{SPAN}-1", TRACE.to_uppercase()),
            format!("{}-{SPAN}-1", "0".repeat(32)),
            format!("{TRACE}-{}-1", "0".repeat(16)),
            format!("{TRACE}-{SPAN}-1-zz"),
        ] {
            assert_eq!(extract_from(&[("b3", &bad)]), None, "{bad}");
        }
    }

    #[test]
    fn the_multiple_headers() {
        let sampled = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-sampled", "1"),
        ];
        let context = extract_from(&sampled).expect("a context");
        assert_eq!(ids(&context), (TRACE.into(), SPAN.into(), true));
        let legacy = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-sampled", "true"),
        ];
        assert!(extract_from(&legacy).unwrap().is_sampled());
        let debug = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-flags", "1"),
        ];
        assert!(extract_from(&debug).unwrap().is_sampled());
        let deferred = [("x-b3-traceid", TRACE), ("x-b3-spanid", SPAN)];
        assert!(!extract_from(&deferred).unwrap().is_sampled());
        let with_parent = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-parentspanid", "0020000000000001"),
            ("x-b3-sampled", "0"),
        ];
        assert!(!extract_from(&with_parent).unwrap().is_sampled());
    }

    #[test]
    fn invalid_multiple_headers_carry_nothing() {
        assert_eq!(extract_from(&[]), None);
        assert_eq!(extract_from(&[("x-b3-sampled", "1")]), None);
        assert_eq!(extract_from(&[("x-b3-traceid", TRACE)]), None);
        let bad_sampled = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-sampled", "yes"),
        ];
        assert_eq!(extract_from(&bad_sampled), None);
        let bad_parent = [
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-parentspanid", "nope"),
        ];
        assert_eq!(extract_from(&bad_parent), None);
    }

    #[test]
    fn an_invalid_single_header_falls_back_to_the_multiple_ones() {
        let pairs = [
            ("b3", "garbage"),
            ("x-b3-traceid", TRACE),
            ("x-b3-spanid", SPAN),
            ("x-b3-sampled", "1"),
        ];
        assert_eq!(
            ids(&extract_from(&pairs).unwrap()),
            (TRACE.into(), SPAN.into(), true)
        );
    }
}
