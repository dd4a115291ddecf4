//! `POST /json`: a `RateLimitRequest` in proto3 JSON, answered as envoyproxy/ratelimit answers
//! it (for clients that cannot speak gRPC, such as a Lua filter or curl).
//!
//! Read as Go's `protojson.Unmarshal` reads it: field names in lowerCamelCase or as in the
//! proto, enums by name or number, 64-bit integers as numbers or strings, unknown fields
//! refused. Written as `protojson.Marshal` writes: lowerCamelCase, default values left out,
//! enums by name, durations as `"1.500s"`.

use prost_types::Duration;
use redlimit::rls::proto::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor,
    rate_limit_descriptor::{Entry, RateLimitOverride},
};
use redlimit::rls::proto::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse,
    rate_limit_response::{Code, DescriptorStatus, RateLimit, rate_limit::Unit},
};
use redlimit::rls::proto::envoy::r#type::v3::RateLimitUnit;
use serde_json::{Map, Value, json};

/// Why a body is not a `RateLimitRequest`.
pub(crate) type JsonError = String;

/// Reads a proto3-JSON `RateLimitRequest`.
pub(crate) fn request(body: &[u8]) -> Result<RateLimitRequest, JsonError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let object = as_object(&value, "the request")?;
    let mut request = RateLimitRequest::default();
    for (name, value) in object {
        match name.as_str() {
            "domain" => request.domain = string(value, "domain")?,
            "descriptors" => {
                for (i, d) in array(value, "descriptors")?.iter().enumerate() {
                    request.descriptors.push(descriptor(d, i)?);
                }
            }
            "hitsAddend" | "hits_addend" => {
                request.hits_addend = u32::try_from(integer(value, "hitsAddend")?)
                    .map_err(|_| "hitsAddend: out of range for uint32".to_owned())?;
            }
            other => return Err(format!("unknown field `{other}` in the request")),
        }
    }
    Ok(request)
}

fn descriptor(value: &Value, index: usize) -> Result<RateLimitDescriptor, JsonError> {
    let at = format!("descriptors[{index}]");
    let mut descriptor = RateLimitDescriptor::default();
    for (name, value) in as_object(value, &at)? {
        match name.as_str() {
            "entries" => {
                for entry in array(value, &format!("{at}.entries"))? {
                    let mut e = Entry::default();
                    for (name, value) in as_object(entry, &format!("{at}.entries[]"))? {
                        match name.as_str() {
                            "key" => e.key = string(value, "key")?,
                            "value" => e.value = string(value, "value")?,
                            other => {
                                return Err(format!("unknown field `{other}` in {at}.entries"));
                            }
                        }
                    }
                    descriptor.entries.push(e);
                }
            }
            "limit" => descriptor.limit = Some(limit_override(value, &at)?),
            "hitsAddend" | "hits_addend" => {
                descriptor.hits_addend = match value {
                    Value::Null => None,
                    other => Some(integer(other, &format!("{at}.hitsAddend"))?),
                }
            }
            other => return Err(format!("unknown field `{other}` in {at}")),
        }
    }
    Ok(descriptor)
}

fn limit_override(value: &Value, at: &str) -> Result<RateLimitOverride, JsonError> {
    let mut limit = RateLimitOverride::default();
    for (name, value) in as_object(value, &format!("{at}.limit"))? {
        match name.as_str() {
            "requestsPerUnit" | "requests_per_unit" => {
                limit.requests_per_unit = u32::try_from(integer(value, "requestsPerUnit")?)
                    .map_err(|_| format!("{at}.limit.requestsPerUnit: out of range for uint32"))?;
            }
            "unit" => {
                limit.unit = match value {
                    Value::String(name) => RateLimitUnit::from_str_name(name)
                        .ok_or_else(|| format!("{at}.limit.unit: no unit `{name}`"))?
                        as i32,
                    other => i32::try_from(integer(other, "unit")?)
                        .map_err(|_| format!("{at}.limit.unit: out of range"))?,
                }
            }
            other => return Err(format!("unknown field `{other}` in {at}.limit")),
        }
    }
    Ok(limit)
}

fn as_object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, JsonError> {
    value
        .as_object()
        .ok_or_else(|| format!("{what}: an object was expected"))
}

fn array<'a>(value: &'a Value, what: &str) -> Result<&'a [Value], JsonError> {
    match value {
        Value::Null => Ok(&[]),
        Value::Array(items) => Ok(items),
        _ => Err(format!("{what}: an array was expected")),
    }
}

fn string(value: &Value, what: &str) -> Result<String, JsonError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        _ => Err(format!("{what}: a string was expected")),
    }
}

/// A non-negative integer, as a JSON number or a string of digits (proto3 JSON's 64-bit form).
fn integer(value: &Value, what: &str) -> Result<u64, JsonError> {
    let parsed = match value {
        Value::Null => Some(0),
        Value::Number(n) => n.as_u64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| format!("{what}: a non-negative integer was expected"))
}

/// Writes a `RateLimitResponse` as `protojson.Marshal` does.
pub(crate) fn response(response: &RateLimitResponse) -> Value {
    let mut out = Map::new();
    if response.overall_code != 0 {
        out.insert(
            "overallCode".into(),
            json!(code_name(response.overall_code)),
        );
    }
    if !response.statuses.is_empty() {
        let statuses = response.statuses.iter().map(status).collect::<Vec<_>>();
        out.insert("statuses".into(), Value::Array(statuses));
    }
    for (name, headers) in [
        ("responseHeadersToAdd", &response.response_headers_to_add),
        ("requestHeadersToAdd", &response.request_headers_to_add),
    ] {
        if !headers.is_empty() {
            let headers = headers
                .iter()
                .map(|h| json!({"key": h.key, "value": h.value}))
                .collect();
            out.insert(name.into(), Value::Array(headers));
        }
    }
    Value::Object(out)
}

fn status(status: &DescriptorStatus) -> Value {
    let mut out = Map::new();
    if status.code != 0 {
        out.insert("code".into(), json!(code_name(status.code)));
    }
    if let Some(limit) = &status.current_limit {
        out.insert("currentLimit".into(), current_limit(limit));
    }
    if status.limit_remaining != 0 {
        out.insert("limitRemaining".into(), json!(status.limit_remaining));
    }
    if let Some(duration) = &status.duration_until_reset {
        out.insert("durationUntilReset".into(), json!(duration_text(duration)));
    }
    Value::Object(out)
}

fn current_limit(limit: &RateLimit) -> Value {
    let mut out = Map::new();
    if !limit.name.is_empty() {
        out.insert("name".into(), json!(limit.name));
    }
    if limit.requests_per_unit != 0 {
        out.insert("requestsPerUnit".into(), json!(limit.requests_per_unit));
    }
    if limit.unit != 0 {
        let name = Unit::try_from(limit.unit)
            .map_or_else(|_| json!(limit.unit), |u| json!(u.as_str_name()));
        out.insert("unit".into(), name);
    }
    Value::Object(out)
}

fn code_name(code: i32) -> Value {
    Code::try_from(code).map_or_else(|_| json!(code), |c| json!(c.as_str_name()))
}

/// proto3 JSON's duration: seconds with 0, 3, 6 or 9 fractional digits and an `s`.
fn duration_text(duration: &Duration) -> String {
    let (seconds, nanos) = (duration.seconds, duration.nanos);
    let sign = if seconds < 0 || nanos < 0 { "-" } else { "" };
    let (seconds, nanos) = (seconds.unsigned_abs(), nanos.unsigned_abs());
    if nanos == 0 {
        format!("{sign}{seconds}s")
    } else if nanos % 1_000_000 == 0 {
        format!("{sign}{seconds}.{:03}s", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!("{sign}{seconds}.{:06}s", nanos / 1_000)
    } else {
        format!("{sign}{seconds}.{nanos:09}s")
    }
}

/// The HTTP status `/json` answers with: 429 over the limit, 500 for `UNKNOWN`, else 200.
pub(crate) fn status_code(response: &RateLimitResponse) -> http::StatusCode {
    match Code::try_from(response.overall_code) {
        Ok(Code::OverLimit) => http::StatusCode::TOO_MANY_REQUESTS,
        Ok(Code::Ok) => http::StatusCode::OK,
        _ => http::StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_in_either_naming_with_64_bit_strings() {
        let body = br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
            "limit":{"requests_per_unit":5,"unit":"MINUTE"},"hitsAddend":"0"}],"hits_addend":3}"#;
        let r = request(body).unwrap();
        assert_eq!(r.domain, "d");
        assert_eq!(r.hits_addend, 3);
        let d = &r.descriptors[0];
        assert_eq!(
            (d.entries[0].key.as_str(), d.entries[0].value.as_str()),
            ("k", "v")
        );
        assert_eq!(d.hits_addend, Some(0));
        let limit = d.limit.as_ref().unwrap();
        assert_eq!(
            (limit.requests_per_unit, limit.unit),
            (5, RateLimitUnit::Minute as i32)
        );
    }

    #[test]
    fn bad_requests_are_refused_with_the_place_named() {
        for (body, says) in [
            (&b"{"[..], "not JSON"),
            (br#"{"domain":"d","bogus":1}"#, "unknown field `bogus`"),
            (
                br#"{"descriptors":[{"entries":[{"key":1}]}]}"#,
                "key: a string",
            ),
            (br#"{"hitsAddend":-1}"#, "hitsAddend"),
            (br#"{"hitsAddend":4294967296}"#, "out of range"),
            (
                br#"{"descriptors":[{"limit":{"unit":"FORTNIGHT"}}]}"#,
                "no unit `FORTNIGHT`",
            ),
            (br#"[]"#, "an object was expected"),
        ] {
            let error = request(body).unwrap_err();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }

    #[test]
    fn a_response_as_protojson_writes_it() {
        let response = RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: Code::OverLimit as i32,
                    current_limit: Some(RateLimit {
                        name: String::new(),
                        requests_per_unit: 1,
                        unit: Unit::Second as i32,
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(Duration {
                        seconds: 1,
                        nanos: 500_000_000,
                    }),
                    ..Default::default()
                },
                DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            response_json(&response),
            r#"{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,"unit":"SECOND"},"durationUntilReset":"1.500s"},{"code":"OK"}]}"#
        );
        assert_eq!(status_code(&response), http::StatusCode::TOO_MANY_REQUESTS);
    }

    fn response_json(r: &RateLimitResponse) -> String {
        serde_json::to_string(&response(r)).unwrap()
    }
}
