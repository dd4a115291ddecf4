//! Compile-time guarantees of the public API: the types users share between tasks are
//! `Send + Sync`, and the futures the layer returns are `Send`, so a limited service runs on a
//! multi-threaded runtime.

use redlimit::layer::{
    CircuitBreaker, GrpcStatus, Handle, HeaderStyle, MissingKey, OnStoreError, RateLimit,
    RateLimitBuilder, ResponseBody, ResponseFuture, Rule, Shadow,
};
use redlimit::store::{Check, CheckFuture, Clock, ManualClock, MemoryStore, Store, SystemClock};
use redlimit::*;

const fn send_sync<T: Send + Sync>() {}
const fn send<T: Send>() {}

const _: () = {
    send_sync::<RateLimitLayer>();
    send_sync::<RateLimit<axum::Router>>();
    send_sync::<RateLimitBuilder>();
    send_sync::<Handle>();
    send_sync::<Rule>();
    send_sync::<Shadow>();
    send_sync::<key::IpRanges>();
    send_sync::<Policy>();
    send_sync::<Limit>();
    send_sync::<Algorithm>();
    send_sync::<Decision>();
    send_sync::<LimitState>();
    send_sync::<Key>();
    send_sync::<ConfigError>();
    send_sync::<StoreError>();
    send_sync::<OnStoreError>();
    send_sync::<MissingKey>();
    send_sync::<CircuitBreaker>();
    send_sync::<HeaderStyle>();
    send_sync::<GrpcStatus>();
    send::<ResponseBody<axum::body::Body>>();
    send_sync::<ResponseBody<String>>();
    send_sync::<MemoryStore>();
    send_sync::<store::Refund>();
    send_sync::<ManualClock>();
    send_sync::<SystemClock>();
    send_sync::<Box<dyn Store>>();
    send_sync::<Box<dyn Clock>>();
    send_sync::<Box<dyn KeyExtractor>>();
    send::<Check>();
    send::<CheckFuture>();
    send::<ResponseFuture<axum::Router, axum::body::Body>>();
    send_sync::<key::PeerIp>();
    send_sync::<key::ClientIp>();
    send_sync::<key::Header>();
    send_sync::<key::Query>();
    send_sync::<key::Route>();
    send_sync::<key::Global>();
    send_sync::<key::Subject>();
};

#[cfg(feature = "redis")]
const _: () = {
    send_sync::<store::RedisStore>();
    send_sync::<store::RedisStoreBuilder>();
};

#[cfg(feature = "jwt")]
const _: () = send_sync::<key::Jwt>();

#[test]
fn public_types_are_send_and_sync() {
    // The assertions above are evaluated at compile time; this test only makes the file run.
}
