//! What the layer does with a request that has no key.

use http::StatusCode;

/// What happens to a request whose key extractor finds no key (e.g. no API key header).
///
/// ```
/// use http::StatusCode;
/// use redlimit::layer::MissingKey;
/// let strict = MissingKey::Reject(StatusCode::UNAUTHORIZED);
/// assert_eq!(MissingKey::default(), MissingKey::PeerIp);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MissingKey {
    /// Count it under the socket peer's IP; if that is unknown too, let it through unlimited
    /// (and log it).
    #[default]
    PeerIp,
    /// Let it through unlimited.
    Allow,
    /// Answer with this status and a short body.
    Reject(StatusCode),
}

/// `peer-ip`, `allow`, or `reject:STATUS` with a 4xx or 5xx status (`reject:401`), as flags
/// and config files write it.
///
/// ```
/// use redlimit::layer::MissingKey;
/// assert_eq!("allow".parse::<MissingKey>()?, MissingKey::Allow);
/// let reject: MissingKey = "reject:401".parse()?;
/// assert_eq!(reject, MissingKey::Reject(http::StatusCode::UNAUTHORIZED));
/// assert_eq!(reject.to_string(), "reject:401");
/// assert!("reject:200".parse::<MissingKey>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl std::str::FromStr for MissingKey {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let status = |code: &str| {
            code.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| StatusCode::from_bytes(code.as_bytes()).ok())
                .flatten()
                .filter(|status| status.is_client_error() || status.is_server_error())
        };
        let invalid = || crate::ConfigError::InvalidSetting {
            setting: "missing-key answer",
            value: s.to_owned(),
            expected: "peer-ip, allow or reject:STATUS (a 4xx or 5xx status)",
        };
        match s.split_once(':') {
            None if s == "peer-ip" => Ok(MissingKey::PeerIp),
            None if s == "allow" => Ok(MissingKey::Allow),
            Some(("reject", code)) => status(code).map(MissingKey::Reject).ok_or_else(invalid),
            _ => Err(invalid()),
        }
    }
}

impl std::fmt::Display for MissingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MissingKey::PeerIp => f.write_str("peer-ip"),
            MissingKey::Allow => f.write_str("allow"),
            MissingKey::Reject(status) => write!(f, "reject:{}", status.as_u16()),
        }
    }
}
