//! Black-box test of `examples/outbound.rs`: three processes on one Redis, each with its own
//! workers calling its own upstream through `AcquireLayer`, add up to the one policy, with one
//! store call per permit; and its output is what its docs say.

use std::process::Command;
use std::time::Instant;

use crate::support::{RedisServer, example_binary};

/// The `total=` and `redis_calls=` of a run's last line, after checking the others.
pub(super) fn figures(stdout: &str) -> (u64, u64) {
    let lines: Vec<&str> = stdout.lines().collect();
    let (last, seconds) = lines.split_last().expect("some output");
    assert!(!seconds.is_empty(), "a line per second: {stdout}");
    for line in seconds {
        let (t, admitted) = line.split_once(' ').expect("t=... admitted=...");
        assert!(
            t.strip_prefix("t=")
                .is_some_and(|s| s.parse::<u64>().is_ok()),
            "{line}"
        );
        assert!(
            admitted
                .strip_prefix("admitted=")
                .is_some_and(|s| s.parse::<u64>().is_ok()),
            "{line}"
        );
    }
    let field = |name: &str| -> u64 {
        last.split(' ')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {last:?}"))
    };
    (field("total="), field("redis_calls="))
}

#[test]
fn three_processes_on_one_redis_add_up_to_the_policy() {
    let server = RedisServer::start();
    let binary = example_binary("outbound");
    let started = Instant::now();
    let runs: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&binary)
                .args([
                    "--redis",
                    &server.url(),
                    "--rate",
                    "50/1s",
                    "--workers",
                    "5",
                    "--secs",
                    "2",
                ])
                .stdout(std::process::Stdio::piped())
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
        assert!(output.status.success());
        let (t, c) = figures(&String::from_utf8_lossy(&output.stdout));
        (total, calls) = (total + t, calls + c);
    }
    // Burst 50, then 50/s: at least what one process saturates alone for its 2 s, at most
    // what the quota allows over the whole wall time.
    let most = 50.0 + 50.0 * wall;
    println!("{total} permits, {calls} store calls, in {wall:.2} s (at most {most:.0})");
    assert!(total >= 145, "{total} permits");
    assert!(total as f64 <= most, "{total} permits in {wall:.2} s");
    assert!(
        calls as f64 <= 1.05 * total as f64,
        "{calls} calls for {total} permits"
    );
}
