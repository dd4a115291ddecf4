//! The Go service's key check (`validateYamlKeys`), run before a file is read: every mapping
//! key must be a string and one of the service's known keys (at any depth: a known key in an
//! odd place passes the check and is then ignored, as in Go), every list must hold mappings,
//! and every other value must be a string, an integer, a boolean or empty. `metadata` is not
//! looked into. Our extension keys pass only where they mean something, so that a file using
//! them never half-loads.

use super::error::{Place, RlsConfigError};
use super::yaml::{Kind, Node, Scalar};

/// The keys envoyproxy/ratelimit accepts (`validKeys` in `src/config/config_impl.go`).
pub(crate) const GO_KEYS: [&str; 16] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// Our keys beside a file's `domain`.
pub(crate) const ROOT_EXTENSIONS: [&str; 2] = ["on_store_error", "hash_tag"];
/// Our keys beside a descriptor's `rate_limit`.
pub(crate) const DESCRIPTOR_EXTENSIONS: [&str; 1] = ["rate_limits"];
/// Our keys inside a `rate_limit` or a `rate_limits` entry.
pub(crate) const LIMIT_EXTENSIONS: [&str; 3] = ["algorithm", "unit_multiplier", "calendar"];
/// The keys of a limit's `calendar`.
const CALENDAR_KEYS: [&str; 2] = ["time_zone", "anchor"];

/// What a mapping is, for our extension keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// A file's top level.
    Root,
    Descriptor,
    /// The Go service's `rate_limit`: any of its keys passes, as there.
    Limit,
    /// An entry of our `rate_limits`: only the keys of a limit.
    OurLimit,
    /// A limit's `calendar`: only its keys.
    Calendar,
    Other,
}

/// The keys of a `rate_limits` entry.
const OUR_LIMIT_KEYS: [&str; 8] = [
    "unit",
    "requests_per_unit",
    "unlimited",
    "name",
    "replaces",
    "algorithm",
    "unit_multiplier",
    "calendar",
];

/// Checks a document's keys as the Go service does.
pub(crate) fn check(file: &str, root: &Node) -> Result<(), RlsConfigError> {
    if matches!(root.kind, Kind::Scalar(_, Scalar::Null)) {
        // `~` or `null`: yaml.v2 leaves the map empty (then the domain is missing).
        return Ok(());
    }
    let Kind::Map(pairs) = &root.kind else {
        return Err(RlsConfigError::NotAMapping {
            file: file.to_owned(),
            at: Place::new(root.line, root.column, ""),
            found: describe(root),
        });
    };
    walk_map(file, pairs, Context::Root, "")
}

fn describe(node: &Node) -> &'static str {
    match &node.kind {
        Kind::List(_) => "list",
        Kind::Map(_) => "mapping",
        Kind::Scalar(_, Scalar::Null) => "null",
        Kind::Scalar(..) => "scalar",
    }
}

/// A key or value as Go's `%v` prints it.
pub(crate) fn go_display(node: &Node) -> String {
    match &node.kind {
        Kind::Scalar(_, Scalar::Null) => "<nil>".to_owned(),
        Kind::Scalar(_, Scalar::Bool(b)) => b.to_string(),
        Kind::Scalar(_, Scalar::Int(i)) => i.to_string(),
        Kind::Scalar(_, Scalar::Uint(u)) => u.to_string(),
        Kind::Scalar(_, Scalar::Float(f)) => f.to_string(),
        Kind::Scalar(text, Scalar::Str) => text.clone(),
        Kind::List(items) => {
            let items: Vec<String> = items.iter().map(go_display).collect();
            format!("[{}]", items.join(" "))
        }
        Kind::Map(_) => "map[...]".to_owned(),
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk_map(
    file: &str,
    pairs: &[(Node, Node)],
    context: Context,
    path: &str,
) -> Result<(), RlsConfigError> {
    for (key, value) in pairs {
        let name = match &key.kind {
            Kind::Scalar(text, Scalar::Str) => text.as_str(),
            _ => {
                return Err(RlsConfigError::NonStringKey {
                    file: file.to_owned(),
                    at: Place::new(key.line, key.column, path),
                    key: go_display(key),
                });
            }
        };
        let known = match context {
            Context::OurLimit => OUR_LIMIT_KEYS.contains(&name),
            Context::Calendar => CALENDAR_KEYS.contains(&name),
            Context::Root => GO_KEYS.contains(&name) || ROOT_EXTENSIONS.contains(&name),
            Context::Descriptor => GO_KEYS.contains(&name) || DESCRIPTOR_EXTENSIONS.contains(&name),
            Context::Limit => GO_KEYS.contains(&name) || LIMIT_EXTENSIONS.contains(&name),
            Context::Other => GO_KEYS.contains(&name),
        };
        let here = join(path, name);
        if !known {
            return Err(RlsConfigError::UnknownKey {
                file: file.to_owned(),
                at: Place::new(key.line, key.column, here),
                key: name.to_owned(),
            });
        }
        if name == "metadata" {
            continue;
        }
        let inner = match (context, name) {
            (_, "descriptors") => Context::Descriptor,
            (Context::Descriptor, "rate_limit") => Context::Limit,
            (Context::Descriptor, "rate_limits") => Context::OurLimit,
            (Context::Limit | Context::OurLimit, "calendar") => Context::Calendar,
            _ => Context::Other,
        };
        walk_value(file, value, inner, &here)?;
    }
    Ok(())
}

fn walk_value(
    file: &str,
    value: &Node,
    context: Context,
    path: &str,
) -> Result<(), RlsConfigError> {
    match &value.kind {
        Kind::List(items) => {
            for (i, item) in items.iter().enumerate() {
                let here = format!("{path}[{i}]");
                let Kind::Map(pairs) = &item.kind else {
                    return Err(RlsConfigError::ListOfNonMapping {
                        file: file.to_owned(),
                        at: Place::new(item.line, item.column, here),
                        element: go_display(item),
                    });
                };
                walk_map(file, pairs, context, &here)?;
            }
            Ok(())
        }
        // A mapping that is not in a list is never a descriptor or a limit entry (only
        // `rate_limit` and a limit's `calendar` are mappings of their own).
        Kind::Map(pairs) => walk_map(
            file,
            pairs,
            if matches!(context, Context::Limit | Context::Calendar) {
                context
            } else {
                Context::Other
            },
            path,
        ),
        Kind::Scalar(_, Scalar::Str | Scalar::Int(_) | Scalar::Bool(_) | Scalar::Null) => Ok(()),
        Kind::Scalar(text, Scalar::Float(_) | Scalar::Uint(_)) => {
            Err(RlsConfigError::UnsupportedValue {
                file: file.to_owned(),
                at: Place::new(value.line, value.column, path),
                value: text.clone(),
            })
        }
    }
}
