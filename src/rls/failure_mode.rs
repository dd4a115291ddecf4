//! [`FailureMode`]: what a domain's requests get when the store fails, misses the deadline, or
//! its circuit is open.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use super::config::RlsConfig;

use crate::engine::OnFailure;
use crate::failure::OnStoreError;

/// What a domain's requests get when the store fails, misses the store deadline, or its
/// circuit is open. Envoy acts on the answer: only `OVER_LIMIT` blocks, and an error (or
/// Envoy's own timeout, 20 ms by default) falls to its `failure_mode_deny`.
///
/// - [`Unavailable`](Self::Unavailable) (`error`, the default): gRPC `UNAVAILABLE`, so that
///   Envoy's `failure_mode_deny` decides;
/// - [`Open`](Self::Open) (`open`): `OK`, every descriptor within its limit;
/// - [`Closed`](Self::Closed) (`closed`): `OVER_LIMIT`, every limited descriptor over;
/// - [`Local`](Self::Local) (`local`, `local:N`): this server decides in memory on its share
///   of each limit (its count divided by `N`, rounded up), as the layer's local fallback does;
///   what the store admitted through this server a moment before is charged against it.
///
/// ```
/// use redlimit::rls::FailureMode;
/// assert_eq!(FailureMode::default(), FailureMode::Unavailable);
/// assert_eq!("error".parse::<FailureMode>()?, FailureMode::Unavailable);
/// assert_eq!("local:3".parse::<FailureMode>()?, FailureMode::Local { instances: 3 });
/// assert_eq!(FailureMode::Closed.to_string(), "closed");
/// assert!("maybe".parse::<FailureMode>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureMode {
    /// gRPC `UNAVAILABLE`: Envoy's `failure_mode_deny` decides.
    #[default]
    Unavailable,
    /// `OK` on every descriptor (a `requests_per_unit: 0` limit is still over: it needs no
    /// store).
    Open,
    /// `OVER_LIMIT` on every limited descriptor.
    Closed,
    /// Decide in memory on this server's share of each limit.
    Local {
        /// How many servers share the limits (1: each enforces the whole limit).
        instances: u32,
    },
}

/// `error` (or `unavailable`), `open`, `closed`, `local`, or `local:N`.
///
/// ```
/// use redlimit::rls::FailureMode;
/// assert_eq!("unavailable".parse::<FailureMode>()?, FailureMode::Unavailable);
/// assert_eq!("local".parse::<FailureMode>()?, FailureMode::Local { instances: 1 });
/// assert!("local:0".parse::<FailureMode>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl FromStr for FailureMode {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "error" || s == "unavailable" {
            return Ok(FailureMode::Unavailable);
        }
        let invalid = |_| crate::ConfigError::InvalidSetting {
            setting: "store failure mode",
            value: s.to_owned(),
            expected: "error, open, closed, local or local:N (N >= 1)",
        };
        Ok(match s.parse::<OnStoreError>().map_err(invalid)? {
            OnStoreError::Open => FailureMode::Open,
            OnStoreError::Closed => FailureMode::Closed,
            OnStoreError::Local { instances } => FailureMode::Local { instances },
        })
    }
}

impl fmt::Display for FailureMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureMode::Unavailable => f.write_str("error"),
            FailureMode::Open => f.write_str("open"),
            FailureMode::Closed => f.write_str("closed"),
            FailureMode::Local { instances: 1 } => f.write_str("local"),
            FailureMode::Local { instances } => write!(f, "local:{instances}"),
        }
    }
}

/// The engine's failure mode of a domain's rule.
impl From<FailureMode> for OnFailure {
    fn from(mode: FailureMode) -> Self {
        match mode {
            FailureMode::Unavailable => OnFailure::Unavailable,
            FailureMode::Open => OnFailure::Open,
            FailureMode::Closed => OnFailure::Closed,
            FailureMode::Local { instances } => OnFailure::Local { instances },
        }
    }
}

/// A service's failure modes: the builder's by domain, else the configuration's, else the
/// service's.
pub(super) struct Modes {
    pub(super) by_domain: HashMap<String, FailureMode>,
    pub(super) default: FailureMode,
}

impl Modes {
    /// The failure mode of `domain` under `config`.
    pub(super) fn of(&self, config: &RlsConfig, domain: &str) -> FailureMode {
        self.by_domain
            .get(domain)
            .copied()
            .or_else(|| config.domain(domain).and_then(|d| d.on_store_error))
            .unwrap_or(self.default)
    }
}
