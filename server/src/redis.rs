//! The store the settings describe: Redis as envoyproxy/ratelimit's `REDIS_*` variables name
//! it, or this process's memory.

use std::sync::Arc;

use redlimit::store::{LocalFirstStore, MemoryStore, RedisStore, RedisStoreBuilder, Store};

use crate::settings::{Backend, RedisType, Settings, SocketType};

/// The secrets, read from the environment only (never flags: they would show in `ps`).
#[derive(Default)]
pub(crate) struct Secrets {
    /// `REDIS_AUTH`: `password` or `user:password`.
    pub(crate) auth: Option<String>,
    /// `REDIS_SENTINEL_AUTH`: the Sentinels' password.
    pub(crate) sentinel_auth: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .field(
                "sentinel_auth",
                &self.sentinel_auth.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Secrets {
    /// `REDIS_AUTH` and `REDIS_SENTINEL_AUTH` from the environment (an empty one is unset).
    pub(crate) fn from_env() -> Self {
        let read = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        Secrets {
            auth: read("REDIS_AUTH"),
            sentinel_auth: read("REDIS_SENTINEL_AUTH"),
        }
    }
}

/// The store: Redis connected lazily (the server starts while Redis is down, and answers
/// by its failure mode until Redis does), in local-first mode with `REDLIMIT_LOCAL_FIRST`;
/// or memory.
pub(crate) fn store(settings: &Settings, secrets: &Secrets) -> Result<Arc<dyn Store>, String> {
    if settings.backend_type == Backend::Memory {
        if settings.local_first {
            return Err("REDLIMIT_LOCAL_FIRST needs BACKEND_TYPE=redis".to_owned());
        }
        return Ok(Arc::new(MemoryStore::new()));
    }
    let mut builder = builder(settings, secrets)?.connect_timeout(settings.redis_timeout);
    // Empty, as the Go service's default: redlimit's own prefix.
    if !settings.cache_key_prefix.is_empty() {
        builder = builder.prefix(settings.cache_key_prefix.clone());
    }
    if let Some(path) = &settings.redis_tls_cacert {
        let pem = std::fs::read(path)
            .map_err(|e| format!("REDIS_TLS_CACERT: cannot read {}: {e}", path.display()))?;
        builder = builder.tls_root_certificate(pem);
    }
    builder = tls(builder, settings)?;
    let store = builder
        .connect_lazy()
        .map_err(|e| format!("REDIS_URL, CACHE_KEY_PREFIX or REDIS_TLS_*: {e}"))?;
    if settings.local_first {
        let store = LocalFirstStore::builder(store)
            .interval(settings.local_first_sync)
            .build()
            .map_err(|e| format!("REDLIMIT_LOCAL_FIRST_SYNC: {e}"))?;
        return Ok(Arc::new(store));
    }
    Ok(Arc::new(store))
}

/// `REDIS_TLS_CLIENT_CERT` and `_KEY` (both, as the Go service reads them) and
/// `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`, when Redis is reached over TLS (the Go service reads
/// them only then).
fn tls(mut builder: RedisStoreBuilder, settings: &Settings) -> Result<RedisStoreBuilder, String> {
    let over_tls = settings.redis_tls || settings.redis_url.trim().starts_with("rediss://");
    if !over_tls {
        return Ok(builder);
    }
    match (
        &settings.redis_tls_client_cert,
        &settings.redis_tls_client_key,
    ) {
        (Some(cert), Some(key)) => {
            let read = |name: &str, path: &std::path::Path| {
                std::fs::read(path)
                    .map_err(|e| format!("{name}: cannot read {}: {e}", path.display()))
            };
            builder = builder.tls_client_certificate(
                read("REDIS_TLS_CLIENT_CERT", cert)?,
                read("REDIS_TLS_CLIENT_KEY", key)?,
            );
        }
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => {
            return Err(
                "REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY go together: set both or neither"
                    .to_owned(),
            );
        }
    }
    if settings.redis_tls_skip_hostname_verification {
        let warning = "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION is on: Redis's certificate is \
                       accepted for any name (its chain is still verified): any certificate of \
                       its authority passes";
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
        builder = builder.tls_skip_hostname_verification(true);
    }
    Ok(builder)
}

fn builder(settings: &Settings, secrets: &Secrets) -> Result<RedisStoreBuilder, String> {
    let url = settings.redis_url.trim();
    match settings.redis_type {
        RedisType::Single => Ok(RedisStore::builder(single_url(settings, secrets)?)),
        RedisType::Cluster => {
            let nodes = url
                .split(',')
                .map(|node| tcp_url(node.trim(), settings.redis_tls, secrets.auth.as_deref()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RedisStore::cluster(nodes))
        }
        RedisType::Sentinel => {
            let mut parts = url.split(',').map(str::trim);
            let master = parts.next().filter(|m| !m.is_empty()).ok_or(
                "REDIS_URL: a Sentinel URL is `master,host:port[,host:port...]`".to_owned(),
            )?;
            if secrets.auth.is_some() {
                return Err(
                    "REDIS_AUTH with REDIS_TYPE=sentinel: a password for the master \
                            is not supported yet (REDIS_SENTINEL_AUTH is the Sentinels')"
                        .to_owned(),
                );
            }
            let sentinels = parts
                .map(|node| tcp_url(node, settings.redis_tls, secrets.sentinel_auth.as_deref()))
                .collect::<Result<Vec<_>, _>>()?;
            if sentinels.is_empty() {
                return Err("REDIS_URL: no Sentinel after the master's name".to_owned());
            }
            Ok(RedisStore::sentinel(sentinels, master))
        }
    }
}

/// A single server's URL: a full URL as given, else `host:port` or a socket path as
/// `REDIS_SOCKET_TYPE` says.
fn single_url(settings: &Settings, secrets: &Secrets) -> Result<String, String> {
    let url = settings.redis_url.trim();
    if ["redis://", "rediss://", "unix://", "redis+unix://"]
        .iter()
        .any(|scheme| url.starts_with(scheme))
    {
        return Ok(url.to_owned());
    }
    match settings.redis_socket_type {
        SocketType::Tcp => tcp_url(url, settings.redis_tls, secrets.auth.as_deref()),
        SocketType::Unix => {
            let mut full = format!("redis+unix://{url}");
            if let Some(auth) = &secrets.auth {
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

/// `host:port` as a `redis://` (or `rediss://`) URL with the credentials.
fn tcp_url(node: &str, tls: bool, auth: Option<&str>) -> Result<String, String> {
    if node.is_empty() || node.contains('/') || !node.contains(':') {
        return Err(format!("REDIS_URL: `{node}` is not host:port"));
    }
    let scheme = if tls { "rediss" } else { "redis" };
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::time::Duration;

    fn settings(args: &[&str]) -> Settings {
        Settings::try_parse_from(std::iter::once("redlimit-server").chain(args.iter().copied()))
            .unwrap()
    }

    #[test]
    fn a_single_tcp_server_with_a_password_and_a_user() {
        let s = settings(&["--redis-socket-type", "tcp", "--redis-url", "10.0.0.1:6379"]);
        let secrets = Secrets {
            auth: Some("app:p@ss word".into()),
            sentinel_auth: None,
        };
        assert_eq!(
            single_url(&s, &secrets).unwrap(),
            "redis://app:p%40ss%20word@10.0.0.1:6379"
        );
        let plain = Secrets {
            auth: Some("secret".into()),
            sentinel_auth: None,
        };
        assert_eq!(
            single_url(&s, &plain).unwrap(),
            "redis://:secret@10.0.0.1:6379"
        );
    }

    #[test]
    fn a_unix_socket_and_a_full_url_as_given() {
        let s = settings(&["--redis-url", "/run/redis.sock"]);
        assert_eq!(
            single_url(&s, &Secrets::default()).unwrap(),
            "redis+unix:///run/redis.sock"
        );
        let s = settings(&["--redis-url", "rediss://h:6380/2"]);
        assert_eq!(
            single_url(&s, &Secrets::default()).unwrap(),
            "rediss://h:6380/2"
        );
    }

    #[test]
    fn malformed_urls_are_refused_with_the_variable_named() {
        let s = settings(&["--redis-socket-type", "tcp", "--redis-url", "nohostport"]);
        assert!(
            single_url(&s, &Secrets::default())
                .unwrap_err()
                .starts_with("REDIS_URL")
        );
        let s = settings(&["--redis-type", "sentinel", "--redis-url", "mymaster"]);
        assert!(
            builder(&s, &Secrets::default())
                .unwrap_err()
                .contains("no Sentinel")
        );
        let s = settings(&["--redis-type", "cluster", "--redis-url", "a:1,,b:2"]);
        assert!(builder(&s, &Secrets::default()).is_err());
    }

    #[tokio::test]
    async fn local_first_wraps_the_redis_store_at_its_sync_interval() {
        let redis = ["--redis-socket-type", "tcp", "--redis-url", "127.0.0.1:1"];
        let with = |extra: &[&'static str]| settings(&[&redis[..], extra].concat());
        let exact = store(&with(&[]), &Secrets::default()).unwrap();
        assert_eq!(exact.kind(), "redis");
        let on = with(&["--local-first", "--local-first-sync", "50ms"]);
        assert_eq!(on.local_first_sync, Duration::from_millis(50));
        assert_eq!(
            store(&on, &Secrets::default()).unwrap().kind(),
            "local_first"
        );
        let never = with(&["--local-first", "--local-first-sync", "0s"]);
        let refused = store(&never, &Secrets::default()).err().expect("refused");
        assert!(
            refused.starts_with("REDLIMIT_LOCAL_FIRST_SYNC"),
            "{refused}"
        );
        let memory = settings(&["--backend-type", "memory", "--local-first"]);
        let refused = store(&memory, &Secrets::default()).err().expect("refused");
        assert!(refused.starts_with("REDLIMIT_LOCAL_FIRST"), "{refused}");
    }
}
