//! The failure modes as the layer answers them: 503 (or gRPC 14) failing closed, the request
//! through failing open, this instance's share in local mode.

use http::StatusCode;

use super::testing::{TestStore, decider, keyed, parts, policy, proceeds, responds, with_key};
use crate::decision::DecisionSource;
use crate::layer::OnStoreError;

fn down() -> TestStore {
    let store = TestStore::default();
    store.fail(true);
    store
}

#[test]
fn failing_closed_answers_503_never_429() {
    let d = decider(keyed(down(), policy("p", 1)).on_store_error(OnStoreError::Closed));
    for _ in 0..3 {
        let response = responds(d.start(&with_key("k")));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let decision = response.extensions().get::<crate::Decision>().unwrap();
        assert_eq!(decision.source(), DecisionSource::FailClosed);
    }
    let grpc = parts(
        "POST",
        "/pkg.Svc/Call",
        &[("x-api-key", "k"), ("content-type", "application/grpc")],
    );
    let response = responds(d.start(&grpc));
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "14");
}

#[test]
fn failing_open_lets_requests_through_and_says_so() {
    let d = decider(keyed(down(), policy("p", 1)).on_store_error(OnStoreError::Open));
    for _ in 0..3 {
        let decision = proceeds(d.start(&with_key("k")));
        assert_eq!(decision.source(), DecisionSource::FailOpen);
    }
}

#[test]
fn the_local_fallback_decides_in_memory_with_this_instances_share() {
    let local = OnStoreError::Local { instances: 2 };
    let d = decider(keyed(down(), policy("p", 4)).on_store_error(local));
    for _ in 0..2 {
        assert_eq!(
            proceeds(d.start(&with_key("k"))).source(),
            DecisionSource::Local
        );
    }
    assert_eq!(responds(d.start(&with_key("k"))).status(), 429);
}
