//! Black-box test of `examples/llm_gateway.rs` on Redis: its narrated requests settle as its
//! docs say (the month's budget moves by the tokens each stream reported, by the estimate for
//! the client that hung up), and its load runs to the end with requests admitted and refused.

use std::process::Command;

use crate::support::{RedisServer, example_binary};

/// The numbers of `line` (digits runs), in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn the_gateway_settles_each_stream_to_its_usage_and_a_hang_up_to_its_estimate() {
    let server = RedisServer::start();
    let output = Command::new(example_binary("llm_gateway"))
        .env("REDIS_URL", server.url())
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    let case = |name: &str| {
        let at = lines
            .iter()
            .position(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {stdout}"));
        (lines[at], lines[at + 1], numbers(lines[at + 2]))
    };
    for name in ["a short answer", "a long prompt"] {
        let (_, reported, budget) = case(name);
        let used = numbers(reported)[0];
        assert_eq!(
            budget[2] - budget[3],
            used,
            "{name}: the month moved by the usage"
        );
    }
    let (head, hung_up, budget) = case("a client that hangs up");
    assert!(
        hung_up.contains("hung up before the usage came"),
        "{stdout}"
    );
    let estimate = numbers(head)[0];
    assert_eq!(budget[2] - budget[3], estimate, "the estimate stands");
    let last = lines.last().unwrap();
    assert!(last.starts_with("t=5s admitted="), "{stdout}");
    let figures = numbers(last);
    assert!(
        figures[1] > 0 && figures[2] > 0,
        "admitted and refused: {last}"
    );
}
