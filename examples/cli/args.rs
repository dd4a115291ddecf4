//! The command line parsed into plain [`Args`]: clap reads it as [`Cli`] declares it, then
//! the checks only the command line knows (flags that go together, limits, warnings). Every
//! thing that builds library objects from them is in `layer.rs`.

use std::net::SocketAddr;
use std::time::Duration;

use redlimit::key::SpecPart;
use redlimit::layer::{HeaderStyle, OnStoreError, RejectBody};
use redlimit::{Algorithm, Limit};

use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::flags::Cli;
use super::layer;

/// RFC 7518 §3.2: an HS256 key must be at least as long as the hash output, 256 bits.
const MIN_JWT_SECRET_BYTES: usize = 32;

/// The command line, parsed and checked. Each field holds its flag's value or, not given, its
/// default ([`Cli`]).
#[derive(Debug)]
pub(crate) struct Args {
    /// `--help` or `-h` was given: print the usage and nothing else.
    pub(crate) help: bool,
    pub(crate) bind: SocketAddr,
    pub(crate) redis: Option<String>,
    pub(crate) redis_cluster: Option<Vec<String>>,
    pub(crate) redis_sentinel: Option<Vec<String>>,
    pub(crate) sentinel_master: Option<String>,
    pub(crate) algorithm: Algorithm,
    /// The `--limit` values, as given.
    pub(crate) rates: Vec<String>,
    /// `rates` as limits of `algorithm`, then the `--concurrency` limit if any; never empty.
    pub(crate) limits: Vec<Limit>,
    /// The limits given `@SPEC`: their position and their own key.
    pub(crate) limit_keys: Vec<(usize, KeySpec)>,
    /// `--concurrency`: at most this many requests in flight per key.
    pub(crate) concurrency: Option<u64>,
    /// `--handler-delay-ms`: how long the handler waits before answering.
    pub(crate) handler_delay: Duration,
    pub(crate) key: KeySpec,
    pub(crate) trusted_proxies: Vec<String>,
    pub(crate) ipv6_prefix: u8,
    pub(crate) jwt_secret: Option<String>,
    /// `--jwt-jwks`: the JWKS file verifying asymmetric tokens.
    pub(crate) jwt_jwks: Option<std::path::PathBuf>,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) store_timeout: Duration,
    pub(crate) prefix: String,
    /// Local-first mode with this sync interval (ms), with a Redis flag.
    pub(crate) sync_ms: Option<u64>,
    /// Whether denied keys are answered from memory until their retry time (the default).
    pub(crate) deny_cache: bool,
    /// Where to serve `GET /metrics` (Prometheus text), if anywhere.
    pub(crate) metrics_bind: Option<SocketAddr>,
    /// Record decisions without denying any.
    pub(crate) shadow: bool,
    /// How long a key a limit denied stays denied (`--penalty`).
    pub(crate) penalty: Option<Duration>,
    /// Give back the units of requests answered with a status of 500 or more.
    pub(crate) refund_5xx: bool,
    /// Which rate-limit headers responses carry.
    pub(crate) headers: HeaderStyle,
    /// The body of the layer's HTTP errors.
    pub(crate) reject_body: RejectBody,
    /// Where to serve the admin endpoints, if anywhere (with `admin_token`).
    pub(crate) admin_bind: Option<SocketAddr>,
    /// The bearer token the admin endpoints require.
    pub(crate) admin_token: Option<String>,
    /// Policies and routes from this TOML file, reloaded on change (feature `config`).
    pub(crate) config: Option<std::path::PathBuf>,
    /// One line each, for stderr: settings that work but are probably mistakes.
    pub(crate) warnings: Vec<String>,
}

/// One part of `--key`; several joined with `+` (`route+ip`) key on all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyPart {
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
pub(crate) struct KeySpec(pub Vec<KeyPart>);

impl KeySpec {
    /// Parses `ip`, `header:NAME`, `route+ip` and the like: the library's grammar
    /// ([`redlimit::key::spec_parts`]), plus `jwt`, which only the command line keys on.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let parts = redlimit::key::spec_parts(text).map_err(|err| err.to_string())?;
        parts
            .into_iter()
            .map(|part| match part {
                SpecPart::Ip => Ok(KeyPart::Ip),
                SpecPart::Header(name) => Ok(KeyPart::Header(name.to_owned())),
                SpecPart::Query(name) => Ok(KeyPart::Query(name.to_owned())),
                SpecPart::Route => Ok(KeyPart::Route),
                SpecPart::Global => Ok(KeyPart::Global),
                SpecPart::Other("jwt") => Ok(KeyPart::Jwt),
                SpecPart::Other(word) => Err(format!(
                    "unknown key `{word}`: expected ip, header:NAME (metadata:NAME), \
                     query:NAME, jwt, route (method) or global, or several joined with + \
                     (e.g. route+ip)"
                )),
                other => Err(format!("`{other:?}` is not a key of this server")),
            })
            .collect::<Result<_, _>>()
            .map(KeySpec)
    }
}

/// A comma-separated list of URLs (`--redis-cluster`, `--redis-sentinel`).
#[derive(Debug, Clone)]
pub(crate) struct Urls(pub(crate) Vec<String>);

/// Parses the arguments that follow the program name. Later values of a flag replace earlier
/// ones, except for repeatable flags, which add a value each time. An error is one line,
/// `--flag: what is wrong` where a flag's value is at fault.
pub(crate) fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let cli = Cli::try_parse_from(std::iter::once("server".to_owned()).chain(args))
        .map_err(|err| one_line(&err))?;
    let mut parsed = Args {
        help: cli.help,
        bind: cli.bind,
        redis: secret(cli.redis, cli.redis_file, "--redis", Ok)?,
        redis_cluster: cli.redis_cluster.map(|urls| urls.0),
        redis_sentinel: cli.redis_sentinel.map(|urls| urls.0),
        sentinel_master: cli.sentinel_master,
        algorithm: cli.algorithm,
        rates: cli.rates,
        limits: Vec::new(),
        limit_keys: Vec::new(),
        concurrency: cli.concurrency,
        handler_delay: cli.handler_delay,
        key: cli.key,
        trusted_proxies: cli.trusted_proxies,
        ipv6_prefix: cli.ipv6_prefix,
        jwt_secret: secret(cli.jwt_secret, cli.jwt_secret_file, "--jwt-secret", |v| {
            jwt_secret(&v)
        })?,
        jwt_jwks: cli.jwt_jwks,
        on_store_error: cli.on_store_error,
        store_timeout: cli.store_timeout,
        prefix: cli.prefix,
        sync_ms: cli.sync_ms,
        deny_cache: !cli.no_deny_cache,
        metrics_bind: cli.metrics_bind,
        shadow: cli.shadow,
        penalty: cli.penalty,
        refund_5xx: cli.refund_5xx,
        headers: cli.headers,
        reject_body: cli.reject_body,
        admin_bind: cli.admin_bind,
        admin_token: secret(
            cli.admin_token,
            cli.admin_token_file,
            "--admin-token",
            |v| admin_token(&v),
        )?,
        config: cli.config,
        warnings: Vec::new(),
    };
    check_stores(&parsed)?;
    if parsed.admin_bind.is_some() != parsed.admin_token.is_some() {
        return Err("--admin-bind and --admin-token go together".into());
    }
    // Only now: `--algorithm` may come after the limits.
    parsed.limits = layer::limits(parsed.algorithm, &parsed.rates)?;
    parsed.limit_keys = limit_keys(&parsed.rates)?;
    if let Some(n) = parsed.concurrency {
        if parsed.config.is_some() {
            return Err(
                "--concurrency: not with --config (give the file a concurrency limit)".into(),
            );
        }
        parsed.limits.push(layer::concurrency(n)?);
    }
    parsed.warnings = warnings(&parsed);
    Ok(parsed)
}

/// A secret given as `flag`'s value (the command line or its environment variable) or in the
/// file of `flag`-file, checked by `check`; never both. The file's one line is the secret
/// (its line break dropped); an error names the file, never its content.
fn secret(
    value: Option<String>,
    file: Option<std::path::PathBuf>,
    flag: &str,
    check: impl FnOnce(String) -> Result<String, String>,
) -> Result<Option<String>, String> {
    let value = match (value, file) {
        (Some(_), Some(_)) => return Err(format!("give only one of {flag} and {flag}-file")),
        (Some(value), None) => return Ok(Some(value)),
        (None, None) => return Ok(None),
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map_err(|e| format!("{flag}-file: cannot read {}: {}", path.display(), e.kind()))?,
    };
    let value = value.trim_end_matches(['\r', '\n']).to_owned();
    check(value)
        .map(Some)
        .map_err(|why| format!("{flag}-file: {why}"))
}

/// clap's error as one line: `--flag: what is wrong with its value`, `unknown flag `--x``,
/// `missing value for --flag`, or clap's own first line.
fn one_line(err: &clap::Error) -> String {
    let flag = || match err.get(ContextKind::InvalidArg) {
        // `--bind <ADDR>` names the flag and its value.
        Some(ContextValue::String(arg)) => arg.split(' ').next().unwrap_or(arg).to_owned(),
        _ => String::new(),
    };
    match err.kind() {
        ErrorKind::ValueValidation => match std::error::Error::source(err) {
            Some(why) => format!("{}: {why}", flag()),
            None => format!("{}: invalid value", flag()),
        },
        ErrorKind::UnknownArgument if flag().starts_with('-') => {
            format!("unknown flag `{}`", flag())
        }
        ErrorKind::UnknownArgument => format!("unexpected argument `{}`", flag()),
        ErrorKind::InvalidValue | ErrorKind::NoEquals => format!("missing value for {}", flag()),
        ErrorKind::TooManyValues => format!("{} takes no value", flag()),
        _ => {
            let rendered = err.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            first.strip_prefix("error: ").unwrap_or(first).to_owned()
        }
    }
}

/// The `@SPEC` of each `--limit N/DURATION@SPEC`, by position.
fn limit_keys(rates: &[String]) -> Result<Vec<(usize, KeySpec)>, String> {
    let mut keys = Vec::new();
    for (position, rate) in rates.iter().enumerate() {
        if let Some((_, spec)) = rate.split_once('@') {
            keys.push((
                position,
                KeySpec::parse(spec).map_err(|e| format!("--limit: {e}"))?,
            ));
        }
    }
    Ok(keys)
}

/// At most one Redis topology, and a Sentinel master name exactly with Sentinels.
fn check_stores(args: &Args) -> Result<(), String> {
    let stores = [
        args.redis.is_some(),
        args.redis_cluster.is_some(),
        args.redis_sentinel.is_some(),
    ];
    if stores.iter().filter(|&&given| given).count() > 1 {
        return Err("give only one of --redis, --redis-cluster and --redis-sentinel".into());
    }
    if args.redis_sentinel.is_some() != args.sentinel_master.is_some() {
        return Err("--redis-sentinel and --sentinel-master go together".into());
    }
    if args.sync_ms.is_some() && !stores.contains(&true) {
        return Err(
            "--sync-ms needs a Redis store: --redis, --redis-cluster or --redis-sentinel".into(),
        );
    }
    Ok(())
}

/// What `args` allows but probably should not.
fn warnings(args: &Args) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(secret) = &args.jwt_secret
        && secret.len() < MIN_JWT_SECRET_BYTES
    {
        warnings.push(format!(
            "--jwt-secret is {} bytes: HS256 wants at least {MIN_JWT_SECRET_BYTES} random bytes",
            secret.len()
        ));
    }
    warnings
}

/// `--bind`: `IP:PORT`.
pub(crate) fn bind(value: &str) -> Result<SocketAddr, String> {
    value
        .parse()
        .map_err(|_| format!("invalid address `{value}`: expected IP:PORT"))
}

/// A comma-separated list of URLs, none empty.
pub(crate) fn url_list(value: &str) -> Result<Urls, String> {
    let urls: Vec<String> = value.split(',').map(|u| u.trim().to_owned()).collect();
    if urls.iter().any(String::is_empty) {
        return Err(format!("expected comma-separated URLs, got `{value}`"));
    }
    Ok(Urls(urls))
}

/// `--sync-ms`: a local-first sync interval of 1 to 60 000 ms.
pub(crate) fn sync_ms(value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(ms) if (1..=60_000).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "`{value}` is not a whole number of milliseconds from 1 to 60000"
        )),
    }
}

/// `--ipv6-prefix`: a prefix length (1 to 128 is checked with the key, in `layer.rs`).
pub(crate) fn ipv6_prefix(value: &str) -> Result<u8, String> {
    value
        .parse()
        .map_err(|_| format!("invalid value `{value}`: expected 1 to 128"))
}

/// `--jwt-secret`: anything but empty, which would make every token's signature forgeable.
pub(crate) fn jwt_secret(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Err("the secret must not be empty".into());
    }
    Ok(value.to_owned())
}

/// `--admin-token`: not empty, printable ASCII without spaces (it travels in a header).
pub(crate) fn admin_token(value: &str) -> Result<String, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("expected a non-empty token of printable ASCII without spaces".into());
    }
    Ok(value.to_owned())
}

/// `--store-timeout-ms`: whole milliseconds above 0.
/// `--penalty`: a duration in the library's grammar (`30s`, `15m`), above zero.
pub(crate) fn penalty(value: &str) -> Result<Duration, String> {
    match redlimit::duration::parse(value) {
        Ok(penalty) if penalty.is_zero() => Err(format!("`{value}`: a penalty above zero")),
        parsed => parsed.map_err(|err| err.to_string()),
    }
}

/// `--store-timeout-ms`: whole milliseconds above 0.
pub(crate) fn store_timeout(value: &str) -> Result<Duration, String> {
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "invalid value `{value}`: expected a whole number of milliseconds above 0"
        )),
    }
}

/// `--concurrency`: a count of requests above 0.
pub(crate) fn concurrency(value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid value `{value}`: expected a whole number of requests above 0"
        )),
    }
}

/// `--handler-delay-ms`: a whole number of milliseconds, 0 for none.
pub(crate) fn handler_delay(value: &str) -> Result<Duration, String> {
    value
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("invalid value `{value}`: expected a whole number of milliseconds"))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn parse(args: &[&str]) -> Result<Args, String> {
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
        assert_eq!(
            args.limits,
            [Limit::gcra(10, Duration::from_secs(1)).unwrap()]
        );
        assert_eq!(args.key, KeySpec(vec![KeyPart::Ip]));
        assert_eq!(args.ipv6_prefix, 64);
        assert_eq!(args.on_store_error, OnStoreError::local());
        assert_eq!(args.store_timeout, Duration::from_millis(100));
        assert_eq!(args.prefix, "redlimit");
        assert!(args.warnings.is_empty());
    }

    #[test]
    fn penalty_refunds_and_headers() {
        let args = parse(&[
            "--penalty",
            "90s",
            "--refund-5xx",
            "--headers",
            "both",
            "--reject-body",
            "problem-json",
        ])
        .unwrap();
        assert_eq!(args.penalty, Some(Duration::from_secs(90)));
        assert!(args.refund_5xx);
        assert_eq!(args.headers, HeaderStyle::Both);
        assert_eq!(args.reject_body, RejectBody::ProblemJson);
        let plain = parse(&[]).unwrap();
        assert_eq!((plain.penalty, plain.refund_5xx), (None, false));
        assert_eq!(plain.headers, HeaderStyle::XRateLimit);
        assert_eq!(plain.reject_body, RejectBody::Text);
        assert!(parse(&["--reject-body", "json"]).is_err());
        assert!(parse(&["--penalty", "soon"]).is_err());
        assert!(parse(&["--penalty", "0s"]).is_err());
        assert!(parse(&["--headers", "github"]).is_err());
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
        assert_eq!(
            args.limits,
            [Limit::sliding_log(5, Duration::from_secs(3)).unwrap()]
        );
        assert!(matches!(args.key.0[..], [KeyPart::Header(_)]));
        assert_eq!(args.on_store_error, OnStoreError::Closed);
        assert_eq!(args.store_timeout, Duration::from_millis(25));
        assert_eq!(args.prefix, "test:rl");
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
                Limit::token_bucket(5, Duration::from_secs(3)).unwrap(),
                Limit::token_bucket(20, Duration::from_secs(60)).unwrap(),
                Limit::token_bucket(100, Duration::from_millis(250)).unwrap(),
            ]
        );
    }

    #[test]
    fn every_duration_unit_the_help_names() {
        let args = parse(&[
            "--algorithm=fixed-window",
            "--limit=1/7ms",
            "--limit=1/7s",
            "--limit=1/7m",
            "--limit=1/7h",
            "--limit=1/7d",
        ])
        .unwrap();
        let periods: Vec<_> = args.limits.iter().map(Limit::period).collect();
        let s = Duration::from_secs;
        assert_eq!(
            periods,
            [
                Duration::from_millis(7),
                s(7),
                s(7 * 60),
                s(7 * 3600),
                s(7 * 86_400)
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
                Limit::fixed_window(2, Duration::from_secs(60)).unwrap(),
                Limit::fixed_window(1, Duration::from_secs(3600)).unwrap(),
            ]
        );
        assert_eq!(args.key, KeySpec(vec![KeyPart::Route]));
        assert_eq!(args.on_store_error, OnStoreError::Closed);
        assert_eq!(args.store_timeout, Duration::from_millis(7));
        assert_eq!(args.redis.as_deref(), Some("redis://localhost:6399/2"));
        assert_eq!(args.prefix, "a=b", "split at the first `=` only");
    }

    #[test]
    fn keys() {
        let key = |spec: &str| parse(&["--key", spec]).unwrap().key.0;
        assert_eq!(key("ip"), [KeyPart::Ip]);
        assert_eq!(key("global"), [KeyPart::Global]);
        assert_eq!(key("route"), [KeyPart::Route]);
        assert_eq!(key("method"), [KeyPart::Route]);
        assert_eq!(key("jwt"), [KeyPart::Jwt]);
        assert_eq!(
            key("header:X-Api-Key"),
            [KeyPart::Header("X-Api-Key".into())]
        );
        assert_eq!(
            key("metadata:x-api-key"),
            [KeyPart::Header("x-api-key".into())]
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
        assert_eq!(args.ipv6_prefix, 56);
    }

    #[test]
    fn secrets_come_from_files() {
        let dir = std::env::temp_dir().join(format!("redlimit-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        let token = file("token", "s3cret\n");
        let jwt = file("jwt", "0123456789abcdef0123456789abcdef");
        let redis = file("redis", "redis://:pw@127.0.0.1:7000\r\n");
        let args = parse(&[
            "--admin-bind",
            "127.0.0.1:0",
            "--admin-token-file",
            &token,
            "--jwt-secret-file",
            &jwt,
            "--redis-file",
            &redis,
        ])
        .unwrap();
        assert_eq!(args.admin_token.as_deref(), Some("s3cret"));
        assert_eq!(
            args.jwt_secret.as_deref(),
            Some("0123456789abcdef0123456789abcdef")
        );
        assert_eq!(args.redis.as_deref(), Some("redis://:pw@127.0.0.1:7000"));
        assert!(
            error(&["--admin-token", "t", "--admin-token-file", &token])
                .contains("give only one of --admin-token and --admin-token-file")
        );
        let spaced = file("spaced", "a b\n");
        let message = error(&["--admin-bind", "127.0.0.1:0", "--admin-token-file", &spaced]);
        assert!(message.starts_with("--admin-token-file:"), "{message}");
        assert!(
            !message.contains("a b"),
            "the file's content is not shown: {message}"
        );
        let missing = dir.join("missing").to_string_lossy().into_owned();
        assert!(error(&["--jwt-secret-file", &missing]).contains("cannot read"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn later_values_win() {
        let args = parse(&["--bind", "127.0.0.1:1", "--bind", "127.0.0.1:2"]).unwrap();
        assert_eq!(args.bind.port(), 2);
        let args = parse(&["--on-store-error=local:3", "--on-store-error=closed"]).unwrap();
        assert_eq!(args.on_store_error, OnStoreError::Closed);
    }

    #[test]
    fn operations_flags() {
        let args = parse(&[
            "--metrics-bind",
            "127.0.0.1:9090",
            "--shadow",
            "--admin-bind",
            "127.0.0.1:9091",
            "--admin-token",
            "s3cret",
        ])
        .unwrap();
        assert_eq!(args.metrics_bind, Some("127.0.0.1:9090".parse().unwrap()));
        assert!(args.shadow);
        assert_eq!(args.admin_bind, Some("127.0.0.1:9091".parse().unwrap()));
        assert_eq!(args.admin_token.as_deref(), Some("s3cret"));
        let defaults = parse(&[]).unwrap();
        assert!(
            defaults.metrics_bind.is_none() && !defaults.shadow && defaults.admin_bind.is_none()
        );
        assert!(error(&["--admin-bind", "127.0.0.1:0"]).contains("go together"));
        assert!(error(&["--admin-token", "t"]).contains("go together"));
        assert!(
            error(&["--admin-bind", "127.0.0.1:0", "--admin-token", "a b"])
                .contains("--admin-token")
        );
        assert!(error(&["--metrics-bind", "nowhere"]).starts_with("--metrics-bind: "));
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
        assert!(error(&["stray"]).contains("unexpected argument `stray`"));
        assert!(error(&["--LIMIT", "1/1s"]).contains("unknown flag"));
    }

    #[test]
    fn missing_values() {
        assert!(error(&["--limit"]).contains("missing value for --limit"));
        assert!(error(&["--bind"]).contains("missing value for --bind"));
        // A value may start with a dash (`-1/1s` is refused by `--limit` itself): another flag
        // where a value belongs is read as that value, and the line is refused.
        assert!(parse(&["--key", "--limit", "1/1s"]).is_err());
    }

    #[test]
    fn bad_limits() {
        for bad in [
            "nope", "5", "5/", "/3s", "0/1s", "5/3", "5/3x", "-1/1s", "5/0s", "1.5/1s", "1/1us",
            "1/1w",
        ] {
            let message = error(&["--limit", bad]);
            assert!(message.starts_with("--limit: "), "{bad}: {message}");
        }
        // One bad limit among good ones.
        assert!(error(&["--limit", "5/3s", "--limit", "x"]).starts_with("--limit: "));
        // Faster than one unit per µs: fine for a fixed window, not for GCRA.
        assert!(parse(&["--algorithm", "fixed-window", "--limit", "2000/1ms"]).is_ok());
        assert!(error(&["--limit", "2000/1ms"]).starts_with("--limit: "));
        // A bad own key.
        for bad in ["5/1s@", "5/1s@cookie", "5/1s@header:", "5/1s@ip+"] {
            let message = error(&["--limit", bad]);
            assert!(message.starts_with("--limit: "), "{bad}: {message}");
        }
    }

    #[test]
    fn limits_with_their_own_keys() {
        let args = parse(&[
            "--limit",
            "10/1s@header:x-api-key",
            "--limit",
            "100/1m@header:x-tenant+route",
            "--limit",
            "5/1s",
        ])
        .unwrap();
        assert_eq!(args.limits.len(), 3);
        let positions: Vec<usize> = args.limit_keys.iter().map(|(p, _)| *p).collect();
        assert_eq!(positions, [0, 1]);
        assert_eq!(args.limit_keys[1].1.0.len(), 2);
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
        // The library's grammar refuses what is not a key word at all.
        assert!(error(&["--key=Header:x"]).contains("unknown part `Header:x`"));
        assert!(error(&["--key", "route+"]).contains("unknown part ``"));
        assert!(error(&["--key", "query:"]).contains("query: needs a parameter name"));
        assert!(error(&["--ipv6-prefix", "wide"]).starts_with("--ipv6-prefix: "));
    }

    #[test]
    fn the_deny_cache_is_on_unless_turned_off() {
        assert!(parse(&[]).unwrap().deny_cache);
        assert!(!parse(&["--no-deny-cache"]).unwrap().deny_cache);
        assert!(parse(&["--no-deny-cache=yes"]).is_err());
    }

    #[test]
    fn on_store_error_modes() {
        let mode = |value: &str| parse(&["--on-store-error", value]).unwrap().on_store_error;
        assert_eq!(mode("open"), OnStoreError::Open);
        assert_eq!(mode("closed"), OnStoreError::Closed);
        assert_eq!(mode("local"), OnStoreError::Local { instances: 1 });
        assert_eq!(mode("local:1"), OnStoreError::Local { instances: 1 });
        assert_eq!(mode("local:3"), OnStoreError::Local { instances: 3 });
        assert_eq!(
            parse(&["--on-store-error=local:12"])
                .unwrap()
                .on_store_error,
            OnStoreError::Local { instances: 12 }
        );
    }

    #[test]
    fn bad_on_store_error() {
        assert!(
            error(&["--on-store-error", "maybe"])
                .starts_with("--on-store-error: unknown store-error mode")
        );
        for bad in ["closed:2", "open:1", "locals:2", "Local:2"] {
            let message = error(&["--on-store-error", bad]);
            assert!(
                message.contains("unknown store-error mode"),
                "{bad}: {message}"
            );
        }
        for bad in [
            "local:",
            "local:0",
            "local:-1",
            "local:+2",
            "local:1.5",
            "local:x",
            "local: 2",
            "local:4294967296",
        ] {
            let message = error(&["--on-store-error", bad]);
            assert!(
                message.starts_with("--on-store-error: unknown store-error mode")
                    && message.contains("local:N (N >= 1)"),
                "{bad}: {message}"
            );
            assert!(!message.contains('\n'));
        }
    }

    #[test]
    fn jwt_secrets() {
        let long = "0123456789abcdef0123456789abcdef";
        let args = parse(&["--key", "jwt", "--jwt-secret", long]).unwrap();
        assert_eq!(args.jwt_secret.as_deref(), Some(long));
        assert!(args.warnings.is_empty());

        let short = parse(&["--jwt-secret", &long[1..]]).unwrap();
        assert_eq!(short.jwt_secret.as_deref(), Some(&long[1..]));
        assert_eq!(short.warnings.len(), 1);
        assert!(short.warnings[0].starts_with("--jwt-secret is 31 bytes"));
        assert!(!short.warnings[0].contains('\n'));

        // Only the value in effect is judged.
        let replaced = parse(&["--jwt-secret=short", "--jwt-secret", long]).unwrap();
        assert!(replaced.warnings.is_empty());

        for empty in [&["--jwt-secret", ""][..], &["--jwt-secret="]] {
            let message = error(empty);
            assert!(message.starts_with("--jwt-secret: "), "{message}");
            assert!(message.contains("empty"));
        }
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
        assert!(
            error(&["--redis-cluster", "redis://a:1,,redis://b:1"])
                .starts_with("--redis-cluster: ")
        );
    }

    #[test]
    fn bad_bind() {
        for bad in ["localhost", "127.0.0.1", "127.0.0.1:99999", ":3000", ""] {
            let message = error(&["--bind", bad]);
            assert!(message.starts_with("--bind: "), "{bad}: {message}");
        }
    }
}
