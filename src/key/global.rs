//! One key for every request: a global quota.

use std::sync::LazyLock;

use http::request::Parts;

use super::{ClientPart, ClientSpec, Key, KeyExtractor};

/// Every request shares one key (`global`): a quota for the whole service (or route, with
/// `route_layer`). Beware: one key is one Redis shard, whatever the cluster's size.
///
/// ```
/// use redlimit::key::Global;
/// use redlimit::KeyExtractor;
/// let (parts, _) = http::Request::new(()).into_parts();
/// assert_eq!(Global.extract(&parts).unwrap().as_str(), "global");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl Global {
    fn key() -> Key {
        // Made once: a clone is one reference count, not an allocation per request.
        static GLOBAL: LazyLock<Key> = LazyLock::new(|| Key::new("global"));
        GLOBAL.clone()
    }
}

impl KeyExtractor for Global {
    fn extract(&self, _: &Parts) -> Option<Key> {
        Some(Global::key())
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Global).map(|_| Global::key())
    }
}
