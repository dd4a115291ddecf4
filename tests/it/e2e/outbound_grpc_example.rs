//! Black-box test of `examples/outbound_grpc.rs`: two processes on one Redis, each with its
//! own workers calling its own gRPC service through `AcquireLayer` on a tonic `Channel`, add
//! up to the one policy, with one store call per permit; and its output is what its docs say.

use std::process::{Command, Stdio};
use std::time::Instant;

use super::outbound_example::figures;
use crate::support::{RedisServer, example_binary};

#[test]
fn two_grpc_clients_on_one_redis_add_up_to_the_policy() {
    let server = RedisServer::start();
    let binary = example_binary("outbound_grpc");
    let started = Instant::now();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&binary)
                .args([
                    "--redis",
                    &server.url(),
                    "--rate",
                    "40/1s",
                    "--workers",
                    "5",
                    "--secs",
                    "2",
                ])
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the example")
        })
        .collect();
    let outputs: Vec<_> = runs
        .into_iter()
        .map(|run| run.wait_with_output().expect("the example's output"))
        .collect();
    let wall = started.elapsed().as_secs_f64();
    let (mut total, mut calls) = (0, 0);
    for output in &outputs {
        assert!(output.status.success(), "{output:?}");
        let (t, c) = figures(&String::from_utf8_lossy(&output.stdout));
        (total, calls) = (total + t, calls + c);
    }
    // Burst 40, then 40/s: at least what one process saturates alone for its 2 s, at most
    // what the quota allows over the whole wall time.
    let most = 40.0 + 40.0 * wall;
    println!("{total} calls, {calls} store calls, in {wall:.2} s (at most {most:.0})");
    assert!(total >= 115, "{total} calls");
    assert!(total as f64 <= most, "{total} calls in {wall:.2} s");
    assert!(
        calls as f64 <= 1.05 * total as f64,
        "{calls} store calls for {total} calls"
    );
}
