//! A store written outside the crate, through the public `Store` contract only: a fixed-window
//! counter in a `Mutex<HashMap>`. It proves that an outside crate can build every kind of
//! decision, and that the layer treats its answers (ready or pending) like the built-in ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::{Router, routing::get};
use http::{Request, StatusCode};
use redlimit::store::{Check, Store};
use redlimit::{Decision, Key, Limit, LimitState, Policy, RateLimitLayer, StoreError};
use tower::ServiceExt;

/// Counts units per key and limit, never resetting: every limit is "N in total".
#[derive(Default)]
struct Counter {
    used: Mutex<HashMap<(String, usize), u64>>,
    /// Answer with a future instead of at once, as a networked store would.
    pending: bool,
}

impl Counter {
    fn decide(&self, policy: &Policy, key: &Key, cost: u64) -> Result<Decision, StoreError> {
        let mut used = self.used.lock().unwrap();
        let slot = |i: usize| (key.as_str().to_owned(), i);
        let states: Vec<LimitState> = policy
            .limits()
            .iter()
            .enumerate()
            .map(|(i, limit)| {
                let left = limit.count() - used.get(&slot(i)).copied().unwrap_or(0);
                if cost > limit.count() {
                    LimitState::over_capacity(*limit, left, Duration::ZERO)
                } else if cost <= left {
                    LimitState::allowed(*limit, left - cost, limit.period())
                } else {
                    LimitState::denied(*limit, left, limit.period(), limit.period())
                }
            })
            .collect();
        // All or none: commit only if every limit allows.
        if states.iter().all(LimitState::is_allowed) {
            for i in 0..states.len() {
                *used.entry(slot(i)).or_insert(0) += cost;
            }
        }
        Decision::new(policy, SystemTime::now(), states)
    }
}

impl Store for Counter {
    fn check(&self, policy: &Policy, key: &Key, cost: u64) -> Check {
        let outcome = self.decide(policy, key, cost);
        if self.pending {
            Check::pending(async move { outcome })
        } else {
            Check::ready(outcome)
        }
    }
}

fn policy() -> Policy {
    Policy::new(
        "custom",
        [
            Limit::fixed_window(3, Duration::from_secs(60)).unwrap(),
            Limit::fixed_window(5, Duration::from_secs(3600)).unwrap(),
        ],
    )
    .unwrap()
}

async fn status(app: &Router, key: &str) -> (StatusCode, Option<String>) {
    let request = Request::get("/")
        .header("x-api-key", key)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let remaining = response
        .headers()
        .get("x-ratelimit-remaining")
        .map(|v| v.to_str().unwrap().to_owned());
    (response.status(), remaining)
}

#[tokio::test]
async fn an_outside_store_drives_the_layer_ready_or_pending() {
    for pending in [false, true] {
        let store = Arc::new(Counter {
            pending,
            ..Counter::default()
        });
        let layer = RateLimitLayer::builder(store, policy())
            .key(redlimit::key::Header::new("x-api-key").unwrap())
            .build()
            .expect("valid layer");
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        for left in ["2", "1", "0"] {
            assert_eq!(status(&app, "a").await, (StatusCode::OK, Some(left.into())));
        }
        let (denied, remaining) = status(&app, "a").await;
        assert_eq!(denied, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(remaining.as_deref(), Some("0"));
        // Another key has its own count.
        assert_eq!(status(&app, "b").await.0, StatusCode::OK);
    }
}

#[tokio::test]
async fn decisions_are_checked_against_the_policy() {
    let policy = policy();
    let limit = policy.limits()[0];
    let other = Limit::gcra(3, Duration::from_secs(1)).unwrap();
    let now = SystemTime::now();
    let ok = |l: Limit| LimitState::allowed(l, 1, Duration::ZERO);
    // One state per limit, for the policy's own limits, in order.
    assert!(Decision::new(&policy, now, [ok(limit), ok(policy.limits()[1])]).is_ok());
    for states in [
        vec![ok(limit)],
        vec![ok(limit), ok(other)],
        vec![ok(policy.limits()[1]), ok(limit)],
        vec![ok(limit), ok(policy.limits()[1]), ok(limit)],
        vec![
            LimitState::allowed(limit, 4, Duration::ZERO),
            ok(policy.limits()[1]),
        ],
    ] {
        assert!(matches!(
            Decision::new(&policy, now, states),
            Err(StoreError::UnexpectedReply(_))
        ));
    }
    // A denial names the limit with the longest wait, and says when to retry.
    let d = Decision::new(
        &policy,
        now,
        [
            LimitState::denied(limit, 0, Duration::from_secs(9), Duration::from_secs(2)),
            LimitState::denied(
                policy.limits()[1],
                0,
                Duration::from_secs(9),
                Duration::from_secs(7),
            ),
        ],
    )
    .unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.denied_by(), Some(1));
    assert_eq!(d.retry_after(), Some(Duration::from_secs(7)));
    // An impossible cost: no retry.
    let d = Decision::new(
        &policy,
        now,
        [
            LimitState::over_capacity(limit, 3, Duration::ZERO),
            ok(policy.limits()[1]),
        ],
    )
    .unwrap();
    assert!(d.exceeds_capacity());
    assert_eq!(d.retry_after(), None);
}
