//! The stores the settings describe: Redis as envoyproxy/ratelimit's `REDIS_*` variables name
//! it (and the per-second Redis, `REDIS_PERSECOND_*`), or this process's memory.

mod url;

use std::sync::Arc;
use std::time::Duration;

use redlimit::store::{LocalFirstStore, MemoryStore, RedisStore, RedisStoreBuilder, Store};

use crate::settings::{Backend, RedisType, Settings, SocketType};
use url::{single_url, tcp_url};

/// The secrets, read from the environment only (never flags: they would show in `ps`).
#[derive(Default)]
pub(crate) struct Secrets {
    /// `REDIS_AUTH`: `password` or `user:password`.
    pub(crate) auth: Option<String>,
    /// `REDIS_SENTINEL_AUTH`: the Sentinels' password.
    pub(crate) sentinel_auth: Option<String>,
    /// `REDIS_PERSECOND_AUTH`: the per-second Redis's.
    pub(crate) per_second_auth: Option<String>,
    /// `REDIS_PERSECOND_SENTINEL_AUTH`: the per-second Redis's Sentinels'.
    pub(crate) per_second_sentinel_auth: Option<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |secret: &Option<String>| secret.as_ref().map(|_| "<redacted>");
        f.debug_struct("Secrets")
            .field("auth", &redacted(&self.auth))
            .field("sentinel_auth", &redacted(&self.sentinel_auth))
            .field("per_second_auth", &redacted(&self.per_second_auth))
            .field(
                "per_second_sentinel_auth",
                &redacted(&self.per_second_sentinel_auth),
            )
            .finish()
    }
}

impl Secrets {
    /// `REDIS_AUTH`, `REDIS_SENTINEL_AUTH` and their `REDIS_PERSECOND_` twins from the
    /// environment (an empty one is unset).
    pub(crate) fn from_env() -> Self {
        let read = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        Secrets {
            auth: read("REDIS_AUTH"),
            sentinel_auth: read("REDIS_SENTINEL_AUTH"),
            per_second_auth: read("REDIS_PERSECOND_AUTH"),
            per_second_sentinel_auth: read("REDIS_PERSECOND_SENTINEL_AUTH"),
        }
    }
}

/// One Redis as the variables describe it: the main one (`REDIS_*`) or the per-second one
/// (`REDIS_PERSECOND_*`).
pub(crate) struct Target<'a> {
    /// The variables' prefix, for the messages: `REDIS` or `REDIS_PERSECOND`.
    var: &'static str,
    url: &'a str,
    redis_type: RedisType,
    socket_type: SocketType,
    tls: bool,
    timeout: Duration,
    /// `_PIPELINE_WINDOW` and `_PIPELINE_LIMIT`.
    pipeline: (Duration, usize),
    auth: Option<&'a str>,
    sentinel_auth: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// `REDIS_*`'s Redis.
    fn main(settings: &'a Settings, secrets: &'a Secrets) -> Self {
        Target {
            var: "REDIS",
            url: &settings.redis_url,
            redis_type: settings.redis_type,
            socket_type: settings.redis_socket_type,
            tls: settings.redis_tls,
            timeout: settings.redis_timeout,
            pipeline: (
                settings.redis_pipeline_window,
                settings.redis_pipeline_limit,
            ),
            auth: secrets.auth.as_deref(),
            sentinel_auth: secrets.sentinel_auth.as_deref(),
        }
    }

    /// `REDIS_PERSECOND_*`'s Redis, when `REDIS_PERSECOND` is on.
    fn per_second(settings: &'a Settings, secrets: &'a Secrets) -> Option<Self> {
        let p = &settings.per_second;
        p.redis_persecond.then(|| Target {
            var: "REDIS_PERSECOND",
            url: &p.redis_persecond_url,
            redis_type: p.redis_persecond_type,
            socket_type: p.redis_persecond_socket_type,
            tls: p.redis_persecond_tls,
            timeout: p.redis_persecond_timeout,
            pipeline: (
                p.redis_persecond_pipeline_window,
                p.redis_persecond_pipeline_limit,
            ),
            auth: secrets.per_second_auth.as_deref(),
            sentinel_auth: secrets.per_second_sentinel_auth.as_deref(),
        })
    }

    /// Over TLS: asked, or a `rediss://` URL.
    fn over_tls(&self) -> bool {
        self.tls || self.url.trim().starts_with("rediss://")
    }
}

/// The store: Redis connected lazily (the server starts while Redis is down, and answers
/// by its failure mode until Redis does), in local-first mode with `REDLIMIT_LOCAL_FIRST`;
/// or memory.
#[cfg(test)]
pub(crate) fn store(settings: &Settings, secrets: &Secrets) -> Result<Arc<dyn Store>, String> {
    stores(settings, secrets).map(|(store, _)| store)
}

/// [`store`], and the Redis it is on (none with `BACKEND_TYPE=memory`): the RLQS service syncs
/// its buckets through that same connection.
pub(crate) fn stores(
    settings: &Settings,
    secrets: &Secrets,
) -> Result<(Arc<dyn Store>, Option<RedisStore>), String> {
    if settings.backend_type == Backend::Memory {
        if settings.local_first {
            return Err("REDLIMIT_LOCAL_FIRST needs BACKEND_TYPE=redis".to_owned());
        }
        return Ok((Arc::new(MemoryStore::new()), None));
    }
    let (store, redis) = redis_store(settings, &Target::main(settings, secrets))?;
    Ok((store, Some(redis)))
}

/// The per-second store (`REDIS_PERSECOND=true`): the counters of the limits whose unit is
/// `second`, connected lazily, in local-first mode as the main one; `None` when off.
pub(crate) fn per_second_store(
    settings: &Settings,
    secrets: &Secrets,
) -> Result<Option<Arc<dyn Store>>, String> {
    let Some(target) = Target::per_second(settings, secrets) else {
        return Ok(None);
    };
    if settings.backend_type == Backend::Memory {
        return Err("REDIS_PERSECOND needs BACKEND_TYPE=redis".to_owned());
    }
    redis_store(settings, &target).map(|(store, _)| Some(store))
}

/// The store on `target`, and its Redis store under any local-first wrapping.
fn redis_store(
    settings: &Settings,
    target: &Target<'_>,
) -> Result<(Arc<dyn Store>, RedisStore), String> {
    let (window, limit) = target.pipeline;
    if !window.is_zero() && window >= settings.store_deadline {
        return Err(format!(
            "{var}_PIPELINE_WINDOW ({window:?}) must be shorter than REDLIMIT_STORE_DEADLINE \
             ({:?}): every decision would wait out its deadline",
            settings.store_deadline,
            var = target.var,
        ));
    }
    let mut builder = builder(target)?
        .connect_timeout(target.timeout)
        .pipeline_window(window)
        .pipeline_limit(limit);
    // Empty, as the Go service's default: redlimit's own prefix.
    if !settings.cache_key_prefix.is_empty() {
        builder = builder.prefix(settings.cache_key_prefix.clone());
    }
    builder = tls(builder, settings, target)?;
    let var = target.var;
    let store = builder
        .connect_lazy()
        .map_err(|e| format!("{var}_URL, CACHE_KEY_PREFIX or REDIS_TLS_*: {e}"))?;
    if settings.local_first {
        let local_first = LocalFirstStore::builder(store.clone())
            .interval(settings.local_first_sync)
            .build()
            .map_err(|e| format!("REDLIMIT_LOCAL_FIRST_SYNC: {e}"))?;
        return Ok((Arc::new(local_first), store));
    }
    Ok((Arc::new(store.clone()), store))
}

/// `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT` and `_KEY` (both, as the Go service reads them)
/// and `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`, when `target` is reached over TLS (the Go
/// service reads them only then, for either Redis: one of the two over TLS leaves the other
/// plain).
fn tls(
    mut builder: RedisStoreBuilder,
    settings: &Settings,
    target: &Target<'_>,
) -> Result<RedisStoreBuilder, String> {
    if !target.over_tls() {
        return Ok(builder);
    }
    if let Some(path) = &settings.redis_tls_cacert {
        let pem = std::fs::read(path)
            .map_err(|e| format!("REDIS_TLS_CACERT: cannot read {}: {e}", path.display()))?;
        builder = builder.tls_root_certificate(pem);
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
        let warning = format!(
            "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION is on: {}'s certificate is accepted for any \
             name (its chain is still verified): any certificate of its authority passes",
            target.var
        );
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
        builder = builder.tls_skip_hostname_verification(true);
    }
    Ok(builder)
}

fn builder(target: &Target<'_>) -> Result<RedisStoreBuilder, String> {
    let (var, url) = (target.var, target.url.trim());
    match target.redis_type {
        RedisType::Single => Ok(RedisStore::builder(single_url(target)?)),
        RedisType::Cluster => {
            let nodes = url
                .split(',')
                .map(|node| tcp_url(target, node.trim(), target.auth))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(RedisStore::cluster(nodes))
        }
        RedisType::Sentinel => {
            let mut parts = url.split(',').map(str::trim);
            let master = parts.next().filter(|m| !m.is_empty()).ok_or(format!(
                "{var}_URL: a Sentinel URL is `master,host:port[,host:port...]`"
            ))?;
            if target.auth.is_some() {
                return Err(format!(
                    "{var}_AUTH with {var}_TYPE=sentinel: a password for the master is not \
                     supported yet ({var}_SENTINEL_AUTH is the Sentinels')"
                ));
            }
            let sentinels = parts
                .map(|node| tcp_url(target, node, target.sentinel_auth))
                .collect::<Result<Vec<_>, _>>()?;
            if sentinels.is_empty() {
                return Err(format!("{var}_URL: no Sentinel after the master's name"));
            }
            Ok(RedisStore::sentinel(sentinels, master))
        }
    }
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

    fn single(s: &Settings, secrets: &Secrets) -> Result<String, String> {
        single_url(&Target::main(s, secrets))
    }

    #[test]
    fn a_single_tcp_server_with_a_password_and_a_user() {
        let s = settings(&["--redis-socket-type", "tcp", "--redis-url", "10.0.0.1:6379"]);
        let secrets = Secrets {
            auth: Some("app:p@ss word".into()),
            ..Secrets::default()
        };
        assert_eq!(
            single(&s, &secrets).unwrap(),
            "redis://app:p%40ss%20word@10.0.0.1:6379"
        );
        let plain = Secrets {
            auth: Some("secret".into()),
            ..Secrets::default()
        };
        assert_eq!(single(&s, &plain).unwrap(), "redis://:secret@10.0.0.1:6379");
    }

    #[test]
    fn a_unix_socket_and_a_full_url_as_given() {
        let s = settings(&["--redis-url", "/run/redis.sock"]);
        assert_eq!(
            single(&s, &Secrets::default()).unwrap(),
            "redis+unix:///run/redis.sock"
        );
        let s = settings(&["--redis-url", "rediss://h:6380/2"]);
        assert_eq!(
            single(&s, &Secrets::default()).unwrap(),
            "rediss://h:6380/2"
        );
    }

    #[test]
    fn malformed_urls_are_refused_with_the_variable_named() {
        let s = settings(&["--redis-socket-type", "tcp", "--redis-url", "nohostport"]);
        assert!(
            single(&s, &Secrets::default())
                .unwrap_err()
                .starts_with("REDIS_URL")
        );
        let none = Secrets::default();
        let s = settings(&["--redis-type", "sentinel", "--redis-url", "mymaster"]);
        let Err(refused) = builder(&Target::main(&s, &none)) else {
            panic!("refused")
        };
        assert!(refused.contains("no Sentinel"), "{refused}");
        let s = settings(&["--redis-type", "cluster", "--redis-url", "a:1,,b:2"]);
        assert!(builder(&Target::main(&s, &none)).is_err());
    }

    #[test]
    fn the_per_second_redis_has_its_own_variables() {
        let s = settings(&[
            "--redis-socket-type",
            "tcp",
            "--redis-url",
            "10.0.0.1:6379",
            "--redis-persecond",
            "--redis-persecond-socket-type",
            "tcp",
            "--redis-persecond-url",
            "10.0.0.2:6380",
            "--redis-persecond-tls",
        ]);
        let secrets = Secrets {
            auth: Some("main".into()),
            per_second_auth: Some("fast".into()),
            ..Secrets::default()
        };
        let target = Target::per_second(&s, &secrets).expect("on");
        assert_eq!(single_url(&target).unwrap(), "rediss://:fast@10.0.0.2:6380");
        assert_eq!(single(&s, &secrets).unwrap(), "redis://:main@10.0.0.1:6379");
        let off = settings(&[]);
        assert!(Target::per_second(&off, &secrets).is_none());

        let sentinel = settings(&[
            "--redis-persecond",
            "--redis-persecond-type",
            "sentinel",
            "--redis-persecond-url",
            "fast",
        ]);
        let Err(refused) = builder(&Target::per_second(&sentinel, &secrets).expect("on")) else {
            panic!("refused")
        };
        // The variables named are the per-second Redis's.
        assert!(
            refused.starts_with("REDIS_PERSECOND_AUTH with REDIS_PERSECOND_TYPE=sentinel"),
            "{refused}"
        );
        let bad = settings(&[
            "--redis-persecond",
            "--redis-persecond-type",
            "cluster",
            "--redis-persecond-url",
            "nohostport",
        ]);
        let refused = per_second_store(&bad, &Secrets::default())
            .err()
            .expect("refused");
        assert!(refused.starts_with("REDIS_PERSECOND_URL"), "{refused}");
    }

    #[tokio::test]
    async fn the_per_second_store_is_made_only_when_asked_and_only_on_redis() {
        let on = [
            "--redis-persecond",
            "--redis-persecond-socket-type",
            "tcp",
            "--redis-persecond-url",
            "127.0.0.1:1",
        ];
        let none = Secrets::default();
        assert!(per_second_store(&settings(&[]), &none).unwrap().is_none());
        let made = per_second_store(&settings(&on), &none).unwrap();
        assert_eq!(made.expect("made").kind(), "redis");
        let first = settings(&[&on[..], &["--local-first"]].concat());
        let made = per_second_store(&first, &none).unwrap();
        assert_eq!(made.expect("made").kind(), "local_first");
        let memory = settings(&[&on[..], &["--backend-type", "memory"]].concat());
        let refused = per_second_store(&memory, &none).err().expect("refused");
        assert!(refused.starts_with("REDIS_PERSECOND needs"), "{refused}");
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
