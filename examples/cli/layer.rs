//! The one place that calls the library's constructors: parsed [`Args`] to a
//! [`RateLimitLayer`], and the two checks the parser borrows from the library (rates and header
//! names), so that a change of the library's API is ported here alone.

use std::sync::Arc;
use std::time::Duration;

use redlimit::key::{Both, ClientIp, Global, Header, PerLimit, Query, Route};
use redlimit::layer::{RateLimitBuilder, Shadow};
use redlimit::store::{LocalFirstStore, MemoryStore, RedisStore, Store};
use redlimit::{Algorithm, KeyExtractor, Limit, Policy, RateLimitLayer};

use super::args::{Args, KeyPart, KeySpec};

/// `--limit` values (without their `@SPEC`) as limits of `algorithm`, checked by the library.
pub(crate) fn limits(algorithm: Algorithm, rates: &[String]) -> Result<Vec<Limit>, String> {
    rates
        .iter()
        .map(|rate| {
            let rate = rate.split_once('@').map_or(rate.as_str(), |(rate, _)| rate);
            Limit::parse(algorithm, rate).map_err(|e| format!("--limit: {e}"))
        })
        .collect()
}

/// How long a lease of `--concurrency` lives if its instance dies mid-request: longer than
/// any request of this server runs.
const LEASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// `--concurrency N`: N requests in flight per key, checked by the library.
pub(crate) fn concurrency(n: u64) -> Result<Limit, String> {
    Limit::concurrency(n, LEASE_TIMEOUT).map_err(|e| format!("--concurrency: {e}"))
}

/// The store and the layer the arguments describe; fails on a policy or Redis setting that
/// cannot be used. Does not connect to Redis: requests do, and follow `--on-store-error` while
/// it is down. Must run inside a Tokio runtime.
pub(crate) fn build_layer(args: &Args) -> Result<RateLimitLayer, String> {
    let policy =
        Policy::new("server", args.limits.iter().copied()).map_err(|e| format!("--limit: {e}"))?;
    let policy = match args.penalty {
        Some(penalty) => policy
            .penalty(penalty)
            .map_err(|e| format!("--penalty: {e}"))?,
        None => policy,
    };
    let redis = match (&args.redis, &args.redis_cluster, &args.redis_sentinel) {
        (Some(url), _, _) => Some(("--redis", RedisStore::builder(url.as_str()))),
        (_, Some(nodes), _) => Some(("--redis-cluster", RedisStore::cluster(nodes.clone()))),
        (_, _, Some(sentinels)) => {
            let master = args.sentinel_master.clone().unwrap_or_default();
            Some((
                "--redis-sentinel",
                RedisStore::sentinel(sentinels.clone(), master),
            ))
        }
        _ => None,
    };
    let layer = match redis {
        Some((flag, builder)) => {
            let store = builder
                .prefix(args.prefix.as_str())
                .connect_lazy()
                .map_err(|e| format!("{flag}: {e}"))?;
            match args.sync_ms {
                Some(ms) => {
                    if args.concurrency.is_some() || !args.limit_keys.is_empty() {
                        return Err("--sync-ms: not with --concurrency or --limit N/DUR@SPEC: \
                                    in-flight limits and limits under their own keys are \
                                    decided exactly, per request"
                            .into());
                    }
                    if !LocalFirstStore::supports(&policy) {
                        return Err(format!(
                            "--sync-ms: local-first mode does not approximate {}: it is decided \
                             exactly, per request; drop --sync-ms or use gcra, token-bucket, \
                             fixed-window or sliding-window",
                            args.algorithm
                        ));
                    }
                    let local_first = store
                        .local_first(Duration::from_millis(ms))
                        .map_err(|e| format!("--sync-ms: {e}"))?;
                    base_layer(local_first, policy, args)?
                }
                None => base_layer(store, policy, args)?,
            }
        }
        None => base_layer(MemoryStore::new(), policy, args)?,
    };
    let layer = if args.deny_cache {
        layer
    } else {
        layer.deny_cache(0)
    };
    let layer = if args.shadow {
        layer.shadow(Shadow::On)
    } else {
        layer
    };
    // A config file's rules bring their own keys.
    let layer = if args.config.is_some() {
        layer
    } else {
        layer.key(key_extractor(args)?)
    };
    let layer = if args.refund_5xx {
        layer.refund_if(|response: &http::response::Parts| response.status.is_server_error())
    } else {
        layer
    };
    layer
        .headers(args.headers)
        .reject_body(args.reject_body)
        .on_store_error(args.on_store_error)
        .store_deadline(args.store_timeout)
        .build()
        .map_err(|e| e.to_string())
}

/// The layer of `--config`'s file or, without one, of the `--limit` policy.
fn base_layer(store: impl Store, policy: Policy, args: &Args) -> Result<RateLimitBuilder, String> {
    match &args.config {
        None => Ok(RateLimitLayer::builder(store, policy)),
        Some(path) => from_file(store, path),
    }
}

#[cfg(feature = "config")]
fn from_file(store: impl Store, path: &std::path::Path) -> Result<RateLimitBuilder, String> {
    let file = redlimit::config::ConfigFile::load(path).map_err(|e| format!("--config: {e}"))?;
    Ok(RateLimitLayer::builder_per_route(store).rules(file.rules()))
}

#[cfg(not(feature = "config"))]
fn from_file(_: impl Store, _: &std::path::Path) -> Result<RateLimitBuilder, String> {
    Err("--config needs the config feature: cargo run --features config --example server".into())
}

/// The extractor `args` describe. Identities that a request may lack (a header, a query
/// parameter, a valid token) fall back to the client IP, so that behind trusted proxies an
/// anonymous client is still told apart from the others.
fn key_extractor(args: &Args) -> Result<Arc<dyn KeyExtractor>, String> {
    let key = extractor_of(&args.key, args)?;
    if args.limit_keys.is_empty() {
        return Ok(key);
    }
    let mut per_limit = PerLimit::new(key);
    for (position, spec) in &args.limit_keys {
        per_limit = per_limit.limit_dyn(*position, extractor_of(spec, args)?);
    }
    Ok(Arc::new(per_limit))
}

/// The extractor of one key spec (`--key`'s, or a `--limit`'s `@SPEC`).
fn extractor_of(spec: &KeySpec, args: &Args) -> Result<Arc<dyn KeyExtractor>, String> {
    let ip = ClientIp::trusting(&args.trusted_proxies)
        .and_then(|ip| ip.ipv6_prefix(args.ipv6_prefix))
        .map_err(|e| format!("--trusted-proxy/--ipv6-prefix: {e}"))?;
    let mut parts: Vec<Arc<dyn KeyExtractor>> = Vec::new();
    for part in &spec.0 {
        let extractor: Arc<dyn KeyExtractor> = match part {
            KeyPart::Ip => Arc::new(ip.clone()),
            KeyPart::Header(name) => Arc::new(
                Header::new(name)
                    .map_err(|e| format!("--key: {e}"))?
                    .or_else(ip.clone()),
            ),
            KeyPart::Query(name) => Arc::new(Query::new(name.as_str()).or_else(ip.clone())),
            KeyPart::Jwt => jwt(args, &ip)?,
            KeyPart::Route => Arc::new(Route),
            KeyPart::Global => Arc::new(Global),
        };
        parts.push(extractor);
    }
    let mut parts = parts.into_iter();
    let first = parts.next().ok_or("--key: empty")?;
    Ok(parts.fold(first, |key, next| Arc::new(Both::new(key, next))))
}

#[cfg(feature = "jwt")]
fn jwt(args: &Args, ip: &ClientIp) -> Result<Arc<dyn KeyExtractor>, String> {
    let jwt = match (&args.jwt_secret, &args.jwt_jwks) {
        (Some(_), Some(_)) => return Err("give only one of --jwt-secret and --jwt-jwks".into()),
        (Some(secret), None) => {
            redlimit::key::Jwt::hs256(secret).map_err(|e| format!("--jwt-secret: {e}"))?
        }
        (None, Some(path)) => jwks(path)?,
        (None, None) => return Err("--key jwt needs --jwt-secret or --jwt-jwks".into()),
    };
    Ok(Arc::new(jwt.or_else(ip.clone())))
}

/// The JWKS file's keys, followed for as long as the server runs.
#[cfg(feature = "jwks")]
fn jwks(path: &std::path::Path) -> Result<redlimit::key::Jwt, String> {
    let jwks =
        redlimit::key::JwksVerifier::from_file(path).map_err(|e| format!("--jwt-jwks: {e}"))?;
    let watch = jwks
        .watch(std::time::Duration::from_secs(5))
        .map_err(|e| format!("--jwt-jwks: {e}"))?;
    // The server keeps its keys for its whole life: the watch is never dropped.
    std::mem::forget(watch);
    Ok(redlimit::key::Jwt::new(jwks))
}

#[cfg(all(feature = "jwt", not(feature = "jwks")))]
fn jwks(_: &std::path::Path) -> Result<redlimit::key::Jwt, String> {
    Err("--jwt-jwks needs the jwks feature: cargo run --features jwks --example server".into())
}

#[cfg(not(feature = "jwt"))]
fn jwt(_: &Args, _: &ClientIp) -> Result<Arc<dyn KeyExtractor>, String> {
    Err("--key jwt needs the jwt feature: cargo run --features jwt --example server".into())
}

#[cfg(test)]
mod tests {
    use super::super::args::tests::parse;
    use super::*;

    #[test]
    fn key_extractors() {
        let proxies = parse(&["--trusted-proxy", "10.0.0.0/8", "--ipv6-prefix", "56"]).unwrap();
        assert!(key_extractor(&proxies).is_ok());
        let combined = parse(&["--key", "route+header:x-api-key+query:k+global"]).unwrap();
        assert!(key_extractor(&combined).is_ok());
    }

    #[test]
    fn bad_key_extractors() {
        let bad_proxy = parse(&["--trusted-proxy", "10.0.0.0/33"]).unwrap();
        assert!(key_extractor(&bad_proxy).is_err());
        let bad_prefix = parse(&["--ipv6-prefix", "129"]).unwrap();
        assert!(key_extractor(&bad_prefix).is_err());
        let no_secret = parse(&["--key", "jwt"]).unwrap();
        assert!(key_extractor(&no_secret).is_err());
    }

    #[cfg(feature = "jwt")]
    #[test]
    fn jwt_key() {
        let args = parse(&[
            "--key",
            "jwt",
            "--jwt-secret",
            "a secret of thirty-two bytes, ok",
        ])
        .unwrap();
        assert!(key_extractor(&args).is_ok());
    }

    #[tokio::test]
    async fn builds_layers() {
        assert!(build_layer(&parse(&[]).unwrap()).is_ok());
        // Redis is not contacted until the first request.
        let lazy = parse(&["--redis", "redis://127.0.0.1:1", "--prefix", "t:rl"]).unwrap();
        assert!(build_layer(&lazy).is_ok());
        // A prefix without Redis is ignored.
        assert!(build_layer(&parse(&["--prefix", "not a prefix"]).unwrap()).is_ok());
        let local = parse(&["--redis", "redis://127.0.0.1:1", "--on-store-error=local:4"]);
        assert!(build_layer(&local.unwrap()).is_ok());
    }

    #[tokio::test]
    async fn builds_cluster_and_sentinel_layers_lazily() {
        assert!(build_layer(&parse(&["--redis-cluster", "redis://127.0.0.1:1"]).unwrap()).is_ok());
        let sentinel = parse(&[
            "--redis-sentinel",
            "redis://127.0.0.1:1",
            "--sentinel-master",
            "m",
        ])
        .unwrap();
        assert!(build_layer(&sentinel).is_ok());
    }

    #[tokio::test]
    async fn bad_store_or_policy() {
        let bad_url = parse(&["--redis", "http://127.0.0.1:6379"]).unwrap();
        assert!(build_layer(&bad_url).unwrap_err().starts_with("--redis: "));
        let bad_prefix = parse(&["--redis", "redis://127.0.0.1:6379", "--prefix", "a b"]).unwrap();
        assert!(
            build_layer(&bad_prefix)
                .unwrap_err()
                .contains("invalid key prefix")
        );
        let seventeen: Vec<&str> = ["--limit", "1/1s"].repeat(17);
        let too_many = parse(&seventeen).unwrap();
        assert!(
            build_layer(&too_many)
                .unwrap_err()
                .contains("more than 16 limits")
        );
    }
}
