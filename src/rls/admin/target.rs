//! What an admin path names: a domain of the configuration in force, and a descriptor's
//! entries given as the query (`?KEY=VALUE&KEY=VALUE`, in the descriptor's order).

use std::sync::Arc;

use http::{StatusCode, Uri};
use serde::Serialize;

use super::super::RateLimitService;
use super::super::config::{RlsConfig, RlsDomain, RlsRule};
use super::super::service::Generation;
use crate::admin::{AdminError, decode_utf8};

/// The most entries a descriptor named here may have.
const MAX_ENTRIES: usize = 32;

/// The longest query read.
const MAX_QUERY: usize = 8192;

/// The domain and descriptor of `/rls/{domain}/...?ENTRIES`, under the configuration in force.
pub(super) struct Target {
    pub(super) generation: Arc<Generation>,
    pub(super) domain: String,
    /// `(key, value)`, percent-decoded, in order; empty when the query names none.
    pub(super) entries: Vec<(String, String)>,
}

/// A descriptor as every answer names it.
#[derive(Serialize)]
pub(super) struct Entry {
    key: String,
    value: String,
}

impl Target {
    /// The target of `uri`, whose path is `/rls/{domain}/{what}` (the route matched it). Read
    /// from the raw path and query: a `%26` is part of a value, a raw `&` separates entries.
    pub(super) fn of(service: &RateLimitService, uri: &Uri) -> Result<Target, AdminError> {
        let mut segments = uri.path().rsplit('/');
        let (Some(_what), Some(domain)) = (segments.next(), segments.next()) else {
            return Err(AdminError::NotFound);
        };
        let domain = decode_utf8(domain).ok_or_else(|| {
            AdminError::BadRequest(
                StatusCode::BAD_REQUEST,
                "bad path: the domain is not UTF-8 once percent-decoded".into(),
            )
        })?;
        let generation = service.inner.generation.load_full();
        if generation.config.domain(&domain).is_none() {
            return Err(AdminError::NoSuchDomain(domain));
        }
        let entries = entries(uri.query().unwrap_or_default())?;
        Ok(Target {
            generation,
            domain,
            entries,
        })
    }

    pub(super) fn config(&self) -> &RlsConfig {
        &self.generation.config
    }

    /// The domain (it was in the configuration the target was read under).
    pub(super) fn domain(&self) -> Result<&RlsDomain, AdminError> {
        self.config()
            .domain(&self.domain)
            .ok_or_else(|| AdminError::NoSuchDomain(self.domain.clone()))
    }

    /// The entries as `(&str, &str)`, as the configuration matches them.
    pub(super) fn pairs(&self) -> Vec<(&str, &str)> {
        self.entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The descriptor's entries, required: a query without any is a bad descriptor.
    pub(super) fn require_entries(&self) -> Result<(), AdminError> {
        if self.entries.is_empty() {
            return Err(AdminError::BadDescriptor(
                "name the descriptor's entries as the query: ?KEY=VALUE&KEY=VALUE".into(),
            ));
        }
        Ok(())
    }

    /// The rule the descriptor gets.
    pub(super) fn rule(&self) -> Result<&RlsRule, AdminError> {
        self.require_entries()?;
        self.domain()?.find(&self.pairs()).ok_or_else(|| {
            AdminError::NoRule(format!(
                "no rule of domain `{}` applies to this descriptor",
                clip(&self.domain)
            ))
        })
    }

    /// The entries as the answers show them.
    pub(super) fn descriptor(&self) -> Vec<Entry> {
        self.entries
            .iter()
            .map(|(key, value)| Entry {
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }
}

/// `KEY=VALUE` pairs joined with `&`, each side percent-decoded (`+` stays `+`).
fn entries(query: &str) -> Result<Vec<(String, String)>, AdminError> {
    if query.is_empty() {
        return Ok(Vec::new());
    }
    if query.len() > MAX_QUERY {
        return Err(AdminError::BadDescriptor(format!(
            "a query of {} bytes: at most {MAX_QUERY}",
            query.len()
        )));
    }
    let pairs: Vec<&str> = query.split('&').collect();
    if pairs.len() > MAX_ENTRIES {
        return Err(AdminError::BadDescriptor(format!(
            "{} entries: at most {MAX_ENTRIES}",
            pairs.len()
        )));
    }
    pairs
        .into_iter()
        .enumerate()
        .map(|(i, pair)| {
            let bad = |why: &str| AdminError::BadDescriptor(format!("entry {}: {why}", i + 1));
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| bad("expected KEY=VALUE"))?;
            let key = decode_utf8(key).ok_or_else(|| bad("the key is not UTF-8"))?;
            let value = decode_utf8(value).ok_or_else(|| bad("the value is not UTF-8"))?;
            if key.is_empty() {
                return Err(bad("an empty key"));
            }
            Ok((key, value))
        })
        .collect()
}

/// A name echoed back, cut short.
fn clip(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_read_as_entries_in_order_or_say_why_not() {
        assert_eq!(entries("").unwrap(), []);
        assert_eq!(
            entries("b=2&a=x%26y&c=").unwrap(),
            [
                ("b".to_owned(), "2".to_owned()),
                ("a".to_owned(), "x&y".to_owned()),
                ("c".to_owned(), String::new())
            ]
        );
        assert_eq!(
            entries("k=a=b").unwrap(),
            [("k".to_owned(), "a=b".to_owned())]
        );
        for bad in [
            "k",
            "=v",
            "k=%FF",
            "a=1&&b=2",
            "k=v&".repeat(40).as_str(),
            "x".repeat(9000).as_str(),
        ] {
            assert!(
                matches!(entries(bad), Err(AdminError::BadDescriptor(_))),
                "{bad:.40}"
            );
        }
    }
}
