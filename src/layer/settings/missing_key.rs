//! What the layer does with a request that has no key.

use http::StatusCode;

/// What happens to a request whose key extractor finds no key (e.g. no API key header).
///
/// The default counts it under the socket peer's IP. A server that records no peer address
/// (an axum app served without `into_make_service_with_connect_info`, a Unix socket) is
/// misconfigured: there the default answers `500 Internal Server Error` (gRPC `INTERNAL`)
/// with a [`KeyMissing`](crate::layer::KeyMissing) in the response's extensions, logs at
/// `error` (at most once a second) and counts the request in
/// `redlimit_requests_undecided_total{reason="no_key"}`, rather than let every request
/// through unlimited. Letting such requests through is a choice:
/// [`PeerIpOrAllow`](Self::PeerIpOrAllow) or [`Allow`](Self::Allow).
///
/// | setting | no key, a peer address | no key, no peer address |
/// |---|---|---|
/// | `PeerIp` (default) | counted under the peer IP | `500` (gRPC `INTERNAL`) |
/// | `PeerIpOrAllow` | counted under the peer IP | let through unlimited, logged at `warn` |
/// | `Allow` | let through unlimited | let through unlimited |
/// | `Reject(status)` | answered `status` | answered `status` |
///
/// In shadow mode nothing is answered for lack of a key: the request goes through, counted.
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
    /// Count it under the socket peer's IP; if that is unknown too (the server records no
    /// peer address), answer `500` (gRPC `INTERNAL`) with a
    /// [`KeyMissing`](crate::layer::KeyMissing): a misconfiguration is loud.
    #[default]
    PeerIp,
    /// Count it under the socket peer's IP; if that is unknown too, let it through unlimited
    /// (logged at `warn` at most once a second, and counted). The default before 0.1.
    PeerIpOrAllow,
    /// Let it through unlimited (counted).
    Allow,
    /// Answer with this status and a short body.
    Reject(StatusCode),
}

/// `peer-ip`, `peer-ip-or-allow`, `allow`, or `reject:STATUS` with a 4xx or 5xx status
/// (`reject:401`), as flags and config files write it.
///
/// ```
/// use redlimit::layer::MissingKey;
/// assert_eq!("allow".parse::<MissingKey>()?, MissingKey::Allow);
/// assert_eq!("peer-ip-or-allow".parse::<MissingKey>()?, MissingKey::PeerIpOrAllow);
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
            expected: "peer-ip, peer-ip-or-allow, allow or reject:STATUS (a 4xx or 5xx status)",
        };
        match s.split_once(':') {
            None if s == "peer-ip" => Ok(MissingKey::PeerIp),
            None if s == "peer-ip-or-allow" => Ok(MissingKey::PeerIpOrAllow),
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
            MissingKey::PeerIpOrAllow => f.write_str("peer-ip-or-allow"),
            MissingKey::Allow => f.write_str("allow"),
            MissingKey::Reject(status) => write!(f, "reject:{}", status.as_u16()),
        }
    }
}
