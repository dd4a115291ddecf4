//! Redis URLs as they may be shown: scheme, host and port (a socket's path), never a user, a
//! password, a database or a query.

use std::fmt;

/// Shows a Redis URL without its credentials: `redis://:secret@host:6379/2` shows as
/// `redis://host:6379`, `unix:///run/redis.sock?pass=secret` as `unix:///run/redis.sock`, and
/// text that does not look like a URL as `<invalid url>` (it might be a mistyped secret).
#[derive(Clone, Copy)]
pub(super) struct Redacted<'a>(pub(super) &'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match parse(self.0) {
            Some((scheme, place)) => write!(f, "{scheme}://{place}"),
            None => f.write_str("<invalid url>"),
        }
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// The scheme and the part that may be shown (host and port, or a socket's path).
fn parse(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return None;
    }
    // Everything up to the last `@` is a user and a password, even if they hold `/`, `?` or
    // `#` that a parser would take for the end of the authority.
    let rest = rest.rsplit_once('@').map_or(rest, |(_, after)| after);
    let end = |c: char| c == '?' || c == '#';
    if scheme.ends_with("unix") {
        let path = rest.split(end).next().unwrap_or_default();
        let path_ok = path.starts_with('/') && !path.chars().any(|c| c.is_control() || c == ' ');
        return path_ok.then_some((scheme, path));
    }
    let place = rest
        .split(|c| c == '/' || end(c))
        .next()
        .unwrap_or_default();
    let place_ok = !place.is_empty()
        && place
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_:[]%".contains(c));
    place_ok.then_some((scheme, place))
}

/// The credentials `url` carries (its password, raw and percent-decoded, and a socket URL's
/// `pass=`), to scrub from text a client library wrote.
fn secrets(url: &str) -> Vec<String> {
    let mut found = vec![url.to_owned()];
    if let Some((_, rest)) = url.split_once("://") {
        if let Some((userinfo, _)) = rest.rsplit_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            found.push(password.to_owned());
            found.push(percent_decoded(password));
        }
        if let Some((_, query)) = rest.split_once('?') {
            for pair in query.split('&') {
                if let Some(password) = pair.strip_prefix("pass=") {
                    found.push(password.to_owned());
                    found.push(percent_decoded(password));
                }
            }
        }
    }
    found.retain(|s| !s.is_empty());
    // The longest first, so a URL goes whole before its password inside it.
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found
}

/// `text` with every credential of `urls` replaced by `***`.
pub(super) fn scrub<'a>(text: &str, urls: impl IntoIterator<Item = &'a str>) -> String {
    let mut text = text.to_owned();
    for url in urls {
        for secret in secrets(url) {
            text = text.replace(&secret, "***");
        }
    }
    text
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(url: &str) -> String {
        Redacted(url).to_string()
    }

    #[test]
    fn credentials_are_dropped() {
        assert_eq!(
            shown("redis://user:secret@10.0.0.5:6379/2"),
            "redis://10.0.0.5:6379"
        );
        assert_eq!(shown("redis://:secret@cache:6380"), "redis://cache:6380");
        assert_eq!(shown("rediss://user@cache"), "rediss://cache");
        assert_eq!(shown("redis://[::1]:6379"), "redis://[::1]:6379");
        assert_eq!(
            shown("redis://127.0.0.1:6379/?protocol=resp3#x"),
            "redis://127.0.0.1:6379"
        );
    }

    #[test]
    fn a_password_with_separators_goes_whole() {
        assert_eq!(shown("redis://:p/a?s#s@host:1"), "redis://host:1");
        assert_eq!(shown("redis://u:p@ss@host:1"), "redis://host:1");
    }

    #[test]
    fn unix_sockets_show_their_path_only() {
        assert_eq!(
            shown("unix:///run/redis.sock?db=1&pass=secret"),
            "unix:///run/redis.sock"
        );
        assert_eq!(
            shown("redis+unix:///tmp/r.sock#frag"),
            "redis+unix:///tmp/r.sock"
        );
    }

    #[test]
    fn garbage_is_not_echoed() {
        for garbage in [
            "",
            "not a url",
            "secret",
            "redis:/host",
            "://host",
            "redis://",
            "redis://:secret@",
            "redis://ho st:1",
            "1redis://host",
            "unix://relative?pass=secret",
        ] {
            assert_eq!(shown(garbage), "<invalid url>", "{garbage:?}");
        }
    }

    #[test]
    fn debug_is_quoted() {
        assert_eq!(
            format!("{:?}", Redacted("redis://:s@h:1")),
            "\"redis://h:1\""
        );
    }

    #[test]
    fn scrub_removes_urls_and_passwords() {
        let url = "redis://user:p%40ss@host:1";
        let text = format!("bad {url} with p%40ss and p@ss");
        assert_eq!(scrub(&text, [url]), "bad *** with *** and ***");
        let socket = "unix:///s.sock?pass=hunter2";
        assert_eq!(scrub("auth hunter2", [socket]), "auth ***");
        assert_eq!(scrub("no secret here", ["redis://h:1"]), "no secret here");
    }
}
