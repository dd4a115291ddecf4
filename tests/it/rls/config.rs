//! envoyproxy/ratelimit's YAML (`redlimit::rls::config`): each config fixture of the Go
//! repository (our copies in tests/fixtures/rls/go, see its README) loads, or is refused, as
//! the Go service does; our extensions (tests/fixtures/rls/ours); the directory loader.

use std::path::Path;

use redlimit::rls::config::{RlsConfig, RlsConfigError, Unit};

mod go_code;
mod load_dir;
mod ours;
mod props;

pub(super) fn fixture(dir: &str, name: &str) -> (String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/rls")
        .join(dir)
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (name.to_owned(), text)
}

pub(super) fn parse(text: &str) -> Result<RlsConfig, RlsConfigError> {
    RlsConfig::parse([("t.yaml", text)], false)
}

fn go(names: &[&str], merge: bool) -> Result<RlsConfig, RlsConfigError> {
    RlsConfig::parse(names.iter().map(|n| fixture("go", n)), merge)
}

fn go_ok(name: &str) -> RlsConfig {
    go(&[name], false).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn go_err(names: &[&str], merge: bool) -> RlsConfigError {
    match go(names, merge) {
        Ok(_) => panic!("{names:?} loaded; the Go service refuses it"),
        Err(e) => e,
    }
}

/// (requests_per_unit, unit, stats key) of the rule matching `entries` in `domain`.
fn lookup(
    config: &RlsConfig,
    domain: &str,
    entries: &[(&str, &str)],
) -> Option<(u32, Unit, String)> {
    let rule = config.domain(domain)?.find(entries)?;
    let limit = rule.limits().first()?;
    Some((
        limit.requests_per_unit(),
        limit.unit(),
        rule.stats_key(domain, entries),
    ))
}

fn rpu(config: &RlsConfig, entries: &[(&str, &str)]) -> Option<u32> {
    lookup(config, "test-domain", entries).map(|(n, ..)| n)
}

fn stats(config: &RlsConfig, entries: &[(&str, &str)]) -> String {
    lookup(config, "test-domain", entries)
        .map(|(.., key)| key)
        .unwrap_or_else(|| panic!("{entries:?} matches no rule"))
}

// --- test/config/config_test.go: the files that load ---

#[test]
fn go_basic_config() {
    let c = go_ok("basic_config.yaml");
    assert!(!c.is_empty());
    assert!(c.domain("foo_domain").is_none());
    assert_eq!(rpu(&c, &[]), None);
    assert_eq!(rpu(&c, &[("key1", "something")]), None);
    assert_eq!(rpu(&c, &[("key1", "value1")]), None);
    assert_eq!(rpu(&c, &[("key2", "value2"), ("subkey", "subvalue")]), None);
    assert_eq!(
        rpu(&c, &[("key5", "value5"), ("subkey5", "subvalue")]),
        None
    );
    assert_eq!(
        lookup(
            &c,
            "test-domain",
            &[("key1", "value1"), ("subkey1", "something")]
        ),
        Some((5, Unit::Second, "test-domain.key1_value1.subkey1".into()))
    );
    assert_eq!(
        lookup(
            &c,
            "test-domain",
            &[("key1", "value1"), ("subkey1", "subvalue1")]
        ),
        Some((
            10,
            Unit::Second,
            "test-domain.key1_value1.subkey1_subvalue1".into()
        ))
    );
    assert_eq!(
        lookup(&c, "test-domain", &[("key2", "something")]),
        Some((20, Unit::Minute, "test-domain.key2".into()))
    );
    assert_eq!(
        lookup(&c, "test-domain", &[("key2", "value2")]),
        Some((30, Unit::Minute, "test-domain.key2_value2".into()))
    );
    assert_eq!(rpu(&c, &[("key2", "value3")]), None);
    assert_eq!(
        lookup(&c, "test-domain", &[("key3", "foo")]),
        Some((1, Unit::Hour, "test-domain.key3".into()))
    );
    let key4 = c
        .domain("test-domain")
        .unwrap()
        .find(&[("key4", "foo")])
        .unwrap();
    assert_eq!(key4.limits()[0].name(), Some("key4_rate_limit"));
    assert_eq!(key4.limits()[0].unit(), Unit::Day);
    let key6 = c
        .domain("test-domain")
        .unwrap()
        .find(&[("key6", "foo")])
        .unwrap();
    assert!(key6.is_unlimited() && key6.limits().is_empty());
    assert_eq!(
        key6.stats_key("test-domain", &[("key6", "foo")]),
        "test-domain.key6"
    );
    // detailed_metric: the request's value in the stats key.
    assert_eq!(
        lookup(&c, "test-domain", &[("key7", "unspecified_value")]),
        Some((
            70,
            Unit::Minute,
            "test-domain.key7_unspecified_value".into()
        ))
    );
    assert_eq!(
        stats(&c, &[("key7", "another_value")]),
        "test-domain.key7_another_value"
    );
    // /rlconfig: one line per rule, in Go's format.
    let dump = c.dump();
    assert_eq!(dump.lines().count(), 10, "{dump}");
    for line in [
        "test-domain.key1_value1.subkey1: unit=SECOND requests_per_unit=5, shadow_mode: false, quota_mode: false",
        "test-domain.key5_value5.subkey5_subvalue5: unit=DAY requests_per_unit=25, shadow_mode: false, quota_mode: false",
        "test-domain.key6: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false",
    ] {
        assert!(dump.lines().any(|l| l == line), "{line} not in\n{dump}");
    }
}

#[test]
fn go_domain_merge() {
    let c = go(&["merge_domain_key1.yaml", "merge_domain_key2.yaml"], true).unwrap();
    assert_eq!(rpu(&c, &[("key1", "value1")]), Some(10));
    assert_eq!(rpu(&c, &[("key2", "value2")]), Some(20));
    // Without MERGE_DOMAIN_CONFIG the second file is a duplicate domain.
    let e = go_err(&["merge_domain_key1.yaml", "merge_domain_key2.yaml"], false);
    assert_eq!(
        e.to_string(),
        "merge_domain_key2.yaml: duplicate domain 'test-domain' in config file"
    );
}

#[test]
fn go_shadow_mode_config() {
    let c = go_ok("shadowmode_config.yaml");
    let d = c.domain("test-domain").unwrap();
    let shadow = |e: &[(&str, &str)]| d.find(e).unwrap().shadow_mode();
    assert!(!shadow(&[("key1", "value1"), ("subkey1", "something")]));
    assert!(shadow(&[("key1", "value1"), ("subkey1", "subvalue1")]));
    assert!(shadow(&[("key2", "something")]));
    assert!(!shadow(&[("key2", "value2")]));
}

#[test]
fn go_wildcard_config() {
    let c = go_ok("wildcard.yaml");
    assert_eq!(stats(&c, &[("noVal", "foo1")]), "test-domain.noVal");
    assert_eq!(stats(&c, &[("noVal", "foo2")]), "test-domain.noVal");
    assert_eq!(stats(&c, &[("wild", "foo1")]), "test-domain.wild_foo*");
    assert_eq!(stats(&c, &[("wild", "foo2")]), "test-domain.wild_foo*");
    assert_eq!(
        stats(&c, &[("nestedWild", "val1"), ("wild", "goo2")]),
        "test-domain.nestedWild_val1.wild_goo*"
    );
    assert_eq!(rpu(&c, &[("wild", "bar")]), None);
    assert_eq!(rpu(&c, &[("noWild", "foo1")]), None);
    assert_eq!(
        stats(&c, &[("midWild", "barab")]),
        "test-domain.midWild_bar*b"
    );
    assert_eq!(
        stats(&c, &[("midWild", "bar123b")]),
        "test-domain.midWild_bar*b"
    );
    assert_eq!(
        rpu(&c, &[("midWild", "barb")]),
        Some(20),
        "* matches the empty string"
    );
    assert_eq!(rpu(&c, &[("midWild", "bara")]), None);
    assert_eq!(rpu(&c, &[("midWild", "xbarb")]), None);
    assert_eq!(
        stats(&c, &[("multiWild", "foo123bar456baz")]),
        "test-domain.multiWild_foo*bar*baz"
    );
    assert_eq!(rpu(&c, &[("multiWild", "foobarbaz")]), Some(10));
    assert_eq!(rpu(&c, &[("multiWild", "foo123baz")]), None);
    assert_eq!(rpu(&c, &[("multiWild", "bar456baz")]), None);
}

#[test]
fn go_share_threshold() {
    let c = go_ok("share_threshold.yaml");
    for v in ["files/a.pdf", "files/b.csv", "files/c/d.txt"] {
        assert_eq!(stats(&c, &[("files", v)]), "test-domain.files_files/*");
    }
    assert_eq!(
        stats(&c, &[("route", "api/v1"), ("method", "GET")]),
        "test-domain.route_api/*.method"
    );
    assert_eq!(
        stats(&c, &[("service", "svc/user"), ("endpoint", "get")]),
        "test-domain.service_svc/*.endpoint_get"
    );
    assert_eq!(
        stats(&c, &[("nested", "parent"), ("files", "nested/file1.txt")]),
        "test-domain.nested_parent.files_nested/*"
    );
    assert_eq!(
        stats(
            &c,
            &[("files", "top/file1.txt"), ("files", "nested/file1.txt")]
        ),
        "test-domain.files_top/*.files_nested/*"
    );
    assert_eq!(
        stats(
            &c,
            &[("path", "path/foo"), ("file", "file/doc1"), ("type", "pdf")]
        ),
        "test-domain.path_path/*.file_file/*.type"
    );
    assert_eq!(
        stats(
            &c,
            &[
                ("user", "user/alice"),
                ("resource", "res/file1"),
                ("action", "read")
            ]
        ),
        "test-domain.user_user/*.resource_res/*.action"
    );
    assert_eq!(stats(&c, &[("file", "test1")]), "test-domain.file_test1");
    assert_eq!(rpu(&c, &[("file", "test1")]), Some(50));
    for v in ["test2", "test123", "testABC"] {
        assert_eq!(stats(&c, &[("file", v)]), "test-domain.file_test*");
    }
    assert_eq!(
        stats(&c, &[("midpath", "/api/v1")]),
        "test-domain.midpath_/api*v1"
    );
    assert_eq!(rpu(&c, &[("midpath", "/api/v2")]), None);
    assert_eq!(
        stats(&c, &[("multiroute", "svcXepYrpc")]),
        "test-domain.multiroute_svc*ep*rpc"
    );
    assert_eq!(rpu(&c, &[("multiroute", "svcABCrpc")]), None);
    assert_eq!(
        stats(&c, &[("midroute", "/api-beta-v2")]),
        "test-domain.midroute_/api*v2"
    );
    assert_eq!(
        stats(&c, &[("tenant", "t99prod"), ("resource", "resBBBv2")]),
        "test-domain.tenant_t*prod.resource_res*v2"
    );
}

#[test]
fn go_metadata() {
    let c = go_ok("metadata.yaml");
    let d = c.domain("test-domain").unwrap();
    let sub = d.find(&[("key1", "value1"), ("subkey1", "x")]).unwrap();
    assert_eq!(
        sub.metadata().unwrap(),
        &serde_json::json!({"name": "service_1"})
    );
    assert!(
        d.find(&[("key1", "value1"), ("subkey1", "subvalue1")])
            .unwrap()
            .metadata()
            .is_none()
    );
    let key2 = d.find(&[("key2", "x")]).unwrap();
    assert_eq!(
        key2.metadata().unwrap(),
        &serde_json::json!({"service_with_quota": {"name": "service_2"}})
    );
}

#[test]
fn go_duplicate_domain_file_alone_loads() {
    // No descriptors: a domain with no rules.
    let c = go_ok("duplicate_domain.yaml");
    assert_eq!(c.domain("test-domain").unwrap().rules().count(), 0);
}

#[test]
fn go_value_to_metric_and_detailed_metric() {
    // The in-code configs of TestValueToMetric_* (config_test.go), one domain each.
    let c = RlsConfig::parse(
        [(
            "v.yaml",
            "
domain: domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - {key: subject_id, rate_limit: {unit: minute, requests_per_unit: 60}}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - {key: resource, rate_limit: {unit: minute, requests_per_unit: 100}}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - {key: k3, rate_limit: {unit: second, requests_per_unit: 1}}
      - {key: k4, rate_limit: {unit: second, requests_per_unit: 1}}
  - key: detailed
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - {key: subject_id, detailed_metric: true, rate_limit: {unit: minute, requests_per_unit: 60}}
",
        )],
        false,
    )
    .unwrap();
    let key = |e: &[(&str, &str)]| lookup(&c, "domain", e).map(|l| l.2).unwrap();
    assert_eq!(
        key(&[
            ("route", "draw"),
            ("http_method", "GET"),
            ("subject_id", "123")
        ]),
        "domain.route_draw.http_method_GET.subject_id"
    );
    assert_eq!(
        key(&[
            ("user", "alice"),
            ("action", "readfile"),
            ("resource", "documents")
        ]),
        "domain.user_alice.action_readfile.resource"
    );
    assert_eq!(
        key(&[("k1", "X"), ("k2", "Y"), ("k3", "Z")]),
        "domain.k1.k2_Y.k3"
    );
    assert_eq!(key(&[("k1", "X"), ("k4", "Y")]), "domain.k1.k4");
    assert_eq!(
        key(&[
            ("detailed", "draw"),
            ("http_method", "GET"),
            ("subject_id", "123")
        ]),
        "domain.detailed_draw.http_method_GET.subject_id_123"
    );
    // Empty request values.
    assert_eq!(
        key(&[("route", ""), ("http_method", "GET"), ("subject_id", "123")]),
        "domain.route.http_method_GET.subject_id"
    );
    assert_eq!(
        key(&[("route", ""), ("http_method", ""), ("subject_id", "123")]),
        "domain.route.http_method.subject_id"
    );
    // TestValueToMetric_WithConfiguredValues
    let c = parse(
        "
domain: test-domain
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - {key: subject_id, rate_limit: {unit: minute, requests_per_unit: 60}}
      - key: http_method
        value: POST
        value_to_metric: true
        descriptors:
          - {key: subject_id, rate_limit: {unit: minute, requests_per_unit: 30}}
",
    )
    .unwrap();
    assert_eq!(
        lookup(
            &c,
            "test-domain",
            &[
                ("route", "api"),
                ("http_method", "POST"),
                ("subject_id", "u")
            ]
        ),
        Some((
            30,
            Unit::Minute,
            "test-domain.route_api.http_method_POST.subject_id".into()
        ))
    );
}

// --- examples/ratelimit/config: what the Go integration suite runs ---

#[test]
fn go_examples_load() {
    let c = go(&["example_config.yaml", "example_example.yaml"], false).unwrap();
    assert_eq!(
        lookup(&c, "mongo_cps", &[("database", "users")]).map(|l| l.0),
        Some(500)
    );
    assert_eq!(lookup(&c, "mongo_cps", &[("database", "other")]), None);
    let rl = c.domain("rl").unwrap();
    let category = rl.find(&[("category", "account")]).unwrap();
    assert_eq!(category.replaces(), ["bkthomps", "fake_name"]);
    let banned = rl.find(&[("foo", "x"), ("bar", "banned")]).unwrap();
    assert_eq!(banned.limits()[0].requests_per_unit(), 0);
    assert!(
        banned.limits()[0].limit().is_none(),
        "0 per unit: every hit is over"
    );
    assert_eq!(banned.names().collect::<Vec<_>>(), ["banned_limit"]);
    assert!(
        rl.find(&[("foo", "x"), ("baz", "shady")])
            .unwrap()
            .shadow_mode()
    );
    assert!(
        rl.find(&[("foo", "x"), ("bay", "y")])
            .unwrap()
            .is_unlimited()
    );
    assert_eq!(
        rl.find(&[("unspec", "unspecified_value")])
            .unwrap()
            .stats_key("rl", &[("unspec", "unspecified_value")]),
        "rl.unspec_unspecified_value"
    );
    let quota = rl.find(&[("service", "service_1")]).unwrap();
    assert!(quota.quota_mode());
    assert_eq!(
        quota.metadata().unwrap()["service_with_quota"]["name"],
        "service_1"
    );
    assert_eq!(
        rl.find(&[("source_cluster", "proxy"), ("destination_cluster", "mock")])
            .unwrap()
            .limits()[0]
            .requests_per_unit(),
        1
    );
    assert!(rl.find(&[("source_cluster", "proxy")]).is_none());
}

// --- test/config/config_test.go: the files the Go service refuses, with its messages ---

#[test]
fn go_refusals() {
    let cases: &[(&[&str], bool, &str)] = &[
        (
            &["empty_domain.yaml"],
            false,
            "empty_domain.yaml: config file cannot have empty domain",
        ),
        (
            &["basic_config.yaml", "duplicate_domain.yaml"],
            false,
            "duplicate_domain.yaml: duplicate domain 'test-domain' in config file",
        ),
        (&["empty_key.yaml"], false, "descriptor has empty key"),
        (
            &["duplicate_key.yaml"],
            false,
            "duplicate descriptor composite key 'test-domain.key1_value1'",
        ),
        (
            &["merge_domain_key1.yaml", "merge_domain_key1.yaml"],
            true,
            "duplicate descriptor composite key 'test-domain.key1_value1'",
        ),
        (
            &["bad_limit_unit.yaml"],
            false,
            "invalid rate limit unit 'foo'",
        ),
        (
            &["replaces_self.yaml"],
            false,
            "replaces should not contain name of same descriptor",
        ),
        (
            &["replaces_empty.yaml"],
            false,
            "should not have an empty replaces entry",
        ),
        (&["bad_yaml.yaml"], false, "error loading config file"),
        (
            &["misspelled_key.yaml"],
            false,
            "config error, unknown key 'ratelimit'",
        ),
        (
            &["misspelled_key2.yaml"],
            false,
            "config error, unknown key 'requestsperunit'",
        ),
        (
            &["non_string_key.yaml"],
            false,
            "config error, key is not of type string: 0.25",
        ),
        (
            &["non_map_list.yaml"],
            false,
            "config error, yaml file contains list of type other than map: a",
        ),
        (
            &["unlimited_with_unit.yaml"],
            false,
            "should not specify rate limit unit when unlimited",
        ),
    ];
    for (files, merge, message) in cases {
        let err = go_err(files, *merge);
        let text = err.to_string();
        let last = files.last().unwrap();
        assert!(text.starts_with(&format!("{last}: ")), "{text}");
        assert!(text.contains(message), "{files:?}: {text}");
        assert_eq!(err.file(), Some(*last));
    }
}

#[test]
fn go_refusals_are_typed_and_placed() {
    match go_err(&["duplicate_key.yaml"], false) {
        RlsConfigError::DuplicateKey { at, key, .. } => {
            assert_eq!(key, "test-domain.key1_value1");
            assert_eq!((at.line, at.path.as_str()), (6, "descriptors[1]"));
        }
        e => panic!("{e:?}"),
    }
    match go_err(&["bad_limit_unit.yaml"], false) {
        RlsConfigError::InvalidUnit { at, unit, .. } => {
            assert_eq!(unit, "foo");
            assert_eq!(
                (at.line, at.path.as_str()),
                (6, "descriptors[0].rate_limit.unit")
            );
        }
        e => panic!("{e:?}"),
    }
    match go_err(&["misspelled_key2.yaml"], false) {
        RlsConfigError::UnknownKey { at, .. } => {
            assert_eq!(at.path, "descriptors[0].rate_limit.requestsperunit")
        }
        e => panic!("{e:?}"),
    }
    // Go: "yaml: line 2: found unexpected end of stream"; ours points at the open quote.
    match go_err(&["bad_yaml.yaml"], false) {
        RlsConfigError::Syntax { line, message, .. } => assert!(line >= 1 && !message.is_empty()),
        e => panic!("{e:?}"),
    }
}
