//! Where an estimate settles: a decision of the local fallback in memory (charges only), one
//! failing open nowhere, one of the store in the store, its excess mirrored into the fallback.

use std::future::IntoFuture;

use http::request::Parts;

use super::testing::{TestStore, decider, keyed, policy, responds, with_key};
use super::{Decider, Start, Verdict};
use crate::decision::DecisionSource;
use crate::key::Key;
use crate::layer::OnStoreError;
use crate::layer::reconcile::After;

/// A layer of 1 000 tokens an hour, every request under the key `k`, admitting at 500 and settling to
/// the response's `x-used`.
fn reconciling(store: TestStore, mode: OnStoreError) -> std::sync::Arc<Decider> {
    decider(
        keyed(store, policy("tokens", 1_000))
            .key(|_: &Parts| Some(Key::new("k")))
            .on_store_error(mode)
            .cost(|_: &Parts| 500)
            .settle_with(|r: &http::response::Parts| {
                r.headers.get("x-used")?.to_str().ok()?.parse().ok()
            }),
    )
}

/// A response head reporting `used` tokens.
fn used(used: u64) -> http::response::Parts {
    http::Response::builder()
        .header("x-used", used)
        .body(())
        .unwrap()
        .into_parts()
        .0
}

/// The source and the after-response part of a request decided at once.
fn decided(d: &Decider) -> (DecisionSource, Option<Box<After>>) {
    match d.start(&with_key("k")) {
        Start::Decided(Verdict::Proceed(decision, _, after, _)) => (decision.source(), after),
        _ => panic!("expected to proceed at once"),
    }
}

/// Tokens left for `k` in the local fallback.
fn local_left(d: &Decider) -> u64 {
    let (store, scaled) = d.engine.local(0).unwrap();
    store.inspect_now(scaled, &Key::new("k")).limits()[0].remaining()
}

#[test]
fn the_local_fallbacks_admissions_settle_in_memory_charges_only() {
    let store = TestStore::default();
    store.fail(true);
    let d = reconciling(store, OnStoreError::local());
    let (source, after) = decided(&d);
    assert_eq!(source, DecisionSource::Local);
    assert!(after.unwrap().response(&used(900)).is_none());
    assert_eq!(local_left(&d), 100, "500 admitted, 400 charged");
    // Below the estimate: nothing given back in memory.
    let store = TestStore::default();
    store.fail(true);
    let d = reconciling(store, OnStoreError::local());
    let (_, after) = decided(&d);
    assert!(after.unwrap().response(&used(100)).is_none());
    assert_eq!(local_left(&d), 500);
}

#[test]
fn failing_open_settles_nothing() {
    let store = TestStore::default();
    store.fail(true);
    let d = reconciling(store, OnStoreError::Open);
    let (source, after) = decided(&d);
    assert_eq!(source, DecisionSource::FailOpen);
    assert!(after.is_none());
}

#[tokio::test]
async fn the_excess_charged_in_the_store_is_mirrored_into_the_fallback() {
    let store = TestStore::later();
    let d = reconciling(store.clone(), OnStoreError::local());
    let Start::Check(check, pending) = d.start(&with_key("k")) else {
        panic!("a store that answers later is asked");
    };
    let verdict = d.verdict(check.into_future().await, &pending, &with_key("k").headers);
    let Verdict::Proceed(decision, _, Some(after), _) = verdict else {
        panic!("admitted, with a settle to make");
    };
    assert_eq!(decision.source(), DecisionSource::Store);
    after.response(&used(900));
    let state = store
        .memory
        .inspect_now(&policy("tokens", 1_000), &Key::new("k"));
    assert_eq!(state.limits()[0].remaining(), 100, "charged in the store");
    // The store fails: the fallback knows the 900 spent (500 mirrored at admission, 400 at
    // the settle), so an estimate of 500 does not fit in what is left.
    store.fail(true);
    let refused = responds(d.start(&with_key("k")));
    assert_eq!(refused.status(), http::StatusCode::TOO_MANY_REQUESTS);
    let decision = refused.extensions().get::<crate::Decision>().unwrap();
    assert_eq!(decision.source(), DecisionSource::Local);
    assert_eq!(local_left(&d), 100);
}
