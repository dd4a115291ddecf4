//! Why a configuration was refused: one variant per kind of failure, each naming the file and
//! the place in it.

use std::fmt;
use std::path::PathBuf;

/// A place in a YAML file: its line and column (1-based) and the path of keys that leads to it
/// (`descriptors[1].rate_limit.unit`).
///
/// ```
/// use redlimit::rls::config::Place;
/// let place = Place::new(3, 7, "descriptors[0].key");
/// assert_eq!(place.to_string(), "line 3, column 7 (descriptors[0].key)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
    /// The keys and list indexes from the document's root.
    pub path: String,
}

impl Place {
    /// A place at `line`, `column` (both from 1) reached by `path`.
    ///
    /// ```
    /// let p = redlimit::rls::config::Place::new(1, 1, "domain");
    /// assert_eq!(p.line, 1);
    /// ```
    pub fn new(line: usize, column: usize, path: impl Into<String>) -> Self {
        Place {
            line,
            column,
            path: path.into(),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, " ({})", self.path)?;
        }
        Ok(())
    }
}

/// Why an envoyproxy/ratelimit configuration could not be loaded. Each variant names the file
/// (as given to [`RlsConfig::parse`](super::RlsConfig::parse), or its path relative to the
/// directory for [`RlsConfig::load_dir`](super::RlsConfig::load_dir)) and, where there is one,
/// the place in it. The messages follow the Go service's (`duplicate descriptor composite key
/// 'test-domain.key1_value1'`, `invalid rate limit unit 'foo'`, ...), so operators recognise
/// them.
///
/// ```
/// use redlimit::rls::config::{RlsConfig, RlsConfigError};
/// let err = RlsConfig::parse([("a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")], false)
///     .unwrap_err();
/// assert!(matches!(err, RlsConfigError::InvalidUnit { ref unit, .. } if unit == "fortnight"));
/// assert!(err.to_string().starts_with("a.yaml: line 4"));
/// assert_eq!(err.file(), Some("a.yaml"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RlsConfigError {
    /// The directory or a file in it could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Not YAML (Go: `error loading config file: yaml: ...`).
    #[error("{file}: line {line}, column {column}: error loading config file: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The document is not a mapping at its root.
    #[error("{file}: {at}: error loading config file: the document is a {found}, not a mapping")]
    NotAMapping {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// What it is instead (`list`, `string`, ...).
        found: &'static str,
    },
    /// A mapping key that is not a string (Go: `config error, key is not of type string`).
    #[error("{file}: {at}: config error, key is not of type string: {key}")]
    NonStringKey {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The key as written.
        key: String,
    },
    /// A key the Go service does not know (Go: `config error, unknown key`), or one of our
    /// extensions where it has no meaning.
    #[error("{file}: {at}: config error, unknown key '{key}'")]
    UnknownKey {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The key.
        key: String,
    },
    /// A list whose element is not a mapping (Go: `config error, yaml file contains list of
    /// type other than map`).
    #[error(
        "{file}: {at}: config error, yaml file contains list of type other than map: {element}"
    )]
    ListOfNonMapping {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The element as written.
        element: String,
    },
    /// A value the Go service's key check refuses: a float, an integer beyond 64 bits signed
    /// (Go: `error checking config`).
    #[error("{file}: {at}: error checking config: unsupported value '{value}'")]
    UnsupportedValue {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The value as written.
        value: String,
    },
    /// A value of the wrong type for its key (Go: `cannot unmarshal !!str into uint32`).
    #[error(
        "{file}: {at}: error loading config file: cannot unmarshal {found} `{value}` into {expected}"
    )]
    WrongType {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// What the key needs (`uint32`, `bool`, `string`, `list`, `mapping`).
        expected: &'static str,
        /// What was found (`!!str`, `!!int`, `!!map`, ...).
        found: &'static str,
        /// The value as written (empty for a list or mapping).
        value: String,
    },
    /// No `domain`, or an empty one.
    #[error("{file}: config file cannot have empty domain")]
    EmptyDomain {
        /// The file.
        file: String,
    },
    /// A second file for a domain, when domains are not merged.
    #[error("{file}: duplicate domain '{domain}' in config file")]
    DuplicateDomain {
        /// The file.
        file: String,
        /// The domain.
        domain: String,
    },
    /// A descriptor without a `key`.
    #[error("{file}: {at}: descriptor has empty key")]
    EmptyKey {
        /// The file.
        file: String,
        /// Where.
        at: Place,
    },
    /// Two descriptors with the same key and value at one level.
    #[error("{file}: {at}: duplicate descriptor composite key '{key}'")]
    DuplicateKey {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The full key (`domain.key_value...`).
        key: String,
    },
    /// A `unit` that is not one of `second` ... `year`.
    #[error("{file}: {at}: invalid rate limit unit '{unit}'")]
    InvalidUnit {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The unit as written.
        unit: String,
    },
    /// `unlimited: true` with a `unit`.
    #[error("{file}: {at}: should not specify rate limit unit when unlimited")]
    UnlimitedWithUnit {
        /// The file.
        file: String,
        /// Where.
        at: Place,
    },
    /// A `replaces` entry without a name.
    #[error("{file}: {at}: should not have an empty replaces entry")]
    EmptyReplaces {
        /// The file.
        file: String,
        /// Where.
        at: Place,
    },
    /// A limit that replaces itself.
    #[error("{file}: {at}: replaces should not contain name of same descriptor")]
    ReplacesSelf {
        /// The file.
        file: String,
        /// Where.
        at: Place,
    },
    /// `share_threshold: true` on a descriptor whose key and value have no `*`.
    #[error(
        "{file}: {at}: share_threshold can only be used with wildcard values (containing '*'), but found key '{key}'"
    )]
    ShareThresholdWithoutWildcard {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// The descriptor's key (`key_value`).
        key: String,
    },
    /// One of our extensions used wrongly (`algorithm`, `unit_multiplier`, `rate_limits`), or a
    /// limit redlimit cannot enforce exactly.
    #[error("{file}: {at}: {reason}")]
    InvalidExtension {
        /// The file.
        file: String,
        /// Where.
        at: Place,
        /// What is wrong.
        reason: String,
    },
}

impl RlsConfigError {
    /// The file the error is in (`None` for a directory that cannot be read).
    ///
    /// ```
    /// use redlimit::rls::config::RlsConfig;
    /// let err = RlsConfig::parse([("x.yaml", "descriptors: []")], false).unwrap_err();
    /// assert_eq!(err.file(), Some("x.yaml"));
    /// ```
    pub fn file(&self) -> Option<&str> {
        use RlsConfigError::*;
        match self {
            Io { .. } => None,
            Syntax { file, .. }
            | NotAMapping { file, .. }
            | NonStringKey { file, .. }
            | UnknownKey { file, .. }
            | ListOfNonMapping { file, .. }
            | UnsupportedValue { file, .. }
            | WrongType { file, .. }
            | EmptyDomain { file }
            | DuplicateDomain { file, .. }
            | EmptyKey { file, .. }
            | DuplicateKey { file, .. }
            | InvalidUnit { file, .. }
            | UnlimitedWithUnit { file, .. }
            | EmptyReplaces { file, .. }
            | ReplacesSelf { file, .. }
            | ShareThresholdWithoutWildcard { file, .. }
            | InvalidExtension { file, .. } => Some(file),
        }
    }
}
