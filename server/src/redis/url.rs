//! The URLs of a Redis the variables describe: `host:port` or a socket path as
//! `*_SOCKET_TYPE` says, with `*_AUTH`'s credentials percent-encoded.

use super::Target;
use crate::settings::SocketType;

/// A single server's URL: a full URL as given, else `host:port` or a socket path as
/// `*_SOCKET_TYPE` says.
pub(super) fn single_url(target: &Target<'_>) -> Result<String, String> {
    let url = target.url.trim();
    if ["redis://", "rediss://", "unix://", "redis+unix://"]
        .iter()
        .any(|scheme| url.starts_with(scheme))
    {
        return Ok(url.to_owned());
    }
    match target.socket_type {
        SocketType::Tcp => tcp_url(target, url, target.auth),
        SocketType::Unix => {
            let mut full = format!("redis+unix://{url}");
            if let Some(auth) = target.auth {
                let (user, password) = split_auth(auth);
                full.push_str("?pass=");
                full.push_str(&encode(password));
                if let Some(user) = user {
                    full.push_str("&user=");
                    full.push_str(&encode(user));
                }
            }
            Ok(full)
        }
    }
}

/// `host:port` of `target` as a `redis://` (or `rediss://`) URL with the credentials `auth`.
pub(super) fn tcp_url(
    target: &Target<'_>,
    node: &str,
    auth: Option<&str>,
) -> Result<String, String> {
    if node.is_empty() || node.contains('/') || !node.contains(':') {
        return Err(format!("{}_URL: `{node}` is not host:port", target.var));
    }
    let scheme = if target.tls { "rediss" } else { "redis" };
    let credentials = match auth.map(split_auth) {
        None => String::new(),
        Some((None, password)) => format!(":{}@", encode(password)),
        Some((Some(user), password)) => format!("{}:{}@", encode(user), encode(password)),
    };
    Ok(format!("{scheme}://{credentials}{node}"))
}

/// `REDIS_AUTH`: `password`, or `user:password` (Redis 6 ACL users).
fn split_auth(auth: &str) -> (Option<&str>, &str) {
    match auth.split_once(':') {
        Some((user, password)) => (Some(user), password),
        None => (None, auth),
    }
}

/// Percent-encodes everything but unreserved characters, for the userinfo or a query value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
