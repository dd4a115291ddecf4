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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
