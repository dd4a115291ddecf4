use prost_types::{Any, ListValue, Struct, Value as PbValue};
use redlimit::rls::config::Unit;

use super::super::proto::ratelimit::config::ratelimit::v3::RateLimitReplace;
use super::*;

fn any(resource: &RateLimitConfig) -> Any {
    Any {
        type_url: TYPE_URL.into(),
        value: resource.encode_to_vec(),
    }
}

fn limit(unit: RateLimitUnit, requests_per_unit: u32) -> Option<RateLimitPolicy> {
    Some(RateLimitPolicy {
        unit: unit as i32,
        requests_per_unit,
        ..Default::default()
    })
}

fn leaf(key: &str, value: &str, rate_limit: Option<RateLimitPolicy>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        key: key.into(),
        value: value.into(),
        rate_limit,
        ..Default::default()
    }
}

fn resource(name: &str, domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitConfig {
    RateLimitConfig {
        name: name.into(),
        domain: domain.into(),
        descriptors,
    }
}

fn string(s: &str) -> PbValue {
    PbValue {
        kind: Some(Kind::StringValue(s.into())),
    }
}

/// Every field of the resource, against the YAML file that says the same.
fn everything() -> RateLimitConfig {
    let mut named = leaf("path", "/login", limit(RateLimitUnit::Minute, 5));
    if let Some(p) = &mut named.rate_limit {
        p.name = "login".into();
        p.replaces = vec![RateLimitReplace {
            name: "per-ip".into(),
        }];
    }
    named.shadow_mode = true;
    named.detailed_metric = true;
    named.quota_mode = true;
    named.metadata = Some(Struct {
        fields: [
            ("team".to_owned(), string("edge")),
            (
                "tiers".to_owned(),
                PbValue {
                    kind: Some(Kind::ListValue(ListValue {
                        values: vec![
                            string("a"),
                            PbValue {
                                kind: Some(Kind::BoolValue(true)),
                            },
                        ],
                    })),
                },
            ),
        ]
        .into_iter()
        .collect(),
    });
    let mut unlimited = leaf("user", "admin", None);
    unlimited.rate_limit = Some(RateLimitPolicy {
        unlimited: true,
        ..Default::default()
    });
    let mut ip = leaf("remote_address", "", limit(RateLimitUnit::Week, 100));
    if let Some(p) = &mut ip.rate_limit {
        p.name = "per-ip".into();
    }
    ip.descriptors = vec![named, unlimited];
    resource(
        "edge-config",
        "edge",
        vec![ip, leaf("yes", "0x1F", limit(RateLimitUnit::Second, 2))],
    )
}

const EVERYTHING_YAML: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: week, requests_per_unit: 100, name: per-ip}
    descriptors:
      - key: path
        value: /login
        rate_limit:
          unit: minute
          requests_per_unit: 5
          name: login
          replaces: [{name: per-ip}]
        shadow_mode: true
        detailed_metric: true
        quota_mode: true
        metadata: {team: edge, tiers: [a, true]}
      - key: user
        value: admin
        rate_limit: {unlimited: true}
  - key: "yes"
    value: "0x1F"
    rate_limit: {unit: second, requests_per_unit: 2}
"#;

#[test]
fn a_resource_gives_what_its_yaml_gives() {
    let from_xds = config(TYPE_URL, &[any(&everything())], false).expect("converts");
    let from_yaml = RlsConfig::parse([("edge.yaml", EVERYTHING_YAML)], false).expect("yaml loads");
    assert_eq!(from_xds.dump(), from_yaml.dump());
    let edge = from_xds.domain("edge").expect("domain");
    let login = edge
        .find(&[("remote_address", "10.0.0.1"), ("path", "/login")])
        .expect("nested rule");
    assert!(login.shadow_mode() && login.detailed_metric() && login.quota_mode());
    assert_eq!(login.replaces(), ["per-ip"]);
    assert_eq!(login.limits()[0].name(), Some("login"));
    assert_eq!(login.limits()[0].unit(), Unit::Minute);
    assert_eq!(
        login.metadata(),
        Some(&serde_json::json!({"team": "edge", "tiers": ["a", true]}))
    );
    let admin = edge
        .find(&[("remote_address", "10.0.0.1"), ("user", "admin")])
        .expect("unlimited rule");
    assert!(admin.is_unlimited());
    let ip = edge
        .find(&[("remote_address", "10.0.0.1")])
        .expect("ip rule");
    assert_eq!(
        (ip.limits()[0].unit(), ip.limits()[0].requests_per_unit()),
        (Unit::Week, 100)
    );
    // Strings YAML 1.1 would resolve stay strings.
    assert!(edge.find(&[("yes", "0x1F")]).is_some());
}

#[test]
fn awkward_strings_keep_their_text() {
    let odd = "null\n\"quoted\" \\ tab\t ünï 🦀 #not a comment: {x}";
    let r = resource(
        "odd",
        "d: x",
        vec![leaf(odd, odd, limit(RateLimitUnit::Hour, 1))],
    );
    let config = config(TYPE_URL, &[any(&r)], false).expect("converts");
    let domain = config.domain("d: x").expect("domain with a colon");
    assert!(domain.find(&[(odd, odd)]).is_some());
}

#[test]
fn the_set_is_refused_as_files_are() {
    let a = resource(
        "a",
        "same",
        vec![leaf("k", "", limit(RateLimitUnit::Second, 1))],
    );
    let b = resource(
        "b",
        "same",
        vec![leaf("j", "", limit(RateLimitUnit::Second, 1))],
    );
    let err = config(TYPE_URL, &[any(&a), any(&b)], false).expect_err("duplicate domain");
    assert!(err.contains("same"), "{err}");
    let merged = config(TYPE_URL, &[any(&a), any(&b)], true).expect("MERGE_DOMAIN_CONFIG merges");
    assert_eq!(merged.domain("same").expect("merged").rules().count(), 2);

    let twice = resource(
        "t",
        "d",
        vec![
            leaf("k", "v", limit(RateLimitUnit::Second, 1)),
            leaf("k", "v", limit(RateLimitUnit::Second, 2)),
        ],
    );
    assert!(
        config(TYPE_URL, &[any(&twice)], false).is_err(),
        "duplicate descriptor"
    );
    assert!(
        config(TYPE_URL, &[any(&resource("e", "", vec![]))], false).is_err(),
        "empty domain"
    );
}

#[test]
fn units_are_checked_as_go_checks_them() {
    let unknown = resource(
        "u",
        "d",
        vec![leaf("k", "", limit(RateLimitUnit::Unknown, 5))],
    );
    assert!(
        config(TYPE_URL, &[any(&unknown)], false).is_err(),
        "UNKNOWN with a limit"
    );
    let mut beyond = unknown.clone();
    if let Some(p) = &mut beyond.descriptors[0].rate_limit {
        p.unit = 99;
    }
    let err = config(TYPE_URL, &[any(&beyond)], false).expect_err("a unit Go does not know");
    assert!(err.contains("99"), "{err}");
    let mut unlimited = unknown.clone();
    if let Some(p) = &mut unlimited.descriptors[0].rate_limit {
        p.unlimited = true;
        p.requests_per_unit = 0;
    }
    assert!(
        config(TYPE_URL, &[any(&unlimited)], false).is_ok(),
        "unlimited needs no unit"
    );
    let mut both = unlimited.clone();
    if let Some(p) = &mut both.descriptors[0].rate_limit {
        p.unit = RateLimitUnit::Second as i32;
    }
    assert!(
        config(TYPE_URL, &[any(&both)], false).is_err(),
        "unlimited with a unit"
    );
}

#[test]
fn resources_that_are_not_rate_limit_configs_are_refused() {
    let mut wrong_type = any(&everything());
    wrong_type.type_url = "type.googleapis.com/envoy.config.cluster.v3.Cluster".into();
    let err = config(TYPE_URL, &[wrong_type], false).expect_err("wrong type");
    assert!(err.contains("Cluster"), "{err}");
    let garbage = Any {
        type_url: TYPE_URL.into(),
        value: vec![0xff, 0xff, 0xff],
    };
    assert!(
        config(TYPE_URL, &[garbage], false).is_err(),
        "undecodable bytes"
    );
    assert!(
        config(TYPE_URL, &[], false)
            .expect("no resource: no domain")
            .is_empty()
    );
    let other = "type.googleapis.com/envoy.config.listener.v3.Listener";
    assert!(
        config(other, &[], false).is_err(),
        "another type's empty set"
    );
}
