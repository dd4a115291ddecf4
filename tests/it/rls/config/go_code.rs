//! What envoyproxy/ratelimit's code refuses and accepts beyond its fixtures (yaml.v2's scalars,
//! its key walk, its typed read).

use redlimit::rls::config::Unit;

use super::parse;

#[test]
fn go_code_refusals() {
    let refused = [
        // A float anywhere but in metadata ("error checking config").
        "domain: d\ndescriptors:\n  - {key: k, value: 1.5}\n",
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2.0}}\n",
        // Out of uint32, negative, a string for a number, a number for a bool.
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 4294967296}}\n",
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: -1}}\n",
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: '5'}}\n",
        "domain: d\ndescriptors:\n  - {key: k, shadow_mode: 1, rate_limit: {unit: second, requests_per_unit: 5}}\n",
        // No unit, an UNKNOWN unit, an empty rate_limit.
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {requests_per_unit: 5}}\n",
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: unknown, requests_per_unit: 5}}\n",
        "domain: d\ndescriptors:\n  - {key: k, rate_limit: {}}\n",
        // share_threshold without a wildcard.
        "domain: d\ndescriptors:\n  - {key: k, value: v, share_threshold: true, rate_limit: {unit: second, requests_per_unit: 5}}\n",
        // A list of scalars, descriptors as a mapping, the root as a list.
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5, replaces: [a]}\n",
        "domain: d\ndescriptors: {key: k}\n",
        "- domain: d\n",
        // An empty file, a null document.
        "",
        "~\n",
        // Our extensions are not Go keys where they mean nothing.
        "domain: d\nalgorithm: gcra\n",
        "domain: d\ndescriptors:\n  - {key: k, algorithm: gcra, rate_limit: {unit: second, requests_per_unit: 5}}\n",
    ];
    for text in refused {
        assert!(parse(text).is_err(), "loaded: {text}");
    }
}

#[test]
fn go_code_acceptances() {
    // YAML 1.1 scalars as yaml.v2 reads them; a known key in an odd place is ignored; a unit in
    // any case; week/month/year; only the first document.
    let c = parse(
        "---\ndomain: d\nunit: ignored\ndescriptors:\n  - key: k\n    value: yes\n    domain: ignored\n    shadow_mode: on\n    rate_limit: {unit: wEEk, requests_per_unit: 0x10}\n  - {key: m, rate_limit: {unit: MONTH, requests_per_unit: 1_000}}\n  - {key: y, rate_limit: {unit: year, requests_per_unit: 1, name: 12}}\n  - {key: n, value: 12, rate_limit: {unit: second, requests_per_unit: 1}}\n  - {key: u, rate_limit: {unlimited: true, requests_per_unit: 3, name: free}}\n  - key: z\n    rate_limit:\n...\n--- [not, read]\n",
    )
    .unwrap();
    let d = c.domain("d").unwrap();
    let k = d.find(&[("k", "yes")]).unwrap();
    assert!(k.shadow_mode());
    assert_eq!(
        (k.limits()[0].unit(), k.limits()[0].requests_per_unit()),
        (Unit::Week, 16)
    );
    assert_eq!(
        d.find(&[("m", "")]).unwrap().limits()[0].requests_per_unit(),
        1000
    );
    assert_eq!(d.find(&[("y", "")]).unwrap().limits()[0].name(), Some("12"));
    assert!(d.find(&[("n", "12")]).is_some());
    let u = d.find(&[("u", "")]).unwrap();
    assert!(u.is_unlimited());
    assert_eq!(
        u.names().collect::<Vec<_>>(),
        ["free"],
        "an unlimited limit can be replaced by name"
    );
    assert!(c.dump().contains(
        "d.u: unit=UNKNOWN requests_per_unit=3, shadow_mode: false, quota_mode: false\n"
    ));
    assert!(
        d.find(&[("z", "")]).is_none(),
        "an empty rate_limit is no limit"
    );
}
