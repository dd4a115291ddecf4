//! The typed read of a checked document (the Go service's `yaml.Unmarshal` into `YamlRoot`,
//! then `loadDescriptors`): each descriptor into the domain's tree, refusing what the Go
//! service refuses, and our extensions.

use std::fmt::Write as _;
use std::sync::Arc;

use super::calendar::read_calendar;
use super::error::RlsConfigError;
use super::limit::{RlsLimit, parse_algorithm};
use super::matching::{Children, DescriptorNode};
use super::read::{Ctx, get};
use super::rule::{Level, RlsRule};
use super::unit::Unit;
use super::validate::{go_display, join};
use super::yaml::{Kind, Node, Scalar};
use crate::Algorithm;
use crate::rls::stats::StatsKeys;

/// Loads a list of descriptors into `into` (Go's `loadDescriptors`). `parents` are the levels
/// above; `parent_key` is the Go full key of the level above, with its trailing dot.
pub(crate) fn load_descriptors(
    ctx: &Ctx<'_>,
    into: &mut Children,
    parents: &[Level],
    parent_key: &str,
    list: &[Node],
    path: &str,
) -> Result<(), RlsConfigError> {
    for (i, item) in list.iter().enumerate() {
        let here = format!("{path}[{i}]");
        let pairs = ctx.map(Some(item), &here)?.unwrap_or(&[]);
        let key = ctx.string(get(pairs, "key"), &join(&here, "key"))?;
        if key.is_empty() {
            return Err(RlsConfigError::EmptyKey {
                file: ctx.file.to_owned(),
                at: ctx.at(item, &here),
            });
        }
        let value = ctx.string(get(pairs, "value"), &join(&here, "value"))?;
        let composite = if value.is_empty() {
            key.clone()
        } else {
            format!("{key}_{value}")
        };
        let full_key = format!("{parent_key}{composite}");
        if into.nodes.contains_key(&composite) {
            return Err(RlsConfigError::DuplicateKey {
                file: ctx.file.to_owned(),
                at: ctx.at(item, &here),
                key: full_key,
            });
        }
        let share_threshold = ctx.boolean(
            get(pairs, "share_threshold"),
            &join(&here, "share_threshold"),
        )?;
        let level = Level {
            wildcard: composite
                .contains('*')
                .then(|| composite.split('*').map(str::to_owned).collect()),
            composite: composite.clone(),
            value_to_metric: ctx.boolean(
                get(pairs, "value_to_metric"),
                &join(&here, "value_to_metric"),
            )?,
            share_threshold,
        };
        let mut levels = parents.to_vec();
        levels.push(level.clone());
        let rule = read_rule(ctx, item, pairs, &here, &levels, &full_key)?;
        if share_threshold && level.wildcard.is_none() {
            return Err(RlsConfigError::ShareThresholdWithoutWildcard {
                file: ctx.file.to_owned(),
                at: ctx.at(item, &here),
                key: composite,
            });
        }
        if let Some(parts) = &level.wildcard {
            into.wildcards.push((composite.clone(), parts.clone()));
        }
        let mut node = DescriptorNode {
            rule,
            children: Children::default(),
        };
        let below_path = join(&here, "descriptors");
        let below = ctx.list(get(pairs, "descriptors"), &below_path)?;
        load_descriptors(
            ctx,
            &mut node.children,
            &levels,
            &format!("{full_key}."),
            below,
            &below_path,
        )?;
        into.nodes.insert(composite, node);
    }
    Ok(())
}

/// The rule of one descriptor: its `rate_limit` and our `rate_limits`, with the flags beside.
fn read_rule(
    ctx: &Ctx<'_>,
    item: &Node,
    pairs: &[(Node, Node)],
    here: &str,
    levels: &[Level],
    full_key: &str,
) -> Result<Option<RlsRule>, RlsConfigError> {
    let flag = |name: &str| ctx.boolean(get(pairs, name), &join(here, name));
    let (shadow_mode, quota_mode, detailed_metric) = (
        flag("shadow_mode")?,
        flag("quota_mode")?,
        flag("detailed_metric")?,
    );
    let metadata = read_metadata(ctx, get(pairs, "metadata"), &join(here, "metadata"))?;
    let rate_limit_path = join(here, "rate_limit");
    let rate_limit = get(pairs, "rate_limit");
    let single = ctx.map(rate_limit, &rate_limit_path)?;
    let list_path = join(here, "rate_limits");
    let list_node = get(pairs, "rate_limits");
    let list = ctx.list(list_node, &list_path)?;
    if single.is_none() && list.is_empty() {
        if let Some(node) = list_node.filter(|n| matches!(n.kind, Kind::List(_))) {
            return Err(ctx.extension(
                node,
                &list_path,
                "rate_limits must hold at least one limit",
            ));
        }
        return Ok(None);
    }
    let mut limits = Vec::new();
    let mut replaces = Vec::new();
    let mut unlimited = false;
    let mut unlimited_name = None;
    let mut unlimited_requests_per_unit = 0;
    if let (Some(fields), Some(node)) = (single, rate_limit) {
        unlimited = ctx.boolean(
            get(fields, "unlimited"),
            &join(&rate_limit_path, "unlimited"),
        )?;
        let limit = read_limit(
            ctx,
            node,
            fields,
            &rate_limit_path,
            unlimited,
            &mut replaces,
        )?;
        if unlimited {
            unlimited_requests_per_unit = ctx.uint32(
                get(fields, "requests_per_unit"),
                &join(&rate_limit_path, "requests_per_unit"),
            )?;
            unlimited_name =
                Some(ctx.string(get(fields, "name"), &join(&rate_limit_path, "name"))?)
                    .filter(|n| !n.is_empty());
        }
        limits.extend(limit);
    }
    for (i, entry) in list.iter().enumerate() {
        let entry_path = format!("{list_path}[{i}]");
        let fields = ctx.map(Some(entry), &entry_path)?.unwrap_or(&[]);
        if unlimited || ctx.boolean(get(fields, "unlimited"), &join(&entry_path, "unlimited"))? {
            return Err(ctx.extension(
                entry,
                &entry_path,
                "an unlimited rule cannot have rate_limits",
            ));
        }
        limits.extend(read_limit(
            ctx,
            entry,
            fields,
            &entry_path,
            false,
            &mut replaces,
        )?);
    }
    if limits.len() > crate::MAX_LIMITS {
        return Err(ctx.extension(
            item,
            here,
            format!("at most {} limits per descriptor", crate::MAX_LIMITS),
        ));
    }
    let mut path = String::new();
    for (i, level) in levels.iter().enumerate() {
        if i > 0 {
            path.push('.');
        }
        for c in level.composite.chars() {
            if c == '.' || c == '\\' {
                path.push('\\');
            }
            let _ = path.write_char(c);
        }
    }
    Ok(Some(RlsRule {
        limits,
        unlimited,
        unlimited_name,
        unlimited_requests_per_unit,
        shadow_mode,
        quota_mode,
        detailed_metric,
        replaces,
        metadata,
        full_key: full_key.to_owned(),
        path,
        levels: levels.to_vec(),
        stats_keys: (!detailed_metric && !levels.iter().any(|l| l.value_to_metric))
            .then(|| Arc::new(StatsKeys::new(full_key))),
    }))
}

/// One `rate_limit` mapping (or `rate_limits` entry): `None` when unlimited.
fn read_limit(
    ctx: &Ctx<'_>,
    node: &Node,
    fields: &[(Node, Node)],
    path: &str,
    unlimited: bool,
    replaces: &mut Vec<String>,
) -> Result<Option<RlsLimit>, RlsConfigError> {
    let unit_path = join(path, "unit");
    let unit_node = get(fields, "unit");
    let unit_text = ctx.string(unit_node, &unit_path)?;
    let unit = unit_text.parse::<Unit>().ok();
    let requests_per_unit = ctx.uint32(
        get(fields, "requests_per_unit"),
        &join(path, "requests_per_unit"),
    )?;
    let name = ctx.string(get(fields, "name"), &join(path, "name"))?;
    let replaces_path = join(path, "replaces");
    let mut own_replaces = Vec::new();
    for (i, entry) in ctx
        .list(get(fields, "replaces"), &replaces_path)?
        .iter()
        .enumerate()
    {
        let entry_path = format!("{replaces_path}[{i}]");
        let entry_fields = ctx.map(Some(entry), &entry_path)?.unwrap_or(&[]);
        own_replaces.push((
            entry,
            ctx.string(get(entry_fields, "name"), &join(&entry_path, "name"))?,
        ));
    }
    let place = |n: Option<&Node>| ctx.at(n.unwrap_or(node), &unit_path);
    if unlimited {
        if unit.is_some() {
            return Err(RlsConfigError::UnlimitedWithUnit {
                file: ctx.file.to_owned(),
                at: place(unit_node),
            });
        }
    } else if unit.is_none() {
        return Err(RlsConfigError::InvalidUnit {
            file: ctx.file.to_owned(),
            at: place(unit_node),
            unit: unit_text,
        });
    }
    for (entry, replaced) in own_replaces {
        let at = ctx.at(entry, &replaces_path);
        if replaced.is_empty() {
            return Err(RlsConfigError::EmptyReplaces {
                file: ctx.file.to_owned(),
                at,
            });
        }
        if replaced == name {
            return Err(RlsConfigError::ReplacesSelf {
                file: ctx.file.to_owned(),
                at,
            });
        }
        if !replaces.contains(&replaced) {
            replaces.push(replaced);
        }
    }
    let algorithm_path = join(path, "algorithm");
    let algorithm = match get(fields, "algorithm") {
        None => Algorithm::FixedWindow,
        Some(n) => {
            let text = ctx.string(Some(n), &algorithm_path)?;
            parse_algorithm(&text).ok_or_else(|| {
                ctx.extension(
                    n,
                    &algorithm_path,
                    format!(
                        "unknown algorithm '{text}' (fixed-window, sliding-window, sliding-log, token-bucket or gcra)"
                    ),
                )
            })?
        }
    };
    let multiplier_path = join(path, "unit_multiplier");
    let unit_multiplier = match get(fields, "unit_multiplier") {
        None => 1,
        Some(n) => match ctx.uint32(Some(n), &multiplier_path)? {
            0 => {
                return Err(ctx.extension(
                    n,
                    &multiplier_path,
                    "unit_multiplier must be at least 1",
                ));
            }
            m => m,
        },
    };
    let Some(unit) = unit else {
        if ["algorithm", "unit_multiplier", "calendar"]
            .iter()
            .any(|k| get(fields, k).is_some())
        {
            return Err(ctx.extension(
                node,
                path,
                "an unlimited limit has no algorithm, unit_multiplier or calendar",
            ));
        }
        return Ok(None);
    };
    let calendar = read_calendar(ctx, fields, path, unit, algorithm, unit_multiplier)?;
    let name = (!name.is_empty()).then_some(name);
    RlsLimit::new(
        requests_per_unit,
        unit,
        unit_multiplier,
        name,
        algorithm,
        calendar,
    )
    .map(Some)
    .map_err(|e| {
        ctx.extension(
            node,
            path,
            format!("redlimit cannot enforce this limit: {e}"),
        )
    })
}

/// `metadata` as JSON (Go keeps it as a protobuf `Struct`); `None` when absent or empty.
fn read_metadata(
    ctx: &Ctx<'_>,
    node: Option<&Node>,
    path: &str,
) -> Result<Option<serde_json::Value>, RlsConfigError> {
    match ctx.map(node, path)? {
        None | Some([]) => Ok(None),
        Some(pairs) => Ok(Some(json(&Node {
            kind: Kind::Map(pairs.to_vec()),
            line: 0,
            column: 0,
        }))),
    }
}

fn json(node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match &node.kind {
        Kind::Map(pairs) => Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (go_display(k), json(v)))
                .collect(),
        ),
        Kind::List(items) => Value::Array(items.iter().map(json).collect()),
        Kind::Scalar(_, Scalar::Null) => Value::Null,
        Kind::Scalar(_, Scalar::Bool(b)) => Value::Bool(*b),
        Kind::Scalar(_, Scalar::Int(i)) => Value::from(*i),
        Kind::Scalar(_, Scalar::Uint(u)) => Value::from(*u),
        Kind::Scalar(text, Scalar::Float(f)) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(text.clone())),
        Kind::Scalar(text, Scalar::Str) => Value::String(text.clone()),
    }
}
