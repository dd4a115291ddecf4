//! The key a quota is counted under, safe to embed in a Redis key whatever its source.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use smallvec::SmallVec;

/// Encoded keys longer than this are replaced by a digest, so Redis keys stay bounded.
const MAX_LEN: usize = 128;

/// A rate-limit key: what a quota is counted under (`ip:203.0.113.7`, a hashed API key, ...).
///
/// Whatever bytes it is made from (braces, spaces, newlines, invalid UTF-8, 64 KiB), the text
/// is safe to put inside a Redis key's `{hash tag}`: bytes outside `A-Z a-z 0-9 . _ - : / @`
/// are percent-encoded, and a text longer than 128 bytes is replaced by `#` and a SHA-256
/// digest. Distinct inputs give distinct keys (up to the digest's collision resistance), and
/// no key can contain `{` or `}`.
///
/// ```
/// use redlimit::Key;
/// assert_eq!(Key::new("ip:203.0.113.7").as_str(), "ip:203.0.113.7");
/// assert_eq!(Key::new("a b{c}").as_str(), "a%20b%7Bc%7D");
/// assert!(Key::new(vec![b'x'; 65_536]).as_str().len() <= 65);
/// ```
///
/// A key may also name other keys for some limits of a policy ([`with_limit_key`](Self::with_limit_key)):
/// a hierarchical quota, per API key *and* per tenant *and* global, checked in one call.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub(super) text: Arc<str>,
    /// The keys of limits counted under a key of their own.
    pub(super) limits: Option<Arc<super::limit_keys::LimitKeys>>,
}

impl Key {
    /// A key from any bytes, encoded as described above.
    ///
    /// ```
    /// use redlimit::Key;
    /// assert_eq!(Key::new(b"\xff\n").as_str(), "%FF%0A");
    /// ```
    pub fn new(text: impl AsRef<[u8]>) -> Self {
        let bytes = text.as_ref();
        let mut buf = Buf::new();
        if !encode(&mut buf, bytes) {
            return Key::digest(b"raw:", bytes);
        }
        if buf.is_empty() {
            buf.push(b'%');
        }
        Key::from_ascii(&buf)
    }

    /// `namespace:text` in one step, with exactly the result of
    /// `Key::new(text).namespaced(namespace)` (one allocation instead of several).
    pub(crate) fn in_namespace(namespace: &str, text: &[u8]) -> Self {
        let mut buf = Buf::new();
        let fits = encode(&mut buf, namespace.as_bytes()) && !buf.is_empty() && {
            buf.push(b':');
            let before = buf.len();
            encode(&mut buf, text) && buf.len() > before
        };
        if !fits {
            return Key::new(text).namespaced(namespace);
        }
        if buf.len() > MAX_LEN {
            return Key::digest(b"joined:", &buf);
        }
        Key::from_ascii(&buf)
    }

    /// The key whose encoded text is `text` (what [`Display`](std::fmt::Display) shows, what an
    /// extractor produced, limit keys included): for admin tools that receive a key as text.
    /// `None` for text no key can have (empty, too long, with a character encoding never
    /// produces, or limit keys out of order or past [`MAX_LIMITS`](crate::MAX_LIMITS)).
    ///
    /// ```
    /// use redlimit::Key;
    /// let key = Key::new("a b");
    /// assert_eq!(Key::from_encoded(key.as_str()), Some(key));
    /// assert_eq!(Key::from_encoded("ip:127.0.0.1").unwrap().as_str(), "ip:127.0.0.1");
    /// assert_eq!(Key::from_encoded("a{b}"), None);
    /// assert_eq!(Key::from_encoded(""), None);
    /// // A key with limit keys, as it displays.
    /// let tenant = Key::new("api").with_limit_key(1, Key::new("tenant:acme"));
    /// assert_eq!(tenant.to_string(), "api;1=tenant:acme");
    /// assert_eq!(Key::from_encoded("api;1=tenant:acme"), Some(tenant));
    /// ```
    pub fn from_encoded(text: &str) -> Option<Self> {
        let mut parts = text.split(';');
        let mut key = Key::from_encoded_one(parts.next()?)?;
        for part in parts {
            let (position, limit_key) = part.split_once('=')?;
            let position: usize = position.parse().ok()?;
            if position >= crate::policy::MAX_LIMITS || key.limit_keys().any(|(p, _)| p >= position)
            {
                return None;
            }
            key = key.with_limit_key(position, Key::from_encoded_one(limit_key)?);
        }
        Some(key)
    }

    /// One key's text, with no limit keys.
    fn from_encoded_one(text: &str) -> Option<Self> {
        let valid = !text.is_empty()
            && text.len() <= 2 * MAX_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_:/@%+#".contains(&b));
        valid.then(|| Key::from_ascii(text.as_bytes()))
    }

    /// A key of bytes that are already encoded (ASCII by construction).
    fn from_ascii(bytes: &[u8]) -> Self {
        Key::from_text(Arc::from(std::str::from_utf8(bytes).unwrap_or("%")))
    }

    pub(super) fn from_text(text: Arc<str>) -> Self {
        Key { text, limits: None }
    }

    /// A key from a secret (an API key, a token): only a digest of it reaches Redis.
    ///
    /// ```
    /// use redlimit::Key;
    /// let k = Key::hashed("sk_live_123");
    /// assert!(k.as_str().starts_with('#'));
    /// assert!(!k.as_str().contains("sk_live"));
    /// assert_eq!(k, Key::hashed("sk_live_123"));
    /// ```
    pub fn hashed(secret: impl AsRef<[u8]>) -> Self {
        Key::digest(b"secret:", secret.as_ref())
    }

    /// `#` and 128 bits of SHA-256, hex: `#` never appears in an encoded key, so a digest
    /// cannot collide with a literal.
    fn digest(domain: &[u8], bytes: &[u8]) -> Self {
        let sum = Sha256::new()
            .chain_update(domain)
            .chain_update(bytes)
            .finalize();
        let mut out = Buf::new();
        out.push(b'#');
        for b in &sum[..16] {
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 15)]);
        }
        Key::from_ascii(&out)
    }

    /// Prefixes the key with a namespace (`ip`, `route`, ...), keeping it encoded.
    ///
    /// ```
    /// use redlimit::Key;
    /// assert_eq!(Key::new("1.2.3.4").namespaced("ip").as_str(), "ip:1.2.3.4");
    /// ```
    #[must_use]
    pub fn namespaced(&self, namespace: &str) -> Self {
        Key::concat(&Key::new(namespace), b':', self)
    }

    /// Joins two keys: `a+b` (`+` never appears in an encoded key, so the join is unambiguous).
    ///
    /// ```
    /// use redlimit::Key;
    /// assert_eq!(Key::new("a").join(&Key::new("b")).as_str(), "a+b");
    /// ```
    #[must_use]
    pub fn join(&self, other: &Key) -> Self {
        Key::concat(self, b'+', other)
    }

    fn concat(a: &Key, sep: u8, b: &Key) -> Self {
        let mut joined = Buf::new();
        joined.extend_from_slice(a.text.as_bytes());
        joined.push(sep);
        joined.extend_from_slice(b.text.as_bytes());
        if joined.len() > MAX_LEN {
            Key::digest(b"joined:", &joined)
        } else {
            Key::from_ascii(&joined)
        }
    }

    /// The encoded text, as it appears in the Redis key.
    ///
    /// ```
    /// assert_eq!(redlimit::Key::new("x").as_str(), "x");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A key under construction, on the stack: encoding stops past `MAX_LEN`.
type Buf = SmallVec<[u8; 2 * MAX_LEN + 8]>;

/// Percent-encodes `bytes` onto `buf`; `false` when the result would hold more than `MAX_LEN`
/// bytes (then `buf` holds a part of it, and at most `MAX_LEN + 3` bytes were examined past what
/// fits). Runs of bytes kept as they are are copied at once: a key is mostly such bytes.
fn encode(buf: &mut Buf, bytes: &[u8]) -> bool {
    let mut rest = bytes;
    loop {
        let Some(room) = MAX_LEN.checked_sub(buf.len()) else {
            return false;
        };
        // One byte past the room is enough to know the run does not fit.
        let window = &rest[..rest.len().min(room + 1)];
        let run = window
            .iter()
            .position(|&b| !PLAIN[usize::from(b)])
            .unwrap_or(window.len());
        if run > room {
            return false;
        }
        buf.extend_from_slice(&rest[..run]);
        let Some((&b, tail)) = rest[run..].split_first() else {
            return true;
        };
        if room - run < 3 {
            return false;
        }
        buf.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        rest = tail;
    }
}

/// The bytes a key keeps as they are: `A-Z a-z 0-9 . _ - : / @`.
const PLAIN: [bool; 256] = {
    let mut plain = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        plain[b] =
            c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b':' | b'/' | b'@');
        b += 1;
    }
    plain
};

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", self.to_string())
    }
}

/// The text, then `;position=key` for each limit counted under a key of its own
/// (`#1a2b;1=tenant:acme;2=global`): what [`Key::from_encoded`] reads back.
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)?;
        for (position, key) in self.limit_keys() {
            write!(f, ";{position}={}", key.text)?;
        }
        Ok(())
    }
}

/// [`Key::new`] of the text: what the client side's
/// [`Limiter::acquire`](crate::limiter::Limiter::acquire) takes.
///
/// ```
/// use redlimit::Key;
/// assert_eq!(Key::from("api.example.com"), Key::new("api.example.com"));
/// ```
impl From<&str> for Key {
    fn from(text: &str) -> Self {
        Key::new(text)
    }
}

/// [`Key::new`] of the text.
///
/// ```
/// use redlimit::Key;
/// assert_eq!(Key::from(String::from("tenant:7")), Key::new("tenant:7"));
/// ```
impl From<String> for Key {
    fn from(text: String) -> Self {
        Key::new(text)
    }
}

/// A clone of the key.
///
/// ```
/// use redlimit::Key;
/// let key = Key::new("k");
/// assert_eq!(Key::from(&key), key);
/// ```
impl From<&Key> for Key {
    fn from(key: &Key) -> Self {
        key.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_contains_braces_or_separators() {
        for input in [
            &b"{}"[..],
            b"}{",
            b"a}b{c",
            b"%7B",
            b"+",
            b"#x",
            b"\0\r\n ",
            b"",
        ] {
            let k = Key::new(input);
            assert!(
                !k.as_str().contains(['{', '}', '+', '#', ' ', '\n']),
                "{k:?}"
            );
            assert!(!k.as_str().is_empty());
        }
    }

    #[test]
    fn distinct_inputs_stay_distinct() {
        assert_ne!(Key::new("%41"), Key::new("A"));
        assert_ne!(Key::new(""), Key::new("%"));
        let long_a = vec![b'a'; 200];
        let mut long_b = long_a.clone();
        long_b[199] = b'b';
        assert_ne!(Key::new(&long_a), Key::new(&long_b));
        assert_ne!(Key::hashed("x"), Key::new("x"));
    }

    #[test]
    fn in_namespace_is_new_then_namespaced() {
        let long = vec![b'x'; 126];
        let longer = vec![b'y'; 200];
        for (ns, text) in [
            ("ip", &b"10.0.0.1"[..]),
            ("ip", b""),
            ("h", &long),
            ("h", &longer),
            ("x y", b"{}"),
            ("", b"a"),
        ] {
            assert_eq!(
                Key::in_namespace(ns, text),
                Key::new(text).namespaced(ns),
                "{ns} {text:?}"
            );
        }
    }

    /// The encoding byte by byte, as documented on [`Key`]: what `encode` must equal.
    fn encoded_one_by_one(bytes: &[u8]) -> Option<String> {
        let mut out = String::new();
        for &b in bytes {
            if b.is_ascii_alphanumeric() || b".-_:/@".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        (out.len() <= MAX_LEN).then_some(out)
    }

    #[test]
    fn encode_copies_runs_as_the_byte_by_byte_encoding_would() {
        // Every byte value, and lengths around the bound with escapes at every place near it.
        let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b'a', b, b'z']).collect();
        for len in [0, 1, 124, 125, 126, 127, 128, 129, 130, 300] {
            inputs.push(vec![b'k'; len]);
            for at in len.saturating_sub(4)..len {
                let mut v = vec![b'k'; len];
                v[at] = b' ';
                inputs.push(v);
            }
        }
        for prefix in [0, 1, 127, 128, 129] {
            for input in &inputs {
                let mut buf = Buf::new();
                buf.extend(std::iter::repeat_n(b'p', prefix));
                let whole = [vec![b'p'; prefix], input.clone()].concat();
                let expected = encoded_one_by_one(&whole);
                let fits = encode(&mut buf, input);
                assert_eq!(fits, expected.is_some(), "{prefix} {input:?}");
                if let Some(expected) = expected {
                    assert_eq!(std::str::from_utf8(&buf).ok(), Some(&*expected));
                }
            }
        }
    }

    #[test]
    fn bounded_length() {
        assert_eq!(Key::new(vec![0xffu8; 1 << 16]).as_str().len(), 33);
        assert!(Key::new(vec![b'a'; 128]).as_str().len() == 128);
        let a = Key::new(vec![b'a'; 100]);
        assert_eq!(a.join(&a).as_str().len(), 33);
    }
}
