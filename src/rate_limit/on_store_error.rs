//! What the layer does when the store fails, misses its deadline, or its circuit is open.

/// What happens when the store fails or misses its deadline.
///
/// ```
/// use redlimit::OnStoreError;
/// assert_eq!(OnStoreError::default(), OnStoreError::Open);
/// assert_eq!("closed".parse::<OnStoreError>().unwrap(), OnStoreError::Closed);
/// assert_eq!("local".parse::<OnStoreError>().unwrap(), OnStoreError::local());
/// assert!("maybe".parse::<OnStoreError>().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Let the request through, unlimited, and log it (`warn`, at most once a second).
    /// The handler sees a [`Decision`](crate::Decision) whose source is
    /// [`DecisionSource::FailOpen`](crate::DecisionSource::FailOpen).
    #[default]
    Open,
    /// Answer `503 Service Unavailable` (never 429: the client did nothing wrong).
    Closed,
    /// Decide with an in-memory store in this instance, with the same policy, its counts
    /// divided by `instances` (rounded up), so that `instances` replicas falling back together
    /// admit about what the shared store would. The decision's source is
    /// [`DecisionSource::Local`](crate::DecisionSource::Local); headers are sent as usual.
    Local {
        /// How many instances share the limit (1: each instance enforces the whole limit).
        instances: u32,
    },
}

impl OnStoreError {
    /// Local fallback enforcing the whole limit in each instance.
    ///
    /// ```
    /// use redlimit::OnStoreError;
    /// assert_eq!(OnStoreError::local(), OnStoreError::Local { instances: 1 });
    /// ```
    pub fn local() -> Self {
        OnStoreError::Local { instances: 1 }
    }
}

impl std::str::FromStr for OnStoreError {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "open" => Ok(OnStoreError::Open),
            "closed" => Ok(OnStoreError::Closed),
            "local" => Ok(OnStoreError::local()),
            other => Err(crate::ConfigError::UnknownStoreErrorMode(other.to_owned())),
        }
    }
}
