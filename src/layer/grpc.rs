//! Rejections for gRPC calls: a gRPC status in an HTTP 200 response, since a bare 429 reaches
//! gRPC clients as UNAVAILABLE. With the `grpc` feature the status carries the standard rich
//! error details (`google.rpc.RetryInfo`, `google.rpc.QuotaFailure`) in
//! `grpc-status-details-bin`.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::request::Parts;
use http::{Response, StatusCode};

use crate::decision::Decision;

/// gRPC's code for `UNAVAILABLE`, for a store that failed with fail-closed.
pub(crate) const UNAVAILABLE: i32 = 14;

/// Whether the request is a gRPC call (`content-type: application/grpc[+proto|...]`).
pub(crate) fn is_grpc(parts: &Parts) -> bool {
    parts
        .headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
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

/// A trailers-only gRPC response: HTTP 200, `grpc-status`, `grpc-message`, and (with the
/// `grpc` feature, for a rate-limit denial) `grpc-status-details-bin`.
pub(crate) fn status(code: i32, message: &str, denial: Option<&Decision>) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
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

#[cfg(feature = "grpc")]
fn rich_status(
    headers: &mut HeaderMap,
    code: i32,
    message: &str,
    denial: Option<&Decision>,
) -> bool {
    use tonic_types::{ErrorDetails, StatusExt};

    let Some(decision) = denial else {
        return false;
    };
    let mut details = ErrorDetails::new();
    if let Some(wait) = decision.retry_after() {
        details.set_retry_info(Some(wait));
    }
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
fn rich_status(_: &mut HeaderMap, _: i32, _: &str, _: Option<&Decision>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_grpc_content_types() {
        for (ct, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc-web", true),
            ("application/json", false),
        ] {
            let (parts, _) = http::Request::post("/")
                .header(CONTENT_TYPE, ct)
                .body(())
                .unwrap()
                .into_parts();
            assert_eq!(is_grpc(&parts), grpc, "{ct}");
        }
    }

    #[test]
    fn plain_status_headers() {
        let res = status(UNAVAILABLE, "rate limiter unavailable", None);
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()["grpc-status"], "14");
        assert_eq!(res.headers()["grpc-message"], "rate limiter unavailable");
    }
}
