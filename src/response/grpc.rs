//! Rejections for gRPC calls: a gRPC status in an HTTP 200 response, since a bare 429 reaches
//! gRPC clients as UNAVAILABLE (and gRPC-Web clients as a transport error). gRPC-Web calls get
//! it in their own content type. With the `grpc` feature the status carries the standard rich
//! error details (`google.rpc.ErrorInfo`, `google.rpc.RetryInfo`, `google.rpc.QuotaFailure`)
//! in `grpc-status-details-bin`.

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use crate::decision::Decision;

/// gRPC's code for `UNAVAILABLE`, for a store that failed with fail-closed.
pub(crate) const UNAVAILABLE: i32 = 14;

/// gRPC's code for `INTERNAL`, for a server that records no peer address to key a call by.
pub(crate) const INTERNAL: i32 = 13;

/// The default `ErrorInfo.domain` of a denial.
pub(crate) const DEFAULT_DOMAIN: &str = "redlimit";

/// How a gRPC caller frames its calls, from the request's `content-type` (any codec suffix,
/// `+proto`, `+json`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `application/grpc`: HTTP/2 with trailers.
    Grpc,
    /// `application/grpc-web`: trailers inside the body, for browsers.
    Web,
    /// `application/grpc-web-text`: gRPC-Web in base64 (or a binary call that accepts only
    /// text back).
    WebText,
}

impl Framing {
    /// The framing of a gRPC or gRPC-Web call, from its request's headers; `None` for any
    /// other request. Read only when the layer answers a request itself: an admitted one never
    /// needs it.
    pub(crate) fn of(headers: &HeaderMap) -> Option<Framing> {
        let content_type = essence_of(headers.get(CONTENT_TYPE)?.as_bytes());
        let framing = if family(content_type, b"application/grpc-web-text") {
            Framing::WebText
        } else if family(content_type, b"application/grpc-web") {
            // tonic-web (and grpc-web's text mode) answers in the encoding `Accept` asks for.
            let text = headers.get_all(ACCEPT).iter().any(|accept| {
                accept
                    .as_bytes()
                    .split(|&b| b == b',')
                    .any(|range| family(essence_of(range), b"application/grpc-web-text"))
            });
            if text { Framing::WebText } else { Framing::Web }
        } else if family(content_type, b"application/grpc") {
            Framing::Grpc
        } else {
            return None;
        };
        Some(framing)
    }

    /// The content type of the answer: the caller's family (tonic-web's and Envoy's spelling).
    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Framing::Grpc => "application/grpc",
            Framing::Web => "application/grpc-web+proto",
            Framing::WebText => "application/grpc-web-text+proto",
        })
    }
}

/// The media type of a `Content-Type` or of one `Accept` range, without parameters.
fn essence_of(value: &[u8]) -> &[u8] {
    let end = value.iter().position(|&b| b == b';').unwrap_or(value.len());
    value[..end].trim_ascii()
}

/// Whether `essence` is `base` or `base+codec`, in any case (without allocating: every
/// request's content type passes here).
fn family(essence: &[u8], base: &[u8]) -> bool {
    essence.len() >= base.len()
        && essence[..base.len()].eq_ignore_ascii_case(base)
        && (essence.len() == base.len() || essence[base.len()] == b'+')
}

/// The gRPC code closest to an HTTP status the layer would have answered with.
pub(crate) fn code_for(status: StatusCode) -> i32 {
    match status.as_u16() {
        400 => 3,  // INVALID_ARGUMENT
        401 => 16, // UNAUTHENTICATED
        403 => 7,  // PERMISSION_DENIED
        404 => 5,  // NOT_FOUND
        429 => 8,  // RESOURCE_EXHAUSTED
        503 => UNAVAILABLE,
        _ => 2, // UNKNOWN
    }
}

/// A trailers-only gRPC response in `framing`'s content type: HTTP 200, `grpc-status`,
/// `grpc-message`, and (with the `grpc` feature, for a rate-limit denial, with the
/// `ErrorInfo` domain) `grpc-status-details-bin`. gRPC-Web allows the same trailers-only form:
/// the status in the headers, no body.
pub(crate) fn status(
    framing: Framing,
    code: i32,
    message: &str,
    denial: Option<(&Decision, &str)>,
) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, framing.content_type());
    if !rich_status(headers, code, message, denial) {
        headers.insert("grpc-status", HeaderValue::from(code));
        // Our messages are printable ASCII without `%`: valid unencoded grpc-message text.
        if let Ok(value) = HeaderValue::from_str(message) {
            headers.insert("grpc-message", value);
        }
    }
    response
}

/// The message of a denial.
pub(crate) fn denial_message(decision: &Decision) -> String {
    match (decision.exceeds_capacity(), decision.retry_after()) {
        (true, _) => "request cost exceeds the rate limit".to_owned(),
        (false, Some(wait)) => format!("rate limit exceeded; retry in {:.3}s", wait.as_secs_f64()),
        (false, None) => "rate limit exceeded".to_owned(),
    }
}

/// AIP-193's details of a denial: `ErrorInfo` (the reason `RATE_LIMIT_EXCEEDED` in `domain`,
/// with the policy, the violated quota policies as `RateLimit-Policy` names them, and the
/// delay the message states), `RetryInfo` (unless retrying is futile) and a `QuotaFailure`
/// violation per denying limit.
#[cfg(feature = "grpc")]
fn rich_status(
    headers: &mut HeaderMap,
    code: i32,
    message: &str,
    denial: Option<(&Decision, &str)>,
) -> bool {
    use std::collections::HashMap;
    use tonic_types::{ErrorDetails, StatusExt};

    let Some((decision, domain)) = denial else {
        return false;
    };
    let mut details = ErrorDetails::new();
    let violated = super::quota_names::violated(decision)
        .map(|name| name.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut metadata = HashMap::from([
        ("policy".to_owned(), decision.policy().to_owned()),
        ("violatedPolicies".to_owned(), violated),
    ]);
    if let Some(wait) = decision.retry_after() {
        metadata.insert(
            "retryDelaySeconds".to_owned(),
            format!("{:.3}", wait.as_secs_f64()),
        );
        details.set_retry_info(Some(wait));
    }
    details.set_error_info("RATE_LIMIT_EXCEEDED", domain, metadata);
    for state in decision.limits().iter().filter(|s| !s.is_allowed()) {
        details.add_quota_failure_violation(
            format!("policy:{}", decision.policy()),
            format!("{} exceeded", state.limit()),
        );
    }
    let status = tonic::Status::with_error_details(tonic::Code::from(code), message, details);
    status.add_header(headers).is_ok()
}

#[cfg(not(feature = "grpc"))]
fn rich_status(_: &mut HeaderMap, _: i32, _: &str, _: Option<(&Decision, &str)>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing(headers: &[(&str, &str)]) -> Option<Framing> {
        let mut request = http::Request::post("/pkg.Svc/Call");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Framing::of(request.body(()).unwrap().headers())
    }

    #[test]
    fn detects_grpc_and_grpc_web_content_types() {
        for (ct, expected) in [
            ("application/grpc", Some(Framing::Grpc)),
            ("application/grpc+proto", Some(Framing::Grpc)),
            ("Application/GRPC+json; charset=utf-8", Some(Framing::Grpc)),
            ("application/grpc-web", Some(Framing::Web)),
            ("application/grpc-web+proto", Some(Framing::Web)),
            ("application/grpc-web-text", Some(Framing::WebText)),
            ("application/grpc-web-text+proto", Some(Framing::WebText)),
            ("application/grpcx", None),
            ("application/grpc-webby", None),
            ("application/json", None),
            ("text/plain; application/grpc", None),
            ("", None),
        ] {
            assert_eq!(framing(&[("content-type", ct)]), expected, "{ct}");
        }
        assert_eq!(framing(&[]), None);
    }

    #[test]
    fn a_binary_grpc_web_call_that_accepts_only_text_is_answered_in_text() {
        let web = ("content-type", "application/grpc-web+proto");
        let accept = |value| framing(&[web, ("accept", value)]);
        assert_eq!(accept("application/grpc-web-text"), Some(Framing::WebText));
        assert_eq!(
            accept("*/*, application/grpc-web-text+proto;q=0.9"),
            Some(Framing::WebText)
        );
        assert_eq!(accept("application/grpc-web"), Some(Framing::Web));
        assert_eq!(accept("*/*"), Some(Framing::Web));
    }

    #[test]
    fn answers_in_the_callers_content_type_family() {
        for (framing, ct) in [
            (Framing::Grpc, "application/grpc"),
            (Framing::Web, "application/grpc-web+proto"),
            (Framing::WebText, "application/grpc-web-text+proto"),
        ] {
            let res = status(framing, UNAVAILABLE, "rate limiter unavailable", None);
            assert_eq!(res.status(), StatusCode::OK);
            assert_eq!(res.headers()["content-type"], ct);
            assert_eq!(res.headers()["grpc-status"], "14");
            assert_eq!(res.headers()["grpc-message"], "rate limiter unavailable");
            assert!(res.body().is_empty(), "trailers-only: no body");
        }
    }
}
