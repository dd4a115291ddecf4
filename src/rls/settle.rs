//! Settling a reservation through the RLS: an estimate charged on the request path, the real
//! cost charged after the response, and only the difference counted in the end.
//!
//! `hits_addend` is unsigned and Envoy sends the same descriptors on both calls, so the two
//! calls are told apart by an entry each carries last, which the service takes off before the
//! descriptor is matched (the rules never see it):
//!
//! - `redlimit.reserve` (any value) on the request path: the descriptor's hits are the
//!   reservation (an estimate: `max_tokens`, a prompt's size). When every counter of every
//!   such descriptor was charged by the store (every hit lands by default; all or none, when
//!   the request was admitted; not one answered from the deny cache or a failure mode), the
//!   response's `dynamic_metadata` carries `redlimit.receipt`: what was reserved, when (the
//!   store's time), a nonce, and a MAC under the service's key
//!   ([`settle_key`](super::RateLimitServiceBuilder::settle_key)). Envoy keeps it as the
//!   filter's dynamic metadata (`envoy.filters.http.ratelimit`).
//! - `redlimit.settle` = that receipt on the stream-done call (Envoy's `apply_on_stream_done`,
//!   the entry from a `metadata` action reading `redlimit.receipt` back), its hits the real
//!   cost: each counter of the descriptor is charged the excess over the reservation (it
//!   always lands: a settlement is a cost incurred), or given back what the reservation held
//!   beyond the real cost (a refund under a token of the receipt's nonce and the counter, so
//!   once per counter however often the receipt comes back; as a refund gives, within the
//!   window or span the reservation was counted in). A receipt that does not verify (absent,
//!   Envoy's `default_value`, forged, another domain's, from a service of another key) settles
//!   nothing: the real cost is charged in full, as without this extension.
//!
//! The MAC is what makes a refund safe: a refund of units never charged would hand out budget,
//! so only a receipt this service (or one sharing its key) issued for a charge that landed
//! gives any back.

use sha2::{Digest, Sha256};
use smallvec::SmallVec;

use super::plan::{Plan, Resolved};
use super::proto::envoy::service::ratelimit::v3::RateLimitRequest;
use super::run::{Evaluated, POLICY, Runner};
use crate::key::Key;
use crate::policy::Policy;
use crate::store::Refund;

/// The entry that makes a descriptor's hits a reservation.
pub const RESERVE_ENTRY: &str = "redlimit.reserve";
/// The entry that settles a reservation: its value is the receipt.
pub const SETTLE_ENTRY: &str = "redlimit.settle";
/// The field of the response's `dynamic_metadata` that holds the receipt.
pub const RECEIPT_FIELD: &str = "redlimit.receipt";

/// The key receipts are signed with: every replica behind one Envoy must share it, or a
/// receipt issued by one settles nothing on another.
#[derive(Clone)]
pub(super) struct SettleKey([u8; 32]);

impl SettleKey {
    /// A key of this process alone (random).
    pub(super) fn random() -> Self {
        let mut key = [0u8; 32];
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&crate::identity::instance().to_le_bytes());
        }
        SettleKey(key)
    }

    /// The key of `secret` (any length: hashed).
    pub(super) fn new(secret: &[u8]) -> Self {
        SettleKey(Sha256::digest(secret).into())
    }

    /// The receipt of `reserved` units charged at `at_us` (store time) in `domain`.
    fn receipt(&self, domain: &str, reserved: u64, at_us: u64, nonce: u64) -> String {
        let mac = self.mac(domain, reserved, at_us, nonce);
        format!("{reserved}.{at_us}.{nonce:016x}.{}", hex(&mac))
    }

    /// What `receipt` says was reserved, if this key signed it for `domain`.
    fn verify(&self, domain: &str, receipt: &str) -> Option<Reserved> {
        let mut parts = receipt.split('.');
        let reserved: u64 = parts.next()?.parse().ok()?;
        let at_us: u64 = parts.next()?.parse().ok()?;
        let nonce = u64::from_str_radix(parts.next()?, 16).ok()?;
        let mac = parts.next()?;
        if parts.next().is_some() {
            return None;
        }
        let expected = hex(&self.mac(domain, reserved, at_us, nonce));
        // Compared whole, in constant time: a MAC is never guessed a byte at a time.
        let same = expected.len() == mac.len()
            && expected
                .bytes()
                .zip(mac.bytes())
                .fold(0u8, |diff, (a, b)| diff | (a ^ b))
                == 0;
        same.then_some(Reserved {
            units: reserved,
            at_us,
            nonce,
        })
    }

    /// HMAC-SHA-256 (RFC 2104) of the receipt's fields, its first 16 bytes.
    fn mac(&self, domain: &str, reserved: u64, at_us: u64, nonce: u64) -> [u8; 16] {
        let mut message = Vec::with_capacity(domain.len() + 32);
        message.extend_from_slice(domain.as_bytes());
        message.push(0);
        message.extend_from_slice(&reserved.to_be_bytes());
        message.extend_from_slice(&at_us.to_be_bytes());
        message.extend_from_slice(&nonce.to_be_bytes());
        let mut mac = [0u8; 16];
        mac.copy_from_slice(&hmac_sha256(&self.0, &message)[..16]);
        mac
    }
}

/// HMAC-SHA-256 (RFC 2104) under a 32-byte key.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let pad = |byte: u8| -> [u8; 64] {
        let mut block = [byte; 64];
        for (b, k) in block.iter_mut().zip(key) {
            *b ^= k;
        }
        block
    };
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// `bytes` in lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A reservation a receipt vouches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reserved {
    units: u64,
    at_us: u64,
    nonce: u64,
}

/// What the request's entries asked for.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// The descriptors whose hits are a reservation.
    reserve: SmallVec<[usize; 2]>,
    /// The descriptors that settle one, with what each gives back per counter.
    settle: SmallVec<[(usize, Option<Reserved>, u64); 2]>,
}

impl Marks {
    /// Whether the request settles anything (its charges then always land).
    pub(super) fn settles(&self) -> bool {
        !self.settle.is_empty()
    }
}

/// Takes the reserve and settle entries off `request`'s descriptors (each only as a
/// descriptor's last entry), and makes a settling descriptor's hits the excess of its real
/// cost over the reservation its receipt vouches for.
pub(super) fn take(request: &mut RateLimitRequest, key: &SettleKey) -> Marks {
    let mut marks = Marks::default();
    let request_hits = u64::from(request.hits_addend.max(1));
    for (i, descriptor) in request.descriptors.iter_mut().enumerate() {
        let Some(last) = descriptor.entries.last() else {
            continue;
        };
        if last.key == RESERVE_ENTRY {
            descriptor.entries.pop();
            marks.reserve.push(i);
        } else if last.key == SETTLE_ENTRY {
            let receipt = descriptor
                .entries
                .pop()
                .map(|e| e.value)
                .unwrap_or_default();
            let reserved = key.verify(&request.domain, &receipt);
            let real = descriptor.hits_addend.unwrap_or(request_hits);
            let held = reserved.map_or(0, |r| r.units);
            descriptor.hits_addend = Some(real.saturating_sub(held));
            marks.settle.push((i, reserved, held.saturating_sub(real)));
        }
    }
    marks
}

/// The receipt of the request's reservation, if it made one and every counter of its
/// reserving descriptors holds it (charged by the store, now): the descriptors must share one
/// number of hits (one estimate).
pub(super) fn receipt(
    marks: &Marks,
    request: &RateLimitRequest,
    plan: &Plan,
    results: &[Option<Evaluated>],
    key: &SettleKey,
) -> Option<String> {
    let mut reserved = None;
    let mut at_us = 0;
    for &d in &marks.reserve {
        let descriptor = request.descriptors.get(d)?;
        let hits = descriptor
            .hits_addend
            .unwrap_or(u64::from(request.hits_addend.max(1)));
        if *reserved.get_or_insert(hits) != hits {
            return None;
        }
        let Some(Resolved::Limited { first, len, .. }) = plan.descriptors.get(d) else {
            return None;
        };
        for c in *first..first + len {
            let counter = &plan.counters[c];
            let e = results.get(c)?.as_ref()?;
            // Charged by the store, its hits: not answered from the deny cache, not given
            // back after a refusal.
            if counter.limit.is_none() || e.cached || e.asked != counter.cost || e.at_us == 0 {
                return None;
            }
            if !e.always && !e.state.is_allowed() {
                return None;
            }
            at_us = at_us.max(e.at_us);
        }
    }
    let reserved = reserved.filter(|&r| r > 0)?;
    let nonce = crate::identity::DecisionId::next().0;
    Some(key.receipt(&request.domain, reserved, at_us, nonce))
}

impl Runner<'_> {
    /// Gives back, in the background, what each settling descriptor's reservation held beyond
    /// its real cost, counter by counter, in the store each lives in.
    pub(super) fn give_back(&self, marks: &Marks, plan: &Plan) {
        for &(d, reserved, units) in &marks.settle {
            let (Some(reserved), true) = (reserved, units > 0) else {
                continue;
            };
            let Some(Resolved::Limited { first, len, .. }) = plan.descriptors.get(d) else {
                continue;
            };
            for counter in &plan.counters[*first..first + len] {
                let Some(limit) = counter.limit else {
                    continue;
                };
                let Some(engine) = self.engine(self.homes().of(counter)) else {
                    continue;
                };
                let Ok(policy) = Policy::new(POLICY, [limit]) else {
                    continue;
                };
                let key = counter
                    .tag
                    .clone()
                    .with_named_limit_keys([counter.own.clone()]);
                let token = token(reserved.nonce, &counter.own);
                let refund = Refund::new(units, reserved.at_us, token);
                let store = std::sync::Arc::clone(engine.store());
                tokio::spawn(async move {
                    if let Some(refunds) = store.refunds()
                        && let Err(error) = refunds.refund(&policy, &key, refund).await
                    {
                        tracing::warn!(%error, "rls: a settled reservation could not be given back");
                    }
                });
            }
        }
    }
}

/// The refund token of a receipt's nonce on one counter: a store applies it once.
fn token(nonce: u64, own: &Key) -> u64 {
    let digest = Sha256::new()
        .chain_update(nonce.to_be_bytes())
        .chain_update(own.as_str().as_bytes())
        .finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_verifies_under_its_key_and_domain_only() {
        let key = SettleKey::new(b"shared secret");
        let receipt = key.receipt("llm", 500, 1_700_000_000_000_000, 42);
        let reserved = key.verify("llm", &receipt).expect("verifies");
        assert_eq!((reserved.units, reserved.nonce), (500, 42));
        assert!(key.verify("other", &receipt).is_none(), "another domain");
        assert!(SettleKey::new(b"other").verify("llm", &receipt).is_none());
        assert!(SettleKey::random().verify("llm", &receipt).is_none());
        let forged = receipt.replacen("500", "900", 1);
        assert!(key.verify("llm", &forged).is_none(), "{forged}");
        for junk in ["", "none", "1.2.3", "1.2.zz.00", &format!("{receipt}.x")] {
            assert!(key.verify("llm", junk).is_none(), "{junk}");
        }
    }

    /// RFC 4231's test case 2 ("Jefe", zero-padded as HMAC pads any short key).
    #[test]
    fn the_mac_is_hmac_sha_256() {
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(&hmac_sha256(&key, b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn tokens_differ_by_counter_and_nonce() {
        let (a, b) = (Key::new("a"), Key::new("b"));
        assert_ne!(token(1, &a), token(1, &b));
        assert_ne!(token(1, &a), token(2, &a));
        assert_eq!(token(7, &a), token(7, &a));
    }
}
