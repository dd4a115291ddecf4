//! [`HashTag`]: which Redis Cluster slot a domain's counters live on.

use std::fmt;
use std::str::FromStr;

use crate::key::Key;

/// Which part of a counter's key is its Redis Cluster hash tag: where the domain's counters
/// live, and so how many store calls a request makes.
///
/// - [`Domain`](Self::Domain) (`domain`, the default): every counter of a domain shares the
///   domain's tag, one slot. A request is one atomic store call (descriptors charging the
///   same hits): every descriptor charged or none. A domain's load is one shard's.
/// - [`Descriptor`](Self::Descriptor) (`descriptor`): each descriptor's counters (all its
///   limits) share a tag of their own, a hash of the domain and the descriptor's entries, so
///   a domain spreads over the Cluster. A request is one call per descriptor, made at once;
///   when one refuses, what the others charged is refunded: a refused request's charge is
///   visible for about one round trip (the one weakening against `Domain`'s single atomic
///   call). On a single Redis this only costs more calls.
///
/// Switching moves every counter to new Redis keys: counts start afresh.
///
/// ```
/// use redlimit::rls::HashTag;
/// assert_eq!(HashTag::default(), HashTag::Domain);
/// assert_eq!("descriptor".parse::<HashTag>()?, HashTag::Descriptor);
/// assert_eq!(HashTag::Domain.to_string(), "domain");
/// assert!("slot".parse::<HashTag>().is_err());
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashTag {
    /// One slot per domain: one atomic call per request.
    #[default]
    Domain,
    /// One slot per descriptor: a call per descriptor, in parallel, refunded on a refusal.
    Descriptor,
}

/// `domain` or `descriptor`.
///
/// ```
/// use redlimit::rls::HashTag;
/// assert_eq!("domain".parse::<HashTag>()?, HashTag::Domain);
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
impl FromStr for HashTag {
    type Err = crate::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "domain" => Ok(HashTag::Domain),
            "descriptor" => Ok(HashTag::Descriptor),
            _ => Err(crate::ConfigError::InvalidSetting {
                setting: "hash tag",
                value: s.to_owned(),
                expected: "domain or descriptor",
            }),
        }
    }
}

impl fmt::Display for HashTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashTag::Domain => "domain",
            HashTag::Descriptor => "descriptor",
        })
    }
}

/// The tag of a descriptor's counters under [`HashTag::Descriptor`]: `rls:` and the 64-bit
/// FNV-1a hash of its text (the domain and its entries), in hex. Short, so that a Redis key
/// does not carry the descriptor twice (its counter's own key follows the tag), and stable
/// across builds and versions (every server must name the same key); a collision only puts
/// two descriptors on one slot.
pub(super) fn descriptor_tag(text: &[u8]) -> Key {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = text
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    Key::new(format!("rls:{hash:016x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_descriptor_tag_is_fnv_1a() {
        // FNV-1a 64 of "" and "a", as published.
        assert_eq!(descriptor_tag(b"").as_str(), "rls:cbf29ce484222325");
        assert_eq!(descriptor_tag(b"a").as_str(), "rls:af63dc4c8601ec8c");
        assert_ne!(descriptor_tag(b"d\0k\0v\0"), descriptor_tag(b"d\0k\0w\0"));
    }

    #[test]
    fn a_domain_names_its_own() {
        use crate::rls::config::{RlsConfig, RlsConfigError};
        let file = |tag: &str| format!("domain: d\n{tag}descriptors: []\n");
        let config = RlsConfig::parse(
            [
                ("a.yaml", file("hash_tag: descriptor\n")),
                ("b.yaml", file("")),
            ],
            true,
        )
        .unwrap();
        // Merged files: the last that names a tag gives it.
        assert_eq!(
            config.domain("d").unwrap().hash_tag(),
            Some(HashTag::Descriptor)
        );
        let none = RlsConfig::parse([("a.yaml", file(""))], false).unwrap();
        assert_eq!(none.domain("d").unwrap().hash_tag(), None);
        let bad = RlsConfig::parse([("a.yaml", file("hash_tag: slot\n"))], false);
        assert!(
            matches!(bad, Err(RlsConfigError::InvalidExtension { .. })),
            "{bad:?}"
        );
        // Beside `domain` only.
        let nested = "domain: d\ndescriptors:\n  - {key: k, hash_tag: domain}\n";
        assert!(RlsConfig::parse([("a.yaml", nested)], false).is_err());
    }

    #[test]
    fn names_round_trip() {
        for tag in [HashTag::Domain, HashTag::Descriptor] {
            assert_eq!(tag.to_string().parse::<HashTag>().unwrap(), tag);
        }
    }
}
