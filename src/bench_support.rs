//! Internals exposed for the crate's own benchmarks. Not part of the public API: no stability
//! promise, hidden from the docs.

#[cfg(feature = "redis")]
use std::sync::Arc;

use http::HeaderMap;

use crate::decision::Decision;
use crate::layer::HeaderStyle;

/// The headers the layer renders for a decision.
pub fn render_headers(decision: &Decision, style: HeaderStyle) -> HeaderMap {
    crate::layer::render_headers(decision, style)
}

/// Decodes a script reply as the Redis store does.
#[cfg(feature = "redis")]
pub fn decode_reply(
    policy: &Arc<crate::Policy>,
    reply: &[i64],
) -> Result<Decision, crate::StoreError> {
    crate::store::decode_reply(policy, reply)
}

/// The very `EVALSHA` the Redis store sends for one check (Redis `TIME`), so a baseline can
/// send the same call by hand; the script must be loaded first (`SCRIPT LOAD` of
/// `RedisStore::script_source()`).
#[cfg(feature = "redis")]
pub fn script_call(
    prefix: &str,
    policy: &crate::Policy,
    key: &crate::Key,
    cost: u64,
) -> redis::Cmd {
    crate::store::script_call(prefix, policy, key, cost)
}
