//! Shadow mode: decide and record everything, deny nothing.

/// Whether a rule enforces its decisions or only records them.
///
/// In shadow mode every decision is made and recorded as usual (the store is called and
/// counts the request, metrics count it, the [`Decision`](crate::Decision) is in the request's
/// extensions), but no request is denied: a request the limit would have refused (429, a gRPC
/// status, or a fail-closed 503) reaches the service, and is counted with the outcome
/// `shadow_denied`. Roll a new limit out in shadow mode, watch what it would deny, then
/// enforce it.
///
/// ```
/// use std::time::Duration;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
/// use redlimit::layer::Shadow;
/// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy).shadow(Shadow::On).build()?;
/// assert_eq!(Shadow::default(), Shadow::Off);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Shadow {
    /// Enforce: deny what the limit denies (the default).
    #[default]
    Off,
    /// Record, never deny, and send no rate-limit headers: clients see no difference.
    On,
    /// Record, never deny, but send the rate-limit headers (`X-RateLimit-*` or the IETF
    /// fields; never `Retry-After`), so clients can be checked before enforcement.
    OnWithHeaders,
}

impl Shadow {
    /// Whether decisions are only recorded.
    ///
    /// ```
    /// assert!(redlimit::layer::Shadow::On.is_on());
    /// assert!(!redlimit::layer::Shadow::Off.is_on());
    /// ```
    pub fn is_on(self) -> bool {
        self != Shadow::Off
    }
}

impl Shadow {
    const NAMES: [(Shadow, &'static str); 3] = [
        (Shadow::Off, "off"),
        (Shadow::On, "on"),
        (Shadow::OnWithHeaders, "on-with-headers"),
    ];
}

/// `off`, `on` or `on-with-headers`, as flags and config files write it.
///
/// ```
/// use redlimit::layer::Shadow;
/// assert_eq!("on-with-headers".parse::<Shadow>()?, Shadow::OnWithHeaders);
/// assert_eq!(Shadow::Off.to_string(), "off");
/// assert!("yes".parse::<Shadow>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for Shadow {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Shadow::NAMES
            .into_iter()
            .find(|(_, name)| *name == s)
            .map(|(shadow, _)| shadow)
            .ok_or_else(|| crate::ConfigError::InvalidSetting {
                setting: "shadow mode",
                value: s.to_owned(),
                expected: "off, on or on-with-headers",
            })
    }
}

impl std::fmt::Display for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Shadow::NAMES
            .into_iter()
            .find(|(shadow, _)| shadow == self)
            .map_or("off", |(_, name)| name);
        f.write_str(name)
    }
}
