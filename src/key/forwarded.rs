//! Reading `X-Forwarded-For` and RFC 7239 `Forwarded` from the right. This module only says
//! which address each list element names; [`ClientIp`](super::ClientIp) decides whom to believe.
//!
//! The work is bounded whatever a client sends: at most [`MAX_HOPS`] elements are looked at,
//! counted from the right (the end our own proxies write), nothing is allocated, and an element
//! longer than any address is rejected before it is parsed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::HeaderValue;

/// At most this many list elements (empty ones included) are examined, from the right.
pub(crate) const MAX_HOPS: usize = 64;

/// No node (`[ffff:...:255.255.255.255]:65535`, `_obfuscated:_port`) we accept is longer.
const MAX_NODE: usize = 64;

/// The `X-Forwarded-For` hops, right to left across all header lines: the address each element
/// names, or `None` for an element that names none (`unknown`, garbage, invalid UTF-8).
pub(crate) fn x_forwarded_for<'a>(
    lines: impl DoubleEndedIterator<Item = &'a HeaderValue> + 'a,
) -> impl Iterator<Item = Option<IpAddr>> + 'a {
    elements_from_right(lines).map(node)
}

/// The `Forwarded` hops, right to left: each element's `for=` address, or `None` for an element
/// without exactly one readable `for=` naming an address (`for=unknown`, `for=_hidden`, ...).
pub(crate) fn forwarded<'a>(
    lines: impl DoubleEndedIterator<Item = &'a HeaderValue> + 'a,
) -> impl Iterator<Item = Option<IpAddr>> + 'a {
    elements_from_right(lines).map(forwarded_for)
}

/// List elements, last line first and right to left within a line, trimmed, without the empty
/// ones a list may hold (RFC 9110 §5.6.1). Commas inside quoted strings are not honoured: no
/// node contains one, so the pieces are simply unreadable.
fn elements_from_right<'a>(
    lines: impl DoubleEndedIterator<Item = &'a HeaderValue> + 'a,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    lines
        .rev()
        .flat_map(|line| line.as_bytes().rsplit(|&b| b == b','))
        .take(MAX_HOPS)
        .map(trim)
        .filter(|element| !element.is_empty())
}

/// One node: `203.0.113.7`, `203.0.113.7:80`, `2001:db8::1`, `[2001:db8::1]`,
/// `[2001:db8::1]:443` (ports may be obfuscated, `_p1`). Anything else is `None`.
pub(crate) fn node(bytes: &[u8]) -> Option<IpAddr> {
    let bytes = trim(bytes);
    if bytes.len() > MAX_NODE || !bytes.is_ascii() {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        let ip = inner.parse::<Ipv6Addr>().ok()?;
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok.then_some(IpAddr::V6(ip));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let (host, port) = text.split_once(':')?;
    let ip = host.parse::<Ipv4Addr>().ok()?;
    is_port(port).then_some(IpAddr::V4(ip))
}

fn is_port(port: &str) -> bool {
    match port.strip_prefix('_') {
        Some(obfuscated) => {
            !obfuscated.is_empty()
                && obfuscated
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        }
        None => {
            (1..=5).contains(&port.len())
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u32>().is_ok_and(|n| n <= 65_535)
        }
    }
}

/// The address of the one `for=` pair of a forwarded-element
/// (`for=192.0.2.60;proto=http;by=203.0.113.43`). Names are case-insensitive; values are
/// tokens or quoted strings; whitespace around `;` and `=` is tolerated.
fn forwarded_for(element: &[u8]) -> Option<IpAddr> {
    let mut rest = element;
    let mut found: Option<Option<IpAddr>> = None;
    loop {
        rest = trim(rest);
        match rest.split_first() {
            None => break,
            Some((b';', tail)) => {
                rest = tail;
                continue;
            }
            Some(_) => {}
        }
        let name_len = rest.iter().take_while(|&&b| is_tchar(b)).count();
        let (name, after) = rest.split_at(name_len);
        if name.is_empty() {
            return None;
        }
        let after = trim(after).strip_prefix(b"=")?;
        let (value, after) = Value::parse(trim(after))?;
        if name.eq_ignore_ascii_case(b"for") {
            if found.is_some() {
                return None; // RFC 7239 §4: a parameter occurs at most once per element.
            }
            found = Some(value.node());
        }
        rest = trim(after);
        if !rest.is_empty() && rest[0] != b';' {
            return None;
        }
    }
    found.flatten()
}

/// A parameter value, unquoted into a buffer no longer than any node; `None` when longer.
struct Value {
    buf: [u8; MAX_NODE],
    len: Option<usize>,
}

impl Value {
    /// Reads a token (up to `;`) or a quoted string from the start of `input`; returns it and
    /// what follows, or `None` for an unterminated quoted string.
    fn parse(input: &[u8]) -> Option<(Value, &[u8])> {
        let mut value = Value {
            buf: [0; MAX_NODE],
            len: Some(0),
        };
        let Some(quoted) = input.strip_prefix(b"\"") else {
            let end = input.iter().position(|&b| b == b';').unwrap_or(input.len());
            let (token, rest) = input.split_at(end);
            trim(token).iter().for_each(|&b| value.push(b));
            return Some((value, rest));
        };
        let mut bytes = quoted.iter().enumerate();
        while let Some((i, &b)) = bytes.next() {
            match b {
                b'"' => return Some((value, &quoted[i + 1..])),
                b'\\' => value.push(*bytes.next()?.1),
                _ => value.push(b),
            }
        }
        None
    }

    fn push(&mut self, b: u8) {
        self.len = self.len.and_then(|len| {
            *self.buf.get_mut(len)? = b;
            Some(len + 1)
        });
    }

    fn node(&self) -> Option<IpAddr> {
        node(&self.buf[..self.len?])
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn nodes() {
        assert_eq!(node(b" 203.0.113.7 "), ip("203.0.113.7"));
        assert_eq!(node(b"203.0.113.7:8080"), ip("203.0.113.7"));
        assert_eq!(node(b"2001:db8::1"), ip("2001:db8::1"));
        assert_eq!(node(b"[2001:db8::1]:443"), ip("2001:db8::1"));
        assert_eq!(node(b"[2001:db8::1]:_p"), ip("2001:db8::1"));
        for bad in [
            &b""[..],
            b"unknown",
            b"_hidden",
            b"999.1.1.1",
            b"1.2.3.4:",
            b"1.2.3.4:65536",
            b"[1.2.3.4]",
            b"[2001:db8::1",
            b"[2001:db8::1]x",
            b"1.2.3.4:80:80",
            b"\xff",
            b"fe80::1%eth0",
            b"\"1.2.3.4\"",
        ] {
            assert_eq!(node(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn forwarded_elements() {
        assert_eq!(
            forwarded_for(b"for=192.0.2.60;proto=http;by=203.0.113.43"),
            ip("192.0.2.60")
        );
        assert_eq!(
            forwarded_for(b"proto=http; For = \"[2001:db8::1]:4711\" ;"),
            ip("2001:db8::1")
        );
        assert_eq!(forwarded_for(b"for=\"\\1.2.3.4\""), ip("1.2.3.4"));
        assert_eq!(forwarded_for(b"FOR=1.2.3.4:80"), ip("1.2.3.4"));
        for bad in [
            &b"for=unknown"[..],
            b"for=_hidden",
            b"proto=http",
            b"for=1.2.3.4;for=5.6.7.8",
            b"for=\"1.2.3.4",
            b"for=\"1.2.3.4\"x",
            b"=1.2.3.4",
            b"for",
            b"by=1.2.3.4",
        ] {
            assert_eq!(
                forwarded_for(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = [b"for=\"".as_slice(), &[b'1'; 100], b"\""].concat();
        assert_eq!(forwarded_for(&long), None);
    }

    #[test]
    fn lines_are_read_right_to_left_and_bounded() {
        let lines = [
            HeaderValue::from_static("1.1.1.1, 2.2.2.2"),
            HeaderValue::from_static(" ,3.3.3.3,,"),
        ];
        let hops: Vec<_> = x_forwarded_for(lines.iter()).collect();
        assert_eq!(hops, [ip("3.3.3.3"), ip("2.2.2.2"), ip("1.1.1.1")]);
        let many = HeaderValue::from_str(&"9.9.9.9,".repeat(10_000)).unwrap();
        assert_eq!(
            x_forwarded_for(std::iter::once(&many)).count(),
            MAX_HOPS - 1
        );
    }
}
