//! The response's `dynamic_metadata` (the Go service's `RESPONSE_DYNAMIC_METADATA`, its
//! `ratelimitToMetadata`): the request's domain, its descriptors (entries as `key=value`, the
//! descriptor's own `limit` and `hitsAddend`), the request's `hitsAddend`, and the `metadata`
//! of the rules of the descriptors that passed, merged. Envoy puts it in the filter's dynamic
//! metadata (`envoy.filters.http.ratelimit`), for the access log and later filters.

use std::collections::BTreeMap;

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

use super::config::RlsConfig;
use super::plan::{Plan, Resolved};
use super::proto::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use super::proto::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use super::proto::envoy::r#type::v3::RateLimitUnit;

/// The metadata of `request`, answered `statuses`; `plan` is `None` for a domain that is not
/// configured (no rule, so no rule's `metadata`).
pub(super) fn dynamic_metadata(
    config: &RlsConfig,
    request: &RateLimitRequest,
    plan: Option<&Plan>,
    statuses: &[DescriptorStatus],
) -> Struct {
    let mut fields = BTreeMap::new();
    fields.insert("domain".to_owned(), string(request.domain.clone()));
    let descriptors = request.descriptors.iter().map(descriptor).collect();
    fields.insert("descriptors".to_owned(), list(descriptors));
    if request.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_owned(),
            number(u64::from(request.hits_addend)),
        );
    }
    let mut merged = Struct::default();
    if let (Some(plan), Some(domain)) = (plan, config.domain(&request.domain)) {
        for (i, d) in request.descriptors.iter().enumerate() {
            // Passed: limited (a rule of the config: a request's own `limit` has no metadata,
            // nor has a replaced rule, which is unmatched) and not over. A shadow-mode
            // descriptor over its limit is answered OK, so it passed, as in Go.
            let limited = matches!(plan.descriptors.get(i), Some(Resolved::Limited { .. }));
            let passed = statuses.get(i).is_some_and(|s| s.code() != Code::OverLimit);
            if !limited || !passed || d.limit.is_some() {
                continue;
            }
            let entries: Vec<(&str, &str)> = d
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            if let Some(Kind::StructValue(own)) = domain
                .find(&entries)
                .and_then(|rule| rule.metadata())
                .map(json)
                .and_then(|v| v.kind)
            {
                merge(&mut merged, own);
            }
        }
    }
    if !merged.fields.is_empty() {
        fields.insert(
            "metadata".to_owned(),
            Value {
                kind: Some(Kind::StructValue(merged)),
            },
        );
    }
    Struct { fields }
}

/// One descriptor: `entries` (`key=value`), its own `limit` as Go's protobuf text prints it,
/// its own `hitsAddend`.
fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut fields = BTreeMap::new();
    let entries = d
        .entries
        .iter()
        .map(|e| string(format!("{}={}", e.key, e.value)))
        .collect();
    fields.insert("entries".to_owned(), list(entries));
    if let Some(limit) = &d.limit {
        // Go's `String()` of the message: its set fields, `name:value`, the unit by name.
        let mut text = Vec::new();
        if limit.requests_per_unit != 0 {
            text.push(format!("requests_per_unit:{}", limit.requests_per_unit));
        }
        if limit.unit != 0 {
            let unit = RateLimitUnit::try_from(limit.unit)
                .map_or_else(|_| limit.unit.to_string(), |u| u.as_str_name().to_owned());
            text.push(format!("unit:{unit}"));
        }
        fields.insert("limit".to_owned(), string(text.join(" ")));
    }
    if let Some(hits) = d.hits_addend {
        fields.insert("hitsAddend".to_owned(), number(hits));
    }
    Value {
        kind: Some(Kind::StructValue(Struct { fields })),
    }
}

/// Go's `mergeMetadata`: a key new to `into` is added; a key both hold as structs is merged
/// the same way; any other key keeps `into`'s value (the first passed descriptor's).
fn merge(into: &mut Struct, from: Struct) {
    for (key, value) in from.fields {
        match into.fields.get_mut(&key) {
            None => {
                into.fields.insert(key, value);
            }
            Some(Value {
                kind: Some(Kind::StructValue(mine)),
            }) => {
                if let Some(Kind::StructValue(theirs)) = value.kind {
                    merge(mine, theirs);
                }
            }
            Some(_) => {}
        }
    }
}

/// A YAML `metadata` value (kept as JSON) as a protobuf `Value`, as Go's `structpb.NewValue`
/// makes it: every number a double.
fn json(value: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    let kind = match value {
        J::Null => Kind::NullValue(0),
        J::Bool(b) => Kind::BoolValue(*b),
        J::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        J::String(s) => Kind::StringValue(s.clone()),
        J::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(json).collect(),
        }),
        J::Object(map) => Kind::StructValue(Struct {
            fields: map.iter().map(|(k, v)| (k.clone(), json(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

fn string(text: String) -> Value {
    Value {
        kind: Some(Kind::StringValue(text)),
    }
}

/// A count as a protobuf number (a double, as Go's `structpb.NewNumberValue`).
#[allow(clippy::cast_precision_loss)] // exact below 2^53, as in Go
fn number(n: u64) -> Value {
    Value {
        kind: Some(Kind::NumberValue(n as f64)),
    }
}

fn list(values: Vec<Value>) -> Value {
    Value {
        kind: Some(Kind::ListValue(ListValue { values })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(pairs: &[(&str, Value)]) -> Struct {
        Struct {
            fields: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn merging_keeps_the_first_value_and_merges_structs() {
        let mut into = object(&[
            ("team", string("a".into())),
            (
                "owner",
                Value {
                    kind: Some(Kind::StructValue(object(&[("x", number(1))]))),
                },
            ),
        ]);
        let from = object(&[
            ("team", string("b".into())),
            ("tier", string("gold".into())),
            (
                "owner",
                Value {
                    kind: Some(Kind::StructValue(object(&[
                        ("x", number(2)),
                        ("y", number(3)),
                    ]))),
                },
            ),
        ]);
        merge(&mut into, from);
        assert_eq!(into.fields["team"], string("a".into()));
        assert_eq!(into.fields["tier"], string("gold".into()));
        let Some(Kind::StructValue(owner)) = &into.fields["owner"].kind else {
            panic!("a struct");
        };
        assert_eq!(owner.fields["x"], number(1));
        assert_eq!(owner.fields["y"], number(3));
    }

    #[test]
    fn a_descriptors_limit_prints_as_gos_protobuf_text() {
        use super::super::proto::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
            Entry, RateLimitOverride,
        };
        let d = RateLimitDescriptor {
            entries: vec![Entry {
                key: "k".into(),
                value: "v".into(),
            }],
            limit: Some(RateLimitOverride {
                requests_per_unit: 42,
                unit: RateLimitUnit::Minute.into(),
            }),
            hits_addend: Some(3),
        };
        let Some(Kind::StructValue(s)) = descriptor(&d).kind else {
            panic!("a struct");
        };
        assert_eq!(
            s.fields["limit"],
            string("requests_per_unit:42 unit:MINUTE".into())
        );
        assert_eq!(s.fields["hitsAddend"], number(3));
        assert_eq!(s.fields["entries"], list(vec![string("k=v".into())]));
    }
}
