//! RFC 9457 problem details (`application/problem+json`) for the layer's own HTTP errors:
//! draft-ietf-httpapi-ratelimit-headers-11's `quota-exceeded` type for a 429, `about:blank`
//! for the others. The JSON is small and fixed, so it is written here, escaping every string,
//! rather than with a JSON library the default features do not have.

use std::fmt::Write;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};

use super::grpc::denial_message;
use super::headers::ceil_secs;
use super::quota_names;
use crate::decision::Decision;

/// The draft's problem type for requests past their quota (§5).
pub(crate) const QUOTA_EXCEEDED: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";
const QUOTA_EXCEEDED_TITLE: &str =
    "Request cannot be satisfied as assigned quota has been exceeded";

/// A 429 for `decision`: the `quota-exceeded` problem with the names of every violated quota
/// policy, and `retry-after` (whole seconds, as the `Retry-After` header) unless retrying is
/// futile.
pub(crate) fn quota_exceeded(decision: &Decision) -> Response<Bytes> {
    let status = StatusCode::TOO_MANY_REQUESTS;
    let mut json = open(
        QUOTA_EXCEEDED,
        QUOTA_EXCEEDED_TITLE,
        status,
        &denial_message(decision),
    );
    json.push_str(",\"violated-policies\":[");
    for (i, name) in quota_names::violated(decision).enumerate() {
        if i > 0 {
            json.push(',');
        }
        push_string(&mut json, &name.to_string());
    }
    json.push(']');
    if let Some(wait) = decision.retry_after() {
        let _ = write!(json, ",\"retry-after\":{}", ceil_secs(wait).max(1));
    }
    json.push('}');
    response(status, json)
}

/// Any other status: an `about:blank` problem, titled with the status's reason phrase.
pub(crate) fn about_blank(status: StatusCode, detail: &str) -> Response<Bytes> {
    let title = status.canonical_reason().unwrap_or("Error");
    let mut json = open("about:blank", title, status, detail);
    json.push('}');
    response(status, json)
}

/// The members every problem has, with the object left open for more.
fn open(kind: &str, title: &str, status: StatusCode, detail: &str) -> String {
    let mut json = String::with_capacity(256);
    json.push_str("{\"type\":");
    push_string(&mut json, kind);
    json.push_str(",\"title\":");
    push_string(&mut json, title);
    let _ = write!(json, ",\"status\":{}", status.as_u16());
    json.push_str(",\"detail\":");
    push_string(&mut json, detail);
    json
}

fn response(status: StatusCode, json: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(json));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// `text` as a JSON string (RFC 8259 §7): quotes, backslashes and control characters escaped;
/// everything else, including non-ASCII, as it is (the body is UTF-8).
fn push_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::{Limit, LimitState, Policy};

    fn json(response: &Response<Bytes>) -> serde_json::Value {
        assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
        serde_json::from_slice(response.body()).expect("valid JSON")
    }

    fn string(text: &str) -> String {
        let mut out = String::new();
        push_string(&mut out, text);
        out
    }

    #[test]
    fn hostile_strings_come_back_intact_from_a_json_parser() {
        let hostile = [
            "",
            "plain",
            "\"quoted\"",
            "back\\slash\\",
            "\\\"",
            "line\nbreak\r\ttab",
            "\u{0}\u{1}\u{8}\u{c}\u{1f}\u{7f}",
            "\"],\"violated-policies\":[\"evil\"],\"x\":\"",
            "</script><script>alert(1)</script>",
            "ünïcödé ✓ 🚦 \u{2028}\u{2029}",
            "\u{fffd}\u{feff}",
        ];
        for text in hostile {
            let written = string(text);
            let parsed: String = serde_json::from_str(&written)
                .unwrap_or_else(|e| panic!("{text:?} wrote {written}: {e}"));
            assert_eq!(parsed, text);
            // One JSON value: an attempt to close the string and add members stays a string.
            assert!(
                serde_json::from_str::<serde_json::Value>(&written)
                    .unwrap()
                    .is_string()
            );
        }
        assert_eq!(string("a\"b\\c\n\u{1}"), r#""a\"b\\c\n\u0001""#);
    }

    #[test]
    fn a_denial_names_every_violated_quota_and_the_retry() {
        let second = Limit::gcra(10, Duration::from_secs(1)).unwrap();
        let hour = Limit::fixed_window(1000, Duration::from_secs(3600)).unwrap();
        let day = Limit::fixed_window(5000, Duration::from_secs(86_400)).unwrap();
        let policy = Policy::new("api", [second, hour, day]).unwrap();
        let decision = Decision::new(
            &policy,
            SystemTime::now(),
            [
                LimitState::denied(
                    second,
                    0,
                    Duration::from_secs(1),
                    Duration::from_millis(100),
                ),
                LimitState::allowed(hour, 3, Duration::from_secs(1800)),
                LimitState::denied(
                    day,
                    0,
                    Duration::from_secs(7000),
                    Duration::from_millis(6500),
                ),
            ],
        )
        .unwrap();
        let response = quota_exceeded(&decision);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let body = json(&response);
        assert_eq!(
            body,
            serde_json::json!({
                "type": QUOTA_EXCEEDED,
                "title": QUOTA_EXCEEDED_TITLE,
                "status": 429,
                "detail": "rate limit exceeded; retry in 6.500s",
                "violated-policies": ["api-1", "api-3"],
                "retry-after": 7,
            })
        );
    }

    #[test]
    fn a_cost_no_limit_admits_has_no_retry() {
        let limit = Limit::gcra(2, Duration::from_secs(1)).unwrap();
        let policy = Policy::new("batch.upload", [limit]).unwrap();
        let decision = Decision::new(
            &policy,
            SystemTime::now(),
            [LimitState::over_capacity(limit, 2, Duration::ZERO)],
        )
        .unwrap();
        let body = json(&quota_exceeded(&decision));
        assert_eq!(
            body["violated-policies"],
            serde_json::json!(["batch.upload"])
        );
        assert_eq!(body["detail"], "request cost exceeds the rate limit");
        assert!(body.get("retry-after").is_none(), "{body}");
    }

    #[test]
    fn other_statuses_are_about_blank() {
        let response = about_blank(StatusCode::SERVICE_UNAVAILABLE, "rate limiter unavailable");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            json(&response),
            serde_json::json!({
                "type": "about:blank",
                "title": "Service Unavailable",
                "status": 503,
                "detail": "rate limiter unavailable",
            })
        );
        let odd = about_blank(StatusCode::from_u16(499).unwrap(), "missing rate-limit key");
        assert_eq!(json(&odd)["title"], "Error");
    }
}
