//! What a front does when the store fails, misses its deadline, or its circuit is open.

/// What happens when the store fails, misses its deadline, or its circuit is open.
///
/// The default is [`Local`](Self::Local) with one instance: limiting goes on in memory, each
/// replica enforcing the whole limit, so N replicas falling back together admit up to N times
/// the limit (set `instances` to N to admit about the limit). [`Open`](Self::Open) admits
/// everything while the store is away: a choice for limits whose only job is to protect the
/// store's own users from each other, never for abuse protection.
///
/// Whatever the mode, a decision made in memory (in `Local` mode, and in every mode for a call
/// that missed its deadline or found too many calls in flight) is charged against what the
/// store admitted for this instance a moment before: the in-memory store mirrors each of the
/// store's admissions at this instance's share. So a late or failed store over-admits at most
/// this instance's share of each limit (`ceil(count / instances)`) minus what the store already
/// admitted for it in the period, never a second full budget on top of the store's.
///
/// ```
/// use redlimit::failure::OnStoreError;
/// assert_eq!(OnStoreError::default(), OnStoreError::Local { instances: 1 });
/// assert_eq!("closed".parse::<OnStoreError>().unwrap(), OnStoreError::Closed);
/// assert_eq!("local".parse::<OnStoreError>().unwrap(), OnStoreError::local());
/// assert!("maybe".parse::<OnStoreError>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Let the request through, unlimited, and log it (`warn`, at most once a second), when
    /// the store refuses (errors, refused connections). The handler sees a
    /// [`Decision`](crate::Decision) whose source is
    /// [`DecisionSource::FailOpen`](crate::DecisionSource::FailOpen). While the circuit is
    /// open because the store went *silent* instead (no answer to calls nor to a probe), the
    /// request is decided in memory as for a missed deadline, with this instance enforcing
    /// the whole limit: a store starved of CPU beside a flood is silent too, and failing open
    /// on it would give the flood an unlimited window.
    Open,
    /// Answer `503 Service Unavailable` (never 429: the client did nothing wrong).
    Closed,
    /// Decide with an in-memory store in this instance, with the same policy, its counts
    /// divided by `instances` (rounded up), so that `instances` replicas falling back together
    /// admit about what the shared store would. The decision's source is
    /// [`DecisionSource::Local`](crate::DecisionSource::Local); headers are sent as usual.
    /// The default, with one instance.
    Local {
        /// How many instances share the limit (1: each instance enforces the whole limit).
        instances: u32,
    },
}

impl Default for OnStoreError {
    fn default() -> Self {
        OnStoreError::local()
    }
}

impl OnStoreError {
    /// Local fallback enforcing the whole limit in each instance.
    ///
    /// ```
    /// use redlimit::failure::OnStoreError;
    /// assert_eq!(OnStoreError::local(), OnStoreError::Local { instances: 1 });
    /// ```
    pub fn local() -> Self {
        OnStoreError::Local { instances: 1 }
    }
}

/// `open`, `closed`, `local`, or `local:N` for `N` instances sharing the limit, as flags and
/// config files write it.
///
/// ```
/// use redlimit::failure::OnStoreError;
/// assert_eq!("local:3".parse::<OnStoreError>()?, OnStoreError::Local { instances: 3 });
/// assert_eq!(OnStoreError::Local { instances: 3 }.to_string(), "local:3");
/// assert_eq!(OnStoreError::local().to_string(), "local");
/// assert!("local:0".parse::<OnStoreError>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for OnStoreError {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || crate::ConfigError::UnknownStoreErrorMode(s.to_owned());
        match s.split_once(':') {
            None if s == "open" => Ok(OnStoreError::Open),
            None if s == "closed" => Ok(OnStoreError::Closed),
            None if s == "local" => Ok(OnStoreError::local()),
            // The digits check refuses the leading `+` that `u32::from_str` allows.
            Some(("local", count)) if count.bytes().all(|b| b.is_ascii_digit()) => {
                match count.parse::<u32>() {
                    Ok(instances) if instances >= 1 => Ok(OnStoreError::Local { instances }),
                    _ => Err(unknown()),
                }
            }
            _ => Err(unknown()),
        }
    }
}

impl std::fmt::Display for OnStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OnStoreError::Open => f.write_str("open"),
            OnStoreError::Closed => f.write_str("closed"),
            OnStoreError::Local { instances: 1 } => f.write_str("local"),
            OnStoreError::Local { instances } => write!(f, "local:{instances}"),
        }
    }
}
