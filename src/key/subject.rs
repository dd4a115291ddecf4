//! The authenticated user, as an upstream auth layer recorded it in the request's extensions.

use http::Extensions;
use http::request::Parts;

use super::{ClientPart, ClientSpec, Key, KeyExtractor};

/// A request extension naming the authenticated user. Implement it for the type your auth
/// layer inserts after it has *verified* the credentials, or insert a [`VerifiedSubject`].
///
/// ```
/// use redlimit::key::{AuthenticatedSubject, Subject};
///
/// #[derive(Clone)]
/// struct User { id: String, admin: bool }
///
/// impl AuthenticatedSubject for User {
///     fn subject(&self) -> &str { &self.id }
/// }
///
/// let key = Subject::from_extension::<User>();
/// ```
pub trait AuthenticatedSubject: Send + Sync + 'static {
    /// The user's stable identifier (a user ID, a JWT `sub`); empty means no subject.
    fn subject(&self) -> &str;
}

/// The verified subject of a request, for auth layers without a user type of their own:
/// insert it into the request's extensions once the credentials are verified.
///
/// ```
/// use redlimit::key::{Subject, VerifiedSubject};
/// use redlimit::KeyExtractor;
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(VerifiedSubject("user-42".into()));
/// let (parts, _) = req.into_parts();
/// assert_eq!(Subject::verified().extract(&parts).unwrap().as_str(), "sub:user-42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifiedSubject(pub String);

impl AuthenticatedSubject for VerifiedSubject {
    fn subject(&self) -> &str {
        &self.0
    }
}

/// Keys on the authenticated user (`sub:user-42`), read from a request extension that an auth
/// layer *before* the rate-limit layer inserted. Nothing here reads credentials: a subject
/// taken from an unverified token would let a client spend someone else's quota (for bearer
/// tokens verified here, see `Jwt`, behind the `jwt` feature).
///
/// A request without the extension, or with an empty subject, has no key; the layer's
/// [`MissingKey`](crate::layer::MissingKey) setting decides (the peer IP by default, a `500`
/// when the server records no peer address; or `MissingKey::Reject(StatusCode::UNAUTHORIZED)`).
/// Any subject is safe in Redis: it is encoded, and digested when long.
///
/// ```
/// use std::time::Duration;
/// use redlimit::key::Subject;
/// use redlimit::store::MemoryStore;
/// use redlimit::{Limit, Policy, RateLimitLayer};
///
/// let policy = Policy::new("api", [Limit::gcra(100, Duration::from_secs(60))?])?;
/// let layer = RateLimitLayer::builder(MemoryStore::new(), policy)
///     .key(Subject::verified())
///     .build()?; // an auth layer outside this one inserts `VerifiedSubject`
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone, Copy)]
pub struct Subject {
    read: for<'a> fn(&'a Extensions) -> Option<&'a str>,
    type_name: &'static str,
}

impl Subject {
    /// Reads the subject from a [`VerifiedSubject`] extension.
    ///
    /// ```
    /// let key = redlimit::key::Subject::verified();
    /// ```
    pub fn verified() -> Self {
        Subject::from_extension::<VerifiedSubject>()
    }

    /// Reads the subject from an extension of type `T`.
    ///
    /// ```
    /// use redlimit::key::{Subject, VerifiedSubject};
    /// use redlimit::KeyExtractor;
    /// let key = Subject::from_extension::<VerifiedSubject>();
    /// let (parts, _) = http::Request::new(()).into_parts();
    /// assert!(key.extract(&parts).is_none());
    /// ```
    pub fn from_extension<T: AuthenticatedSubject>() -> Self {
        Subject {
            read: |extensions| extensions.get::<T>().map(T::subject),
            type_name: std::any::type_name::<T>(),
        }
    }
}

impl Default for Subject {
    fn default() -> Self {
        Subject::verified()
    }
}

impl std::fmt::Debug for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Subject").field(&self.type_name).finish()
    }
}

impl KeyExtractor for Subject {
    fn extract(&self, parts: &Parts) -> Option<Key> {
        let subject = (self.read)(&parts.extensions)?;
        if subject.is_empty() {
            return None;
        }
        Some(claim_key("sub", subject.as_bytes()))
    }

    fn client_key(&self, client: &[ClientPart]) -> Option<Key> {
        ClientPart::only(client, ClientSpec::Claim("sub"))
            .map(|part| claim_key("sub", part.value()))
    }
}

/// The key of a verified claim's text under `namespace` (`sub`, `claim:tenant`): what
/// [`Subject`], `Jwt` and an operator's name share.
pub(crate) fn claim_key(namespace: &str, value: &[u8]) -> Key {
    Key::new(value).namespaced(namespace)
}
