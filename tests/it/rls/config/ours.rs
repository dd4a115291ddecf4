//! Our extensions: `algorithm`, `unit_multiplier`, `rate_limits` (tests/fixtures/rls/ours).

use redlimit::Algorithm;
use redlimit::rls::config::RlsConfig;

use super::{fixture, parse};

#[test]
fn extensions_load() {
    let c = RlsConfig::parse([fixture("ours", "extensions.yaml")], false).unwrap();
    let d = c.domain("api").unwrap();
    let both = d.find(&[("api_key", "k1")]).unwrap();
    let limits = both.limits();
    assert_eq!(limits.len(), 2);
    assert_eq!(limits[0].algorithm(), Algorithm::Gcra);
    assert_eq!(
        limits[0].limit().unwrap().period(),
        std::time::Duration::from_secs(1)
    );
    assert_eq!(limits[1].algorithm(), Algorithm::FixedWindow);
    assert_eq!(limits[1].limit().unwrap().count(), 10_000);
    assert_eq!(both.names().collect::<Vec<_>>(), ["burst", "daily"]);
    let window = d.find(&[("path", "/upload")]).unwrap();
    assert_eq!(window.limits()[0].unit_multiplier(), 5);
    assert_eq!(window.limits()[0].algorithm(), Algorithm::SlidingWindow);
    assert_eq!(
        window.limits()[0].limit().unwrap().period(),
        std::time::Duration::from_secs(300)
    );
    let mixed = d.find(&[("tenant", "acme")]).unwrap();
    assert_eq!(
        mixed.limits().len(),
        3,
        "rate_limit first, then rate_limits"
    );
    assert_eq!(mixed.limits()[0].algorithm(), Algorithm::TokenBucket);
    assert_eq!(mixed.limits()[2].algorithm(), Algorithm::SlidingLog);
    assert_eq!(mixed.replaces(), ["burst"]);
    assert!(c.dump().contains("api.path_/upload: unit=MINUTE requests_per_unit=100, shadow_mode: false, quota_mode: false algorithm=sliding-window unit_multiplier=5\n"));
}

#[test]
fn extensions_are_checked() {
    let refused = [
        (
            "rate_limit: {unit: second, requests_per_unit: 5, algorithm: leaky}",
            "unknown algorithm 'leaky'",
        ),
        (
            "rate_limit: {unit: second, requests_per_unit: 5, algorithm: concurrency}",
            "unknown algorithm",
        ),
        (
            "rate_limit: {unit: second, requests_per_unit: 5, unit_multiplier: 0}",
            "unit_multiplier must be at least 1",
        ),
        (
            "rate_limit: {unit: year, requests_per_unit: 5, unit_multiplier: 2}",
            "redlimit cannot enforce",
        ),
        (
            "rate_limit: {unit: second, requests_per_unit: 4000000000, algorithm: gcra}",
            "redlimit cannot enforce",
        ),
        (
            "rate_limit: {unlimited: true, algorithm: gcra}",
            "has no algorithm",
        ),
        (
            "rate_limit: {unlimited: true}\n    rate_limits: [{unit: second, requests_per_unit: 1}]",
            "unlimited rule",
        ),
        (
            "rate_limits: [{unit: second, requests_per_unit: 1, unlimited: true}]",
            "unlimited rule",
        ),
        ("rate_limits: []", "at least one limit"),
        (
            "rate_limits: [{requests_per_unit: 1}]",
            "invalid rate limit unit ''",
        ),
        (
            "rate_limits: [{unit: second, requests_per_unit: 1, rate_limits: []}]",
            "unknown key 'rate_limits'",
        ),
        (
            "rate_limits: [{unit: second, requests_per_unit: 1, key: k}]",
            "unknown key 'key'",
        ),
        (
            "rate_limits: [{unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}]",
            "replaces should not contain",
        ),
    ];
    for (limit, message) in refused {
        let text = format!("domain: d\ndescriptors:\n  - key: k\n    {limit}\n");
        match parse(&text) {
            Ok(_) => panic!("loaded: {text}"),
            Err(e) => assert!(e.to_string().contains(message), "{text}: {e}"),
        }
    }
    let many: Vec<String> = (1..=17)
        .map(|i| format!("{{unit: second, requests_per_unit: {i}}}"))
        .collect();
    let text = format!(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limits: [{}]\n",
        many.join(", ")
    );
    assert!(
        parse(&text)
            .unwrap_err()
            .to_string()
            .contains("at most 16 limits")
    );
}
