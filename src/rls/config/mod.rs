//! envoyproxy/ratelimit's YAML configuration, read as that service reads it.
//!
//! A file names a `domain` and a tree of `descriptors`, each a `key` with an optional `value`
//! (`*` in it matches any run of characters) and an optional `rate_limit`. A request
//! descriptor's entries are matched level by level ([`RlsDomain::find`]). Every key the Go
//! service accepts is accepted, every file it refuses is refused (unknown keys, bad units,
//! duplicate keys, ...), with a typed [`RlsConfigError`] naming the file and the place.
//!
//! Our extensions, each refused by the Go service as an unknown key (so a file using them never
//! half-loads there): `algorithm`, `unit_multiplier` and `calendar` (windows that follow a
//! calendar in a time zone: [`RlsLimit::calendar`]) in a limit, `rate_limits`, a list of
//! limits on one descriptor, checked and charged together, and beside `domain`,
//! `on_store_error` and `hash_tag`. See the guide `docs/guide/rls-config.md`.
//!
//! ```
//! use redlimit::rls::config::{RlsConfig, Unit};
//!
//! let config = RlsConfig::parse([("api.yaml", "
//! domain: api
//! descriptors:
//!   - key: api_key
//!     rate_limits:
//!       - {unit: second, requests_per_unit: 10, algorithm: gcra}
//!       - {unit: day, requests_per_unit: 10000}
//!   - key: path
//!     value: /admin/*
//!     rate_limit: {unit: minute, requests_per_unit: 5}
//! ")], false)?;
//! let api = config.domain("api").unwrap();
//! let rule = api.find(&[("api_key", "k-123")]).unwrap();
//! assert_eq!(rule.limits().len(), 2);
//! assert_eq!(api.find(&[("path", "/admin/users")]).unwrap().limits()[0].unit(), Unit::Minute);
//! # Ok::<(), redlimit::rls::config::RlsConfigError>(())
//! ```

mod bucket;
mod build;
mod calendar;
mod domain;
mod dump;
mod error;
mod limit;
mod load;
mod matching;
mod read;
mod rule;
mod unit;
mod validate;
mod wildcard;
mod yaml;

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;

pub use domain::RlsDomain;
pub use error::{Place, RlsConfigError};
pub use limit::RlsLimit;
pub use rule::{RlsRule, override_stats_key};
pub use unit::{Unit, UnknownUnit};

use build::load_descriptors;
use matching::Children;
use read::{Ctx, get};

/// Every domain of a configuration, immutable once built; cloning is cheap (one `Arc`).
///
/// ```
/// use redlimit::rls::config::RlsConfig;
/// let config = RlsConfig::parse([
///     ("a.yaml", "domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n"),
///     ("b.yaml", "domain: b\n"),
/// ], false)?;
/// assert_eq!(config.domains().map(|d| d.name()).collect::<Vec<_>>(), ["a", "b"]);
/// assert!(config.domain("c").is_none());
/// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct RlsConfig {
    domains: Arc<IndexMap<String, RlsDomain>>,
}

impl RlsConfig {
    /// Reads files given as (name, YAML text), in order. With `merge_domains` (the Go
    /// service's `MERGE_DOMAIN_CONFIG`), files naming the same domain add to it; without, a
    /// second file for a domain is an error. Every file is read and checked before any is
    /// loaded, as the Go service does.
    ///
    /// ```
    /// use redlimit::rls::config::{RlsConfig, RlsConfigError};
    /// let a = ("a.yaml", "domain: d\ndescriptors:\n  - {key: x, rate_limit: {unit: second, requests_per_unit: 1}}\n");
    /// let b = ("b.yaml", "domain: d\ndescriptors:\n  - {key: y, rate_limit: {unit: second, requests_per_unit: 1}}\n");
    /// assert!(matches!(RlsConfig::parse([a, b], false), Err(RlsConfigError::DuplicateDomain { .. })));
    /// let merged = RlsConfig::parse([a, b], true)?;
    /// assert_eq!(merged.domain("d").unwrap().rules().count(), 2);
    /// # Ok::<(), RlsConfigError>(())
    /// ```
    pub fn parse<I, N, T>(files: I, merge_domains: bool) -> Result<RlsConfig, RlsConfigError>
    where
        I: IntoIterator<Item = (N, T)>,
        N: AsRef<str>,
        T: AsRef<str>,
    {
        let mut documents = Vec::new();
        for (name, text) in files {
            let name = name.as_ref().to_owned();
            let root = yaml::parse(text.as_ref()).map_err(|e| RlsConfigError::Syntax {
                file: name.clone(),
                line: e.line,
                column: e.column,
                message: e.message,
            })?;
            if let Some(root) = &root {
                validate::check(&name, root)?;
            }
            documents.push((name, root));
        }
        let mut domains: IndexMap<String, RlsDomain> = IndexMap::new();
        for (name, root) in &documents {
            let ctx = Ctx { file: name };
            let pairs: &[_] = match root {
                Some(root) => ctx.map(Some(root), "")?.unwrap_or(&[]),
                None => &[],
            };
            let domain = ctx.string(get(pairs, "domain"), "domain")?;
            let descriptors = ctx.list(get(pairs, "descriptors"), "descriptors")?;
            if domain.is_empty() {
                return Err(RlsConfigError::EmptyDomain { file: name.clone() });
            }
            if domains.contains_key(&domain) && !merge_domains {
                return Err(RlsConfigError::DuplicateDomain {
                    file: name.clone(),
                    domain,
                });
            }
            let mode = on_store_error(&ctx, get(pairs, "on_store_error"))?;
            let tag = hash_tag(&ctx, get(pairs, "hash_tag"))?;
            let entry = domains.entry(domain.clone()).or_insert_with(|| RlsDomain {
                key: crate::key::Key::new(format!("rls\0{domain}")),
                name: domain.clone(),
                root: Children::default(),
                on_store_error: None,
                hash_tag: None,
            });
            // Merged files: the last that names a mode (a tag) gives it.
            entry.on_store_error = mode.or(entry.on_store_error);
            entry.hash_tag = tag.or(entry.hash_tag);
            load_descriptors(
                &ctx,
                &mut entry.root,
                &[],
                &format!("{domain}."),
                descriptors,
                "descriptors",
            )?;
        }
        Ok(RlsConfig {
            domains: Arc::new(domains),
        })
    }

    /// Reads every file of a directory (for the Go service's layout:
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`) as envoyproxy/ratelimit's
    /// runtime loader does: every regular file, subdirectories included, in lexical order, each
    /// named by its path relative to `dir`; with `ignore_dotfiles` (`RUNTIME_IGNOREDOTFILES`)
    /// names starting with a dot are skipped. A Kubernetes ConfigMap mount is read once: its
    /// `..data` link and `..<timestamp>` directory are not entered, the files' links are
    /// followed.
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let dir = std::env::temp_dir().join(format!("rls-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("edge.yaml"), "domain: edge\n")?;
    /// let config = RlsConfig::load_dir(&dir, false, false)?;
    /// assert!(config.domain("edge").is_some());
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load_dir(
        dir: &Path,
        ignore_dotfiles: bool,
        merge_domains: bool,
    ) -> Result<RlsConfig, RlsConfigError> {
        RlsConfig::parse(load::read_dir(dir, ignore_dotfiles)?, merge_domains)
    }

    /// The domain of that name.
    ///
    /// ```
    /// # let c = redlimit::rls::config::RlsConfig::parse([("c.yaml", "domain: d")], false)?;
    /// assert!(c.domain("d").is_some() && c.domain("D").is_none());
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn domain(&self, name: &str) -> Option<&RlsDomain> {
        self.domains.get(name)
    }

    /// The domain of that name and its position among [`domains`](Self::domains): its
    /// rule's id in the service's engine.
    pub(crate) fn domain_at(&self, name: &str) -> Option<(usize, &RlsDomain)> {
        self.domains
            .get_full(name)
            .map(|(at, _, domain)| (at, domain))
    }

    /// Every domain, in the order of the files that first named them.
    ///
    /// ```
    /// # let c = redlimit::rls::config::RlsConfig::parse([("c.yaml", "domain: d")], false)?;
    /// assert_eq!(c.domains().count(), 1);
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn domains(&self) -> impl Iterator<Item = &RlsDomain> {
        self.domains.values()
    }

    /// Whether there is no domain at all (the Go service's `IsEmptyDomains`).
    ///
    /// ```
    /// assert!(redlimit::rls::config::RlsConfig::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The text the Go service's debug endpoint `/rlconfig` shows: one line per rule,
    /// `<domain.key_value...>: unit=<UNIT> requests_per_unit=<n>, shadow_mode: <bool>,
    /// quota_mode: <bool>` (in file order, where Go's order is random).
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let c = RlsConfig::parse([("c.yaml", "domain: d\ndescriptors:\n  - {key: k, value: v, rate_limit: {unit: minute, requests_per_unit: 5}}\n")], false)?;
    /// assert_eq!(c.dump(), "d.k_v: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false\n");
    /// # Ok::<(), redlimit::rls::config::RlsConfigError>(())
    /// ```
    pub fn dump(&self) -> String {
        dump::dump(self)
    }
}

/// Our `on_store_error` key beside `domain`: the domain's failure mode.
fn on_store_error(
    ctx: &Ctx<'_>,
    node: Option<&yaml::Node>,
) -> Result<Option<crate::rls::FailureMode>, RlsConfigError> {
    let Some(node) = node else { return Ok(None) };
    let text = ctx.string(Some(node), "on_store_error")?;
    text.parse().map(Some).map_err(|_| {
        ctx.extension(
            node,
            "on_store_error",
            format!("unknown failure mode '{text}' (error, open, closed, local or local:N)"),
        )
    })
}

/// Our `hash_tag` key beside `domain`: where the domain's counters live in a Redis Cluster.
fn hash_tag(
    ctx: &Ctx<'_>,
    node: Option<&yaml::Node>,
) -> Result<Option<crate::rls::HashTag>, RlsConfigError> {
    let Some(node) = node else { return Ok(None) };
    let text = ctx.string(Some(node), "hash_tag")?;
    text.parse().map(Some).map_err(|_| {
        ctx.extension(
            node,
            "hash_tag",
            format!("unknown hash tag '{text}' (domain or descriptor)"),
        )
    })
}
