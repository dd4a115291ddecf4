//! Black-box test of `examples/grpc.rs`: its output, and a real tonic client's calls.

use crate::support;

use std::process::Command;

use support::{RedisServer, RunningExample, example_binary, unique_prefix};
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

fn start(args: &[&str]) -> (RunningExample, String) {
    let example = RunningExample::start("grpc", args);
    let addr = example.addr.clone();
    (example, addr)
}

async fn client(addr: &str) -> HealthClient<Channel> {
    HealthClient::new(
        Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    )
}

fn check(key: &str) -> tonic::Request<HealthCheckRequest> {
    let mut req = tonic::Request::new(HealthCheckRequest {
        service: String::new(),
    });
    req.metadata_mut().insert("x-api-key", key.parse().unwrap());
    req
}

#[tokio::test]
async fn limits_calls_per_metadata_key_against_redis() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("grpc-example");
    let (_example, addr) = start(&[
        "--redis",
        &redis.url(),
        "--prefix",
        &prefix,
        "--limit",
        "2/10s",
        "--key",
        "metadata:x-api-key",
    ]);
    let mut health = client(&addr).await;
    health.check(check("a")).await.unwrap();
    health.check(check("a")).await.unwrap();
    let status = health.check(check("a")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status
            .get_details_retry_info()
            .and_then(|r| r.retry_delay)
            .is_some()
    );
    health.check(check("b")).await.unwrap();
}

#[tokio::test]
async fn keys_on_the_method_and_the_peer() {
    let (_example, addr) = start(&["--limit", "1/60s", "--key", "method"]);
    let mut health = client(&addr).await;
    health.check(check("a")).await.unwrap();
    assert_eq!(
        health.check(check("b")).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
    let (_example, addr) = start(&["--limit", "1/60s"]);
    let mut health = client(&addr).await;
    health.check(check("a")).await.unwrap();
    assert_eq!(
        health.check(check("b")).await.unwrap_err().code(),
        Code::ResourceExhausted
    );
}

#[test]
fn bad_flags_exit_2() {
    let out = Command::new(example_binary("grpc"))
        .args(["--key", "cookie"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown key"));
}
