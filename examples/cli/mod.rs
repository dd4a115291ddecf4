//! The command line shared by `examples/server.rs` (HTTP) and `examples/grpc.rs` (gRPC):
//! flags, their checks, and the layer they describe.
#![allow(dead_code)] // each example uses a different part

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use redlimit::{
    Algorithm, Both, ClientIp, Global, Header, KeyExtractor, Limit, MemoryStore, OnStoreError,
    Policy, Query, RateLimitLayer, RedisStore, Route,
};

pub const USAGE: &str = "\
usage: server [OPTIONS]

  --bind ADDR               address to listen on (default 127.0.0.1:3000)
  --redis URL               Redis URL; without it: in-memory store
  --redis-cluster URLS      a Redis Cluster: comma-separated seed node URLs
  --redis-sentinel URLS     a master behind Sentinels: comma-separated Sentinel URLs
  --sentinel-master NAME    the master's name at the Sentinels (with --redis-sentinel)
  --algorithm NAME          fixed-window|sliding-window|sliding-log|token-bucket|gcra (default gcra)
  --limit N/DURATION        repeatable, e.g. --limit 5/3s --limit 20/60s; units ms, s, m, h
                            (default 10/1s)
  --key SPEC                ip|header:NAME|query:NAME|jwt|route|global, or several joined
                            with + (e.g. route+ip); default ip (the socket peer). For gRPC,
                            metadata:NAME and method mean header:NAME and route
  --trusted-proxy CIDR      repeatable: proxies whose X-Forwarded-For is believed for ip
  --ipv6-prefix N           group IPv6 clients by /N (default 64)
  --jwt-secret SECRET       HS256 secret verifying Bearer tokens for --key jwt
  --on-store-error MODE     open|closed|local (default open)
  --store-timeout-ms MS     how long a request waits on the store (default 100)
  --prefix NAME             Redis key prefix (default redlimit)
  -h, --help                print this help

Flags also accept the --flag=value form.";

/// The command line, parsed and checked.
#[derive(Debug)]
pub struct Args {
    /// `--help` or `-h` was given: print the usage and nothing else.
    pub help: bool,
    pub bind: SocketAddr,
    pub redis: Option<String>,
    pub redis_cluster: Option<Vec<String>>,
    pub redis_sentinel: Option<Vec<String>>,
    pub sentinel_master: Option<String>,
    pub algorithm: Algorithm,
    /// Each of the chosen algorithm; never empty.
    pub limits: Vec<Limit>,
    pub key: KeySpec,
    pub trusted_proxies: Vec<String>,
    ipv6_prefix: Option<u8>,
    pub jwt_secret: Option<String>,
    pub on_store_error: OnStoreError,
    pub store_timeout: Duration,
    pub prefix: Option<String>,
}

/// One part of `--key`; several joined with `+` (`route+ip`) key on all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// The client IP: the socket peer, or behind `--trusted-proxy` ranges the address they
    /// forward.
    Ip,
    Header(String),
    Query(String),
    Jwt,
    Route,
    Global,
}

/// What `--key` asked for: one or more parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec(pub Vec<KeyPart>);

impl KeySpec {
    fn parse(text: &str) -> Result<Self, String> {
        let unknown = |part: &str| {
            format!(
                "--key: unknown key `{part}`: expected ip, header:NAME (metadata:NAME), query:NAME, jwt, route (method) or global, \
                 or several joined with + (e.g. route+ip)"
            )
        };
        let parts = text
            .split('+')
            .map(|part| match part {
                "ip" => Ok(KeyPart::Ip),
                "jwt" => Ok(KeyPart::Jwt),
                // gRPC's words for the same things: the method is the route, metadata are headers.
                "route" | "method" => Ok(KeyPart::Route),
                "global" => Ok(KeyPart::Global),
                _ => {
                    if let Some(name) = part
                        .strip_prefix("header:")
                        .or_else(|| part.strip_prefix("metadata:"))
                    {
                        Header::try_new(name)
                            .map(|_| KeyPart::Header(name.to_owned()))
                            .ok_or_else(|| format!("--key: invalid header name `{name}`"))
                    } else if let Some(name) = part.strip_prefix("query:") {
                        if name.is_empty() {
                            Err("--key: query: needs a parameter name".to_owned())
                        } else {
                            Ok(KeyPart::Query(name.to_owned()))
                        }
                    } else {
                        Err(unknown(part))
                    }
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeySpec(parts))
    }
}

/// The extractor `args` describe. Identities that a request may lack (a header, a query
/// parameter, a valid token) fall back to the client IP, so that behind trusted proxies an
/// anonymous client is still told apart from the others.
fn key_extractor(args: &Args) -> Result<Arc<dyn KeyExtractor>, String> {
    let ip = ClientIp::try_trusting(&args.trusted_proxies)
        .and_then(|ip| match args.ipv6_prefix {
            Some(len) => ip.try_ipv6_prefix(len),
            None => Ok(ip),
        })
        .map_err(|e| format!("--trusted-proxy/--ipv6-prefix: {e}"))?;
    let mut parts: Vec<Arc<dyn KeyExtractor>> = Vec::new();
    for part in &args.key.0 {
        let extractor: Arc<dyn KeyExtractor> = match part {
            KeyPart::Ip => Arc::new(ip.clone()),
            KeyPart::Header(name) => Arc::new(Header::new(name).or_else(ip.clone())),
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
    let secret = args
        .jwt_secret
        .as_ref()
        .ok_or("--key jwt needs --jwt-secret")?;
    Ok(Arc::new(redlimit::Jwt::hs256(secret).or_else(ip.clone())))
}

#[cfg(not(feature = "jwt"))]
fn jwt(_: &Args, _: &ClientIp) -> Result<Arc<dyn KeyExtractor>, String> {
    Err("--key jwt needs the jwt feature: cargo run --features jwt --example server".into())
}

/// Parses the arguments that follow the program name. Later values of a flag replace earlier
/// ones, except `--limit`, which adds a limit each time.
pub fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = args.peekable();
    let mut parsed = Args {
        help: false,
        bind: SocketAddr::from(([127, 0, 0, 1], 3000)),
        redis: None,
        redis_cluster: None,
        redis_sentinel: None,
        sentinel_master: None,
        algorithm: Algorithm::Gcra,
        limits: Vec::new(),
        key: KeySpec(vec![KeyPart::Ip]),
        trusted_proxies: Vec::new(),
        ipv6_prefix: None,
        jwt_secret: None,
        on_store_error: OnStoreError::Open,
        store_timeout: Duration::from_millis(100),
        prefix: None,
    };
    // Limits are parsed last: `--algorithm` may come after them.
    let mut rates = Vec::new();

    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        if flag == "--help" || flag == "-h" {
            if inline.is_some() {
                return Err(format!("{flag} takes no value"));
            }
            parsed.help = true;
            continue;
        }
        if !matches!(
            flag.as_str(),
            "--bind"
                | "--redis"
                | "--redis-cluster"
                | "--redis-sentinel"
                | "--sentinel-master"
                | "--algorithm"
                | "--limit"
                | "--key"
                | "--trusted-proxy"
                | "--ipv6-prefix"
                | "--jwt-secret"
                | "--on-store-error"
                | "--store-timeout-ms"
                | "--prefix"
        ) {
            return Err(format!("unknown flag `{flag}`"));
        }
        // The value: after `=`, or the next argument unless that is another flag.
        let value = match inline {
            Some(value) => value,
            None => match args.next_if(|next| !next.starts_with("--")) {
                Some(value) => value,
                None => return Err(format!("missing value for {flag}")),
            },
        };
        match flag.as_str() {
            "--bind" => {
                parsed.bind = value
                    .parse()
                    .map_err(|_| format!("--bind: invalid address `{value}`: expected IP:PORT"))?;
            }
            "--redis" => parsed.redis = Some(value),
            "--redis-cluster" => parsed.redis_cluster = Some(url_list(&flag, &value)?),
            "--redis-sentinel" => parsed.redis_sentinel = Some(url_list(&flag, &value)?),
            "--sentinel-master" => parsed.sentinel_master = Some(value),
            "--algorithm" => {
                parsed.algorithm = value.parse().map_err(|e| format!("--algorithm: {e}"))?;
            }
            "--limit" => rates.push(value),
            "--key" => parsed.key = KeySpec::parse(&value)?,
            "--trusted-proxy" => parsed.trusted_proxies.push(value),
            "--ipv6-prefix" => {
                parsed.ipv6_prefix = Some(value.parse().map_err(|_| {
                    format!("--ipv6-prefix: invalid value `{value}`: expected 1 to 128")
                })?);
            }
            "--jwt-secret" => parsed.jwt_secret = Some(value),
            "--on-store-error" => {
                parsed.on_store_error = value
                    .parse()
                    .map_err(|e| format!("--on-store-error: {e}"))?;
            }
            "--store-timeout-ms" => {
                parsed.store_timeout = match value.parse::<u64>() {
                    Ok(ms) if ms > 0 => Duration::from_millis(ms),
                    _ => {
                        return Err(format!(
                            "--store-timeout-ms: invalid value `{value}`: expected a whole number of milliseconds above 0"
                        ))
                    }
                };
            }
            "--prefix" => parsed.prefix = Some(value),
            _ => unreachable!("flag checked above"),
        }
    }

    let stores = [
        parsed.redis.is_some(),
        parsed.redis_cluster.is_some(),
        parsed.redis_sentinel.is_some(),
    ];
    if stores.iter().filter(|&&given| given).count() > 1 {
        return Err("give only one of --redis, --redis-cluster and --redis-sentinel".into());
    }
    if parsed.redis_sentinel.is_some() != parsed.sentinel_master.is_some() {
        return Err("--redis-sentinel and --sentinel-master go together".into());
    }
    if rates.is_empty() {
        rates.push("10/1s".to_owned());
    }
    parsed.limits = rates
        .iter()
        .map(|rate| Limit::parse(parsed.algorithm, rate).map_err(|e| format!("--limit: {e}")))
        .collect::<Result<_, _>>()?;
    Ok(parsed)
}

/// A comma-separated list of URLs, none empty.
fn url_list(flag: &str, value: &str) -> Result<Vec<String>, String> {
    let urls: Vec<String> = value.split(',').map(|u| u.trim().to_owned()).collect();
    if urls.iter().any(String::is_empty) {
        return Err(format!(
            "{flag}: expected comma-separated URLs, got `{value}`"
        ));
    }
    Ok(urls)
}

/// The store and the layer the arguments describe; fails on a policy or Redis setting that
/// cannot be used. Does not connect to Redis: requests do, and follow `--on-store-error` while
/// it is down. Must run inside a Tokio runtime.
pub fn build_layer(args: &Args) -> Result<RateLimitLayer, String> {
    let policy = args
        .limits
        .iter()
        .fold(Policy::new("server"), |policy, &limit| policy.limit(limit));
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
        Some((flag, mut builder)) => {
            if let Some(prefix) = &args.prefix {
                builder = builder.prefix(prefix.as_str());
            }
            let store = builder.connect_lazy().map_err(|e| format!("{flag}: {e}"))?;
            RateLimitLayer::try_new(store, policy)
        }
        None => RateLimitLayer::try_new(MemoryStore::new(), policy),
    }
    .map_err(|e| format!("--limit: {e}"))?;
    Ok(layer
        .key(key_extractor(args)?)
        .on_store_error(args.on_store_error)
        .store_deadline(args.store_timeout))
}

/// Resolves on ctrl-c or, on Unix, SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Parses the command line of `program`, prints the help if asked, starts logging to stderr
/// (`warn`, or `RUST_LOG`), and builds the layer. `Err` carries the exit status to return:
/// success after `--help`, 2 after a bad flag.
pub fn setup(program: &str) -> Result<(Args, RateLimitLayer), std::process::ExitCode> {
    use std::io::IsTerminal;

    let args = parse_args(std::env::args().skip(1)).map_err(|message| usage_error(&message))?;
    if args.help {
        println!(
            "{}",
            USAGE.replacen("usage: server", &format!("usage: {program}"), 1)
        );
        return Err(std::process::ExitCode::SUCCESS);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let layer = build_layer(&args).map_err(|message| usage_error(&message))?;
    Ok((args, layer))
}

/// Binds `addr` and prints `listening on ADDR` (the real address: `:0` reveals its port);
/// `Err` carries the exit status after a message on stderr.
pub async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, std::process::ExitCode> {
    use std::io::Write;

    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        eprintln!("error: cannot listen on {addr}: {e}");
        std::process::ExitCode::FAILURE
    })?;
    println!("listening on {}", listener.local_addr().unwrap_or(addr));
    let _ = std::io::stdout().flush();
    Ok(listener)
}

/// Prints a bad flag's message and the exit status for it.
pub fn usage_error(message: &str) -> std::process::ExitCode {
    eprintln!("error: {message} (see --help)");
    std::process::ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    fn error(args: &[&str]) -> String {
        parse(args).expect_err("should not parse")
    }

    #[test]
    fn defaults() {
        let args = parse(&[]).unwrap();
        assert!(!args.help);
        assert_eq!(args.bind, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(args.redis, None);
        assert_eq!(args.algorithm, Algorithm::Gcra);
        assert_eq!(args.limits, [Limit::gcra(10, Duration::from_secs(1))]);
        assert_eq!(args.key, KeySpec(vec![KeyPart::Ip]));
        assert_eq!(args.on_store_error, OnStoreError::Open);
        assert_eq!(args.store_timeout, Duration::from_millis(100));
        assert_eq!(args.prefix, None);
    }

    #[test]
    fn every_flag() {
        let args = parse(&[
            "--bind",
            "0.0.0.0:8080",
            "--redis",
            "redis://127.0.0.1:6379",
            "--algorithm",
            "sliding-log",
            "--limit",
            "5/3s",
            "--key",
            "header:x-api-key",
            "--on-store-error",
            "closed",
            "--store-timeout-ms",
            "25",
            "--prefix",
            "test:rl",
        ])
        .unwrap();
        assert_eq!(args.bind, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(args.redis.as_deref(), Some("redis://127.0.0.1:6379"));
        assert_eq!(args.limits, [Limit::sliding_log(5, Duration::from_secs(3))]);
        assert!(matches!(args.key.0[..], [KeyPart::Header(_)]));
        assert_eq!(args.on_store_error, OnStoreError::Closed);
        assert_eq!(args.store_timeout, Duration::from_millis(25));
        assert_eq!(args.prefix.as_deref(), Some("test:rl"));
    }

    #[test]
    fn repeated_limits_take_the_algorithm_given_anywhere() {
        let args = parse(&[
            "--limit",
            "5/3s",
            "--limit",
            "20/60s",
            "--limit",
            "100/250ms",
            "--algorithm",
            "token-bucket",
        ])
        .unwrap();
        assert_eq!(
            args.limits,
            [
                Limit::token_bucket(5, Duration::from_secs(3)),
                Limit::token_bucket(20, Duration::from_secs(60)),
                Limit::token_bucket(100, Duration::from_millis(250)),
            ]
        );
    }

    #[test]
    fn equals_form() {
        let args = parse(&[
            "--bind=127.0.0.1:0",
            "--algorithm=fixed-window",
            "--limit=2/1m",
            "--limit=1/1h",
            "--key=route",
            "--on-store-error=closed",
            "--store-timeout-ms=7",
            "--redis=redis://localhost:6399/2",
            "--prefix=a=b",
        ])
        .unwrap();
        assert_eq!(args.bind.port(), 0);
        assert_eq!(
            args.limits,
            [
                Limit::fixed_window(2, Duration::from_secs(60)),
                Limit::fixed_window(1, Duration::from_secs(3600)),
            ]
        );
        assert_eq!(args.key, KeySpec(vec![KeyPart::Route]));
        assert_eq!(args.on_store_error, OnStoreError::Closed);
        assert_eq!(args.store_timeout, Duration::from_millis(7));
        assert_eq!(args.redis.as_deref(), Some("redis://localhost:6399/2"));
        assert_eq!(
            args.prefix.as_deref(),
            Some("a=b"),
            "split at the first `=` only"
        );
    }

    #[test]
    fn keys() {
        let key = |spec: &str| parse(&["--key", spec]).unwrap().key.0;
        assert_eq!(key("ip"), [KeyPart::Ip]);
        assert_eq!(key("global"), [KeyPart::Global]);
        assert_eq!(key("route"), [KeyPart::Route]);
        assert_eq!(key("jwt"), [KeyPart::Jwt]);
        assert_eq!(
            key("header:X-Api-Key"),
            [KeyPart::Header("X-Api-Key".into())]
        );
        assert_eq!(key("query:api_key"), [KeyPart::Query("api_key".into())]);
        assert_eq!(key("route+ip"), [KeyPart::Route, KeyPart::Ip]);
        let args = parse(&[
            "--trusted-proxy",
            "10.0.0.0/8",
            "--trusted-proxy=::1",
            "--ipv6-prefix",
            "56",
        ])
        .unwrap();
        assert_eq!(args.trusted_proxies, ["10.0.0.0/8", "::1"]);
        assert_eq!(args.ipv6_prefix, Some(56));
        assert!(key_extractor(&args).is_ok());
    }

    #[test]
    fn later_values_win() {
        let args = parse(&["--bind", "127.0.0.1:1", "--bind", "127.0.0.1:2"]).unwrap();
        assert_eq!(args.bind.port(), 2);
    }

    #[test]
    fn help() {
        assert!(parse(&["--help"]).unwrap().help);
        assert!(parse(&["-h"]).unwrap().help);
        assert!(parse(&["--limit", "1/1s", "-h"]).unwrap().help);
        assert!(error(&["--help=yes"]).contains("takes no value"));
    }

    #[test]
    fn unknown_flags() {
        assert!(error(&["--bogus"]).contains("unknown flag `--bogus`"));
        assert!(error(&["--bogus=1"]).contains("unknown flag `--bogus`"));
        assert!(error(&["-x"]).contains("unknown flag"));
        assert!(error(&["stray"]).contains("unknown flag `stray`"));
        assert!(error(&["--LIMIT", "1/1s"]).contains("unknown flag"));
    }

    #[test]
    fn missing_values() {
        assert!(error(&["--limit"]).contains("missing value for --limit"));
        assert!(error(&["--bind"]).contains("missing value for --bind"));
        assert!(error(&["--key", "--limit", "1/1s"]).contains("missing value for --key"));
    }

    #[test]
    fn bad_limits() {
        for bad in [
            "nope", "5", "5/", "/3s", "0/1s", "5/3", "5/3x", "-1/1s", "5/0s", "1.5/1s",
        ] {
            let message = error(&["--limit", bad]);
            assert!(message.starts_with("--limit: "), "{bad}: {message}");
        }
        // One bad limit among good ones.
        assert!(error(&["--limit", "5/3s", "--limit", "x"]).starts_with("--limit: "));
        // Faster than one unit per µs: fine for a fixed window, not for GCRA.
        assert!(parse(&["--algorithm", "fixed-window", "--limit", "2000/1ms"]).is_ok());
        assert!(error(&["--limit", "2000/1ms"]).starts_with("--limit: "));
    }

    #[test]
    fn bad_algorithm() {
        assert!(error(&["--algorithm", "leaky-bucket"]).contains("unknown algorithm"));
        assert!(error(&["--algorithm=GCRA"]).contains("unknown algorithm"));
    }

    #[test]
    fn bad_keys() {
        assert!(error(&["--key", "cookie"]).contains("unknown key"));
        assert!(error(&["--key", "header:"]).contains("invalid header name"));
        assert!(error(&["--key", "header:bad name"]).contains("invalid header name"));
        assert!(error(&["--key=Header:x"]).contains("unknown key"));
        assert!(error(&["--key", "route+"]).contains("unknown key"));
        assert!(error(&["--key", "query:"]).contains("query"));
        assert!(error(&["--ipv6-prefix", "wide"]).starts_with("--ipv6-prefix"));
        let bad_proxy = parse(&["--trusted-proxy", "10.0.0.0/33"]).unwrap();
        assert!(key_extractor(&bad_proxy).is_err());
        let bad_prefix = parse(&["--ipv6-prefix", "129"]).unwrap();
        assert!(key_extractor(&bad_prefix).is_err());
        let no_secret = parse(&["--key", "jwt"]).unwrap();
        assert!(key_extractor(&no_secret).is_err());
    }

    #[test]
    fn bad_on_store_error() {
        assert!(error(&["--on-store-error", "maybe"]).contains("--on-store-error"));
    }

    #[test]
    fn bad_store_timeouts() {
        for bad in ["0", "-5", "ten", "1.5", "100ms", ""] {
            let message = error(&["--store-timeout-ms", bad]);
            assert!(
                message.starts_with("--store-timeout-ms: "),
                "{bad}: {message}"
            );
        }
    }

    #[test]
    fn redis_topologies() {
        let c = parse(&["--redis-cluster", "redis://a:1,redis://b:2"]).unwrap();
        assert_eq!(c.redis_cluster.unwrap(), ["redis://a:1", "redis://b:2"]);
        let s = parse(&["--redis-sentinel=redis://s:1", "--sentinel-master", "m"]).unwrap();
        assert_eq!(s.redis_sentinel.unwrap(), ["redis://s:1"]);
        assert_eq!(s.sentinel_master.as_deref(), Some("m"));
        assert!(error(&["--redis-sentinel", "redis://s:1"]).contains("--sentinel-master"));
        assert!(error(&["--sentinel-master", "m"]).contains("--sentinel-master"));
        assert!(
            error(&["--redis", "redis://a:1", "--redis-cluster", "redis://b:1"])
                .contains("only one")
        );
        assert!(error(&["--redis-cluster", "redis://a:1,,redis://b:1"])
            .starts_with("--redis-cluster: "));
        let local = parse(&["--on-store-error", "local"]).unwrap();
        assert_eq!(local.on_store_error, OnStoreError::local());
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

    #[test]
    fn bad_bind() {
        for bad in ["localhost", "127.0.0.1", "127.0.0.1:99999", ":3000", ""] {
            let message = error(&["--bind", bad]);
            assert!(message.starts_with("--bind: "), "{bad}: {message}");
        }
    }

    #[tokio::test]
    async fn builds_layers() {
        assert!(build_layer(&parse(&[]).unwrap()).is_ok());
        // Redis is not contacted until the first request.
        let lazy = parse(&["--redis", "redis://127.0.0.1:1", "--prefix", "t:rl"]).unwrap();
        assert!(build_layer(&lazy).is_ok());
        // A prefix without Redis is ignored.
        assert!(build_layer(&parse(&["--prefix", "not a prefix"]).unwrap()).is_ok());
    }

    #[tokio::test]
    async fn bad_store_or_policy() {
        let bad_url = parse(&["--redis", "http://127.0.0.1:6379"]).unwrap();
        assert!(build_layer(&bad_url).unwrap_err().starts_with("--redis: "));
        let bad_prefix = parse(&["--redis", "redis://127.0.0.1:6379", "--prefix", "a b"]).unwrap();
        assert!(build_layer(&bad_prefix)
            .unwrap_err()
            .contains("invalid key prefix"));
        let seventeen: Vec<&str> = ["--limit", "1/1s"].repeat(17);
        let too_many = parse(&seventeen).unwrap();
        assert!(build_layer(&too_many)
            .unwrap_err()
            .contains("more than 16 limits"));
    }
}
