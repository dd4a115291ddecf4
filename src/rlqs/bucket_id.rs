//! A `BucketId` checked against the stream's bounds, and its canonical name: its entries
//! sorted by key (their order means nothing), under its domain.

use std::sync::Arc;

use prost::Message;
use sha2::{Digest, Sha256};
use tonic::Status;

use crate::rls::proto::envoy::service::rate_limit_quota::v3::BucketId;
use crate::rls::settle::hex;

/// A bucket of one domain: its id as the client sent it, its entries sorted, and a digest of
/// both (its name in Redis and this server's maps).
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub(crate) id: BucketId,
    pub(crate) entries: Vec<(String, String)>,
    pub(crate) digest: Arc<str>,
}

impl Bucket {
    /// The bucket `id` of `domain`, or the stream's error: `INVALID_ARGUMENT` for a missing or
    /// empty id, an empty key or value, or an id whose encoding is over `max_bytes`.
    pub(crate) fn new(
        domain: &str,
        id: Option<BucketId>,
        max_bytes: usize,
    ) -> Result<Bucket, Status> {
        let Some(id) = id else {
            return Err(Status::invalid_argument(
                "a bucket_quota_usage without bucket_id",
            ));
        };
        let size = id.encoded_len();
        if size > max_bytes {
            return Err(Status::invalid_argument(format!(
                "a BucketId of {size} bytes, over this server's limit of {max_bytes}"
            )));
        }
        if id.bucket.is_empty() {
            return Err(Status::invalid_argument("an empty BucketId"));
        }
        if id.bucket.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
            return Err(Status::invalid_argument(
                "a BucketId with an empty key or value",
            ));
        }
        let mut entries: Vec<(String, String)> = id
            .bucket
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        entries.sort();
        let mut hash = Sha256::new();
        for part in std::iter::once(domain)
            .chain(entries.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
        {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        let digest = hex(&hash.finalize()[..16]);
        Ok(Bucket {
            id,
            entries,
            digest: digest.into(),
        })
    }

    /// The entries as the rule lookup takes them.
    pub(crate) fn pairs(&self) -> Vec<(&str, &str)> {
        self.entries
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pairs: &[(&str, &str)]) -> BucketId {
        BucketId {
            bucket: pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    #[test]
    fn one_name_whatever_the_order_and_another_per_domain() {
        let a = Bucket::new("d", Some(id(&[("a", "1"), ("b", "2")])), 4096).unwrap();
        let b = Bucket::new("d", Some(id(&[("b", "2"), ("a", "1")])), 4096).unwrap();
        assert_eq!(a.digest, b.digest);
        let other = Bucket::new("e", Some(id(&[("a", "1"), ("b", "2")])), 4096).unwrap();
        assert_ne!(a.digest, other.digest);
        // Length-prefixed parts: no two ids share a name by moving a separator.
        let c = Bucket::new("d", Some(id(&[("a", "1b"), ("", "")])), 4096);
        assert!(c.is_err());
        assert_eq!(a.pairs(), [("a", "1"), ("b", "2")]);
    }

    #[test]
    fn bad_ids_are_invalid_arguments() {
        let code = |r: Result<Bucket, Status>| r.unwrap_err().code();
        assert_eq!(
            code(Bucket::new("d", None, 4096)),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(Bucket::new("d", Some(id(&[])), 4096)),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(Bucket::new("d", Some(id(&[("k", "")])), 4096)),
            tonic::Code::InvalidArgument
        );
        let long = "x".repeat(100);
        let err = Bucket::new("d", Some(id(&[("k", &long)])), 64).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().contains("over this server's limit of 64"),
            "{}",
            err.message()
        );
    }
}
