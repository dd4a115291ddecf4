//! Which slot range of a Redis Cluster answers for a key: the failure domain of its checks,
//! for the layer's circuit breakers and the store's connection health alike.

use crate::key::Key;

/// Slots in a Redis Cluster.
const SLOTS: u16 = 16_384;

/// Slots per range: 128 ranges of 128 contiguous slots, so a shard (a few contiguous ranges of
/// thousands of slots) shares at most its edge ranges with another.
pub(super) const SLOTS_PER_RANGE: u16 = 128;

/// The number of slot ranges.
pub(super) const RANGES: usize = (SLOTS / SLOTS_PER_RANGE) as usize;

/// The slot range of every check of `key`. The state keys of one check all carry
/// `{key.hash_tag()}` as their hash tag (prefixes, policy names and key text never contain
/// braces), so the slot is that of the tag's text.
pub(super) fn domain(key: &Key) -> u16 {
    slot(key.hash_tag().as_bytes()) / SLOTS_PER_RANGE
}

/// The Cluster slot of a Redis key: CRC16/XMODEM of its hash tag (the text between the first
/// `{` and the next `}`, if not empty), else of the whole key.
pub(super) fn slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tag) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag() {
        // `CLUSTER KEYSLOT` of these on Redis 7.
        assert_eq!(slot(b"foo"), 12_182);
        assert_eq!(slot(b"123456789"), 12_739);
        assert_eq!(slot(b"rl:p:{foo}:gc:5:1000000"), 12_182);
        // An empty tag: the whole key is hashed.
        let whole = |key: &[u8]| crc16::State::<crc16::XMODEM>::calculate(key) % SLOTS;
        assert_eq!(slot(b"{}foo"), whole(b"{}foo"));
        assert_eq!(slot(b"a{}{foo}"), whole(b"a{}{foo}"));
    }

    #[test]
    fn domains_are_slot_ranges() {
        assert_eq!(domain(&Key::new("foo")), 12_182 / SLOTS_PER_RANGE);
        assert!((0..100).all(|i| usize::from(domain(&Key::new(format!("k{i}")))) < RANGES));
    }
}
