//! One service: a descriptor's counters inspected, reset and overridden, shadow mode set, as
//! its `ShouldRateLimit` answers show them, on the memory store and on Redis.

use http::StatusCode;
use redlimit::rls::proto::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::json;

use super::{call, hit, router, service};
use crate::rls::service::stores;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_inspected_reset_and_overridden_as_envoy_sees_them() {
    let (_server, stores) = stores("rls-admin").await;
    for (kind, store) in stores {
        let service = service(store);
        let admin = router(&service);
        let path = "/rls/test/counters?ip=10.0.0.1";

        let (status, fresh) = call(&admin, "GET", path, None).await;
        assert_eq!(status, 200, "{kind}: {fresh}");
        assert_eq!(fresh["rule"], "test.ip", "{kind}");
        assert_eq!(fresh["mode"], "enforce", "{kind}");
        assert_eq!(
            fresh["descriptor"],
            json!([{"key": "ip", "value": "10.0.0.1"}])
        );
        let limit = &fresh["limits"][0];
        assert_eq!(
            (limit["limit"].as_u64(), limit["remaining"].as_u64()),
            (Some(2), Some(2)),
            "{kind}"
        );
        assert_eq!(limit["key"], "test%00ip%0010.0.0.1%00%230", "{kind}");
        assert_eq!(
            (limit["name"].as_str(), limit["unit"].as_str()),
            (Some("per_ip"), Some("DAY"))
        );

        // Inspecting consumes nothing; hits count.
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}"
        );
        let (_, after) = call(&admin, "GET", path, None).await;
        assert_eq!(after["limits"][0]["remaining"], 1, "{kind}: {after}");
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}"
        );
        // Denied twice: the second from the deny cache.
        for _ in 0..2 {
            assert_eq!(
                hit(&service, "10.0.0.1").await.overall_code(),
                Code::OverLimit,
                "{kind}"
            );
        }
        let (_, over) = call(&admin, "GET", path, None).await;
        assert_eq!(over["limits"][0]["remaining"], 0, "{kind}: {over}");
        assert!(
            over["limits"][0]["retry_after"].as_u64() > Some(0),
            "{kind}: {over}"
        );

        // A reset: the counter is gone, the cached denial with it.
        let (status, reset) = call(&admin, "DELETE", path, None).await;
        assert_eq!(status, 200, "{kind}: {reset}");
        assert_eq!(
            reset["keys"],
            json!(["test%00ip%0010.0.0.1%00%230"]),
            "{kind}"
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}: reset"
        );

        // An override: 10 a day for this address alone, its count kept (1 used).
        let over_path = "/rls/test/override?ip=10.0.0.1";
        let (status, set) = call(&admin, "PUT", over_path, Some(r#"{"limits": ["10/1d"]}"#)).await;
        assert_eq!(status, 200, "{kind}: {set}");
        assert_eq!(set["key"], "test%00ip%0010.0.0.1%00", "{kind}");
        assert_eq!(set["limits"], json!(["10/1d"]), "{kind}");
        let answer = hit(&service, "10.0.0.1").await;
        assert_eq!(answer.overall_code(), Code::Ok, "{kind}");
        let status = &answer.statuses[0];
        assert_eq!(
            status.current_limit.as_ref().unwrap().requests_per_unit,
            10,
            "{kind}"
        );
        assert_eq!(status.limit_remaining, 8, "{kind}: the count carried over");
        let other = hit(&service, "10.0.0.2").await;
        assert_eq!(
            other.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            2
        );
        let (_, read) = call(&admin, "GET", over_path, None).await;
        assert_eq!(read["limits"], json!(["10/1d"]), "{kind}");
        let (_, counters) = call(&admin, "GET", path, None).await;
        assert_eq!(counters["overridden"], true, "{kind}");
        assert_eq!(counters["limits"][0]["limit"], 10, "{kind}");
        let (status, _) = call(&admin, "DELETE", over_path, None).await;
        assert_eq!(status, 200, "{kind}");
        let (status, gone) = call(&admin, "GET", over_path, None).await;
        assert_eq!(
            (status, &gone["error"]),
            (StatusCode::NOT_FOUND, &json!("no_override"))
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );

        // Several limits: one rate each, in order.
        let two = "/rls/test/override?two=x";
        let (status, _) = call(&admin, "PUT", two, Some(r#"{"limits": ["5/1d", "6/1d"]}"#)).await;
        assert_eq!(status, 200, "{kind}");
        let (_, counters) = call(&admin, "GET", "/rls/test/counters?two=x", None).await;
        let limits: Vec<_> = counters["limits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["limit"].clone())
            .collect();
        assert_eq!(limits, [json!(5), json!(6)], "{kind}: {counters}");

        // Shadow mode: for the descriptor, then for the domain.
        let shadow = "/rls/test/shadow?ip=10.0.0.1";
        let (status, on) = call(&admin, "PUT", shadow, Some(r#"{"shadow": true}"#)).await;
        assert_eq!(
            (status, &on["shadow"], &on["set"]),
            (StatusCode::OK, &json!(true), &json!(true))
        );
        let answer = hit(&service, "10.0.0.1").await;
        assert_eq!(answer.overall_code(), Code::Ok, "{kind}: shadow");
        // Counted and answered OK, as a rule's `shadow_mode` descriptor is.
        assert_eq!(answer.statuses[0].code(), Code::Ok, "{kind}");
        assert_eq!(
            answer.statuses[0].limit_remaining, 0,
            "{kind}: still counted"
        );
        let (_, counters) = call(&admin, "GET", path, None).await;
        assert_eq!(counters["mode"], "shadow", "{kind}");
        let (status, back) = call(&admin, "DELETE", shadow, None).await;
        assert_eq!(
            (status, &back["shadow"], &back["set"]),
            (StatusCode::OK, &json!(false), &json!(false))
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
        let (status, domain) = call(
            &admin,
            "PUT",
            "/rls/test/shadow",
            Some(r#"{"shadow": true}"#),
        )
        .await;
        assert_eq!(
            (status, &domain["key"]),
            (StatusCode::OK, &json!("test")),
            "{kind}: {domain}"
        );
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::Ok,
            "{kind}: domain shadow"
        );
        let (_, read) = call(&admin, "GET", "/rls/test/shadow", None).await;
        assert_eq!(read["shadow"], true, "{kind}");
        call(
            &admin,
            "PUT",
            "/rls/test/shadow",
            Some(r#"{"shadow": false}"#),
        )
        .await;
        assert_eq!(
            hit(&service, "10.0.0.1").await.overall_code(),
            Code::OverLimit,
            "{kind}"
        );
    }
}
