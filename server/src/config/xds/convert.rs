//! An xDS response's `RateLimitConfig` resources to the config a directory of YAML files
//! gives, as envoyproxy/ratelimit's `ConfigXdsProtoToYaml` maps them: each resource becomes
//! one document (named by the resource's `name`) with its `domain` and descriptors, and the
//! set is loaded by `RlsConfig::parse`, so it is checked as files are (duplicate domains, bad
//! units, duplicate descriptors, `MERGE_DOMAIN_CONFIG`).
//!
//! Each document is written as JSON, which the YAML reader reads as YAML: every string is
//! quoted, so a key or value is never resolved as a YAML 1.1 boolean or number. Like Go's
//! struct, a rate limit always carries its `unit` (`UNKNOWN` when unset) and
//! `requests_per_unit`; a default (empty, false) field is left out, as it means what absence
//! means in a file.

use prost::Message;
use prost_types::value::Kind;
use redlimit::rls::config::RlsConfig;
use serde_json::{Map, Value, json};

use super::proto::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};

/// The resource type the client subscribes to.
pub(crate) const TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// Decodes every resource of a response of `type_url` and builds one config of them all
/// (state of the world: the set is the whole config). A response of another type is refused
/// (its empty set must not empty the config). The error is what a NACK's `error_detail` says.
pub(crate) fn config(
    type_url: &str,
    resources: &[prost_types::Any],
    merge_domains: bool,
) -> Result<RlsConfig, String> {
    if type_url != TYPE_URL {
        return Err(format!(
            "a response of type {type_url}: subscribed to {TYPE_URL} alone"
        ));
    }
    let mut documents = Vec::with_capacity(resources.len());
    for (i, any) in resources.iter().enumerate() {
        if any.type_url != TYPE_URL {
            return Err(format!(
                "resource {i}: type {} is not {TYPE_URL}",
                any.type_url
            ));
        }
        let resource = RateLimitConfig::decode(any.value.as_slice())
            .map_err(|e| format!("resource {i}: not a RateLimitConfig: {e}"))?;
        documents.push(document(&resource));
    }
    RlsConfig::parse(documents, merge_domains).map_err(|e| e.to_string())
}

/// One resource as a (name, text) document for `RlsConfig::parse`.
pub(crate) fn document(resource: &RateLimitConfig) -> (String, String) {
    let root = json!({
        "domain": resource.domain,
        "descriptors": descriptors(&resource.descriptors),
    });
    (resource.name.clone(), root.to_string())
}

fn descriptors(list: &[RateLimitDescriptor]) -> Value {
    Value::Array(list.iter().map(descriptor).collect())
}

fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut map = Map::new();
    map.insert("key".into(), d.key.clone().into());
    if !d.value.is_empty() {
        map.insert("value".into(), d.value.clone().into());
    }
    if let Some(policy) = &d.rate_limit {
        map.insert("rate_limit".into(), rate_limit(policy));
    }
    if !d.descriptors.is_empty() {
        map.insert("descriptors".into(), descriptors(&d.descriptors));
    }
    for (name, on) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
    ] {
        if on {
            map.insert(name.into(), true.into());
        }
    }
    if let Some(metadata) = &d.metadata {
        map.insert("metadata".into(), structure(metadata));
    }
    Value::Object(map)
}

fn rate_limit(p: &RateLimitPolicy) -> Value {
    // Go's `Unit.String()`: the enum's name, or the number for one it does not know (which
    // the loader then refuses as a unit).
    let unit = RateLimitUnit::try_from(p.unit)
        .map(|u| u.as_str_name().to_owned())
        .unwrap_or_else(|_| p.unit.to_string());
    let mut map = Map::new();
    map.insert("unit".into(), unit.into());
    map.insert("requests_per_unit".into(), p.requests_per_unit.into());
    if p.unlimited {
        map.insert("unlimited".into(), true.into());
    }
    if !p.name.is_empty() {
        map.insert("name".into(), p.name.clone().into());
    }
    if !p.replaces.is_empty() {
        let replaces = p.replaces.iter().map(|r| json!({ "name": r.name }));
        map.insert("replaces".into(), Value::Array(replaces.collect()));
    }
    Value::Object(map)
}

/// `google.protobuf.Struct` as JSON (structpb's `AsMap`).
fn structure(s: &prost_types::Struct) -> Value {
    Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect(),
    )
}

fn value(v: &prost_types::Value) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => {
            serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number)
        }
        Some(Kind::StringValue(s)) => s.clone().into(),
        Some(Kind::BoolValue(b)) => (*b).into(),
        Some(Kind::StructValue(s)) => structure(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value).collect()),
    }
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
