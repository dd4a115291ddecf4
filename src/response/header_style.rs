//! Which rate-limit headers responses carry.

/// Which rate-limit headers responses carry. `Retry-After` is sent on every 429 whatever the
/// style (except when retrying can never succeed).
///
/// - `XRateLimit` (default), GitHub's: `X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 3`,
///   `X-RateLimit-Reset: 1767225600` (Unix seconds when the governing limit is fully free).
/// - `Ietf`, the IETF draft's structured fields: `RateLimit-Policy: "api";q=10;w=1` and
///   `RateLimit: "api";r=3;t=1` (`t` in seconds from now), one item per limit of the policy
///   (`"api-1"`, `"api-2"`, ... when it has several), from the same decision.
///
/// ```
/// use redlimit::response::HeaderStyle;
/// assert_eq!(HeaderStyle::default(), HeaderStyle::XRateLimit);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderStyle {
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    #[default]
    XRateLimit,
    /// `RateLimit-Policy` and `RateLimit` (IETF draft).
    Ietf,
    /// Both of the above.
    Both,
    /// No rate-limit headers (only `Retry-After` on 429).
    None,
}

impl HeaderStyle {
    const NAMES: [(HeaderStyle, &'static str); 4] = [
        (HeaderStyle::XRateLimit, "legacy"),
        (HeaderStyle::Ietf, "ietf"),
        (HeaderStyle::Both, "both"),
        (HeaderStyle::None, "none"),
    ];
}

/// `legacy` (`X-RateLimit-*`), `ietf`, `both` or `none`, as flags and config files write it.
///
/// ```
/// use redlimit::response::HeaderStyle;
/// assert_eq!("ietf".parse::<HeaderStyle>()?, HeaderStyle::Ietf);
/// assert_eq!(HeaderStyle::XRateLimit.to_string(), "legacy");
/// assert!("x-ratelimit".parse::<HeaderStyle>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for HeaderStyle {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HeaderStyle::NAMES
            .into_iter()
            .find(|(_, name)| *name == s)
            .map(|(style, _)| style)
            .ok_or_else(|| crate::ConfigError::InvalidSetting {
                setting: "header style",
                value: s.to_owned(),
                expected: "legacy, ietf, both or none",
            })
    }
}

impl std::fmt::Display for HeaderStyle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = HeaderStyle::NAMES
            .into_iter()
            .find(|(style, _)| style == self)
            .map_or("legacy", |(_, name)| name);
        f.write_str(name)
    }
}
