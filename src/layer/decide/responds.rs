//! The layer's own responses: a denial (429 or a gRPC status, with the rate-limit headers),
//! fail closed (503 or gRPC `UNAVAILABLE`), problem+json and gRPC-Web.

use http::{Response, StatusCode};

use super::testing::{decider, keyed, parts, policy, proceeds, responds, with_key};
use crate::decision::Decision;
use crate::layer::{GrpcStatus, MissingKey, OnStoreError, RejectBody};
use crate::store::MemoryStore;

fn grpc_call() -> http::request::Parts {
    parts(
        "POST",
        "/pkg.Svc/Call",
        &[("x-api-key", "k"), ("content-type", "application/grpc")],
    )
}

#[test]
fn a_denial_is_429_with_headers_and_the_decision() {
    let d = decider(keyed(MemoryStore::new(), policy("p", 1)));
    proceeds(d.start(&with_key("k")));
    let response = responds(d.start(&with_key("k")));
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.body().as_ref(), b"Too Many Requests\n");
    assert_eq!(response.headers()["x-ratelimit-limit"], "1");
    assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
    assert!(response.headers().contains_key("retry-after"));
    assert!(
        !response
            .extensions()
            .get::<Decision>()
            .unwrap()
            .is_allowed()
    );
}

#[test]
fn a_cost_no_limit_allows_is_said_so() {
    let d = decider(keyed(MemoryStore::new(), policy("p", 1)).cost(|_: &http::request::Parts| 2));
    let response = responds(d.start(&with_key("k")));
    assert_eq!(
        response.body().as_ref(),
        b"request cost exceeds the rate limit\n"
    );
    assert!(!response.headers().contains_key("retry-after"));
}

#[test]
fn grpc_calls_get_a_grpc_status_and_the_custom_rejection_is_for_the_others() {
    let custom = |_: &Decision| {
        let mut response = Response::new(bytes::Bytes::from_static(b"slow down"));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
    };
    let builder = keyed(MemoryStore::new(), policy("p", 1)).on_rejection(custom);
    let d = decider(builder.grpc_status(GrpcStatus::Unavailable));
    proceeds(d.start(&with_key("k")));
    let http = responds(d.start(&with_key("k")));
    assert_eq!(http.body().as_ref(), b"slow down");
    assert_eq!(
        http.headers()["x-ratelimit-remaining"],
        "0",
        "headers added"
    );
    let grpc = responds(d.start(&grpc_call()));
    assert_eq!(grpc.status(), StatusCode::OK);
    assert_eq!(grpc.headers()["grpc-status"], "14");
    assert!(grpc.extensions().get::<Decision>().is_some());
}

#[test]
fn unavailable_is_503_or_grpc_unavailable() {
    let d = decider(keyed(MemoryStore::new(), policy("p", 1)));
    let http = d.unavailable(None);
    assert_eq!(http.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(http.headers()["content-type"], "text/plain; charset=utf-8");
    let grpc = d.unavailable(Some(crate::response::grpc::Framing::Grpc));
    assert_eq!(grpc.status(), StatusCode::OK);
    assert_eq!(grpc.headers()["grpc-status"], "14");
}

fn problem(response: &Response<bytes::Bytes>) -> serde_json::Value {
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    serde_json::from_slice(response.body()).unwrap()
}

#[test]
fn problem_json_answers_every_http_error_but_not_grpc_or_a_custom_rejection() {
    let builder = keyed(MemoryStore::new(), policy("p", 1)).reject_body(RejectBody::ProblemJson);
    let d = decider(builder.clone());
    proceeds(d.start(&with_key("k")));
    let denial = responds(d.start(&with_key("k")));
    assert_eq!(denial.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = problem(&denial);
    assert_eq!(body["status"], 429);
    assert_eq!(body["violated-policies"], serde_json::json!(["p"]));
    assert_eq!(
        body["retry-after"].to_string(),
        denial.headers()["retry-after"].to_str().unwrap(),
        "the member says what the header says"
    );
    assert_eq!(denial.headers()["x-ratelimit-remaining"], "0");

    let grpc = responds(d.start(&grpc_call()));
    assert_eq!(grpc.headers()["grpc-status"], "8");
    assert!(grpc.body().is_empty());

    let missing = decider(
        builder
            .clone()
            .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
    );
    let response = responds(missing.start(&parts("GET", "/", &[])));
    assert_eq!(problem(&response)["title"], "Unauthorized");
    assert_eq!(problem(&response)["detail"], "missing rate-limit key");

    let closed = decider(builder.clone().on_store_error(OnStoreError::Closed));
    let response = closed.unavailable(None);
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(problem(&response)["type"], "about:blank");

    let custom = decider(
        builder.on_rejection(|_: &Decision| Response::new(bytes::Bytes::from_static(b"mine"))),
    );
    proceeds(custom.start(&with_key("k2")));
    assert_eq!(
        responds(custom.start(&with_key("k2"))).body().as_ref(),
        b"mine"
    );
}

#[test]
fn grpc_web_calls_are_answered_in_grpc_web() {
    let d = decider(keyed(MemoryStore::new(), policy("p", 1)));
    for (ct, answer) in [
        ("application/grpc-web", "application/grpc-web+proto"),
        ("application/grpc-web+proto", "application/grpc-web+proto"),
        (
            "application/grpc-web-text",
            "application/grpc-web-text+proto",
        ),
        (
            "application/grpc-web-text+proto",
            "application/grpc-web-text+proto",
        ),
    ] {
        let call = parts(
            "POST",
            "/pkg.Svc/Call",
            &[("x-api-key", ct), ("content-type", ct)],
        );
        proceeds(d.start(&call));
        let response = responds(d.start(&call));
        assert_eq!(response.status(), StatusCode::OK, "{ct}");
        assert_eq!(response.headers()["content-type"], answer);
        assert_eq!(response.headers()["grpc-status"], "8");
        assert!(response.headers().contains_key("grpc-message"));
        assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
        assert!(response.body().is_empty(), "trailers-only");
        assert_eq!(
            d.unavailable(crate::response::grpc::Framing::of(&call.headers))
                .headers()["content-type"],
            answer
        );
    }
}
