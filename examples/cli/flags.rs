//! Every flag of the command line, declared once with clap's derive ([`Cli`]): the parser,
//! `--help` and the flag table of `examples/README.md` all read it. Values are read by the library's
//! grammars where it has them (durations, failure modes, header styles, algorithms); what
//! only the command line knows is checked in `args.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, CommandFactory, Parser};
use redlimit::Algorithm;
use redlimit::layer::{HeaderStyle, OnStoreError, RejectBody};

use super::args::{self, KeySpec, Urls};

/// The command line as given: each field its flag's value (or default).
#[derive(Parser, Debug)]
#[command(
    name = "server",
    disable_help_flag = true,
    args_override_self = true,
    after_help = FOOTER
)]
pub(crate) struct Cli {
    /// address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:3000", value_parser = args::bind, allow_hyphen_values = true)]
    pub(crate) bind: SocketAddr,

    /// a standalone Redis; without a Redis flag: the in-memory store. A URL with a password
    /// is a secret: prefer the environment or `--redis-file` to the command line
    #[arg(
        long,
        value_name = "URL",
        env = "REDLIMIT_REDIS",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    pub(crate) redis: Option<String>,

    /// `--redis`'s URL read from FILE (a mounted secret; one line)
    #[arg(
        long,
        value_name = "FILE",
        env = "REDLIMIT_REDIS_FILE",
        allow_hyphen_values = true
    )]
    pub(crate) redis_file: Option<PathBuf>,

    /// a Redis Cluster: comma-separated URLs of some of its nodes
    #[arg(long, value_name = "URLS", value_parser = args::url_list, allow_hyphen_values = true)]
    pub(crate) redis_cluster: Option<Urls>,

    /// a master behind Sentinels: comma-separated Sentinel URLs (with `--sentinel-master`)
    #[arg(long, value_name = "URLS", value_parser = args::url_list, allow_hyphen_values = true)]
    pub(crate) redis_sentinel: Option<Urls>,

    /// the master's name at the Sentinels (with `--redis-sentinel`)
    #[arg(long, value_name = "NAME", allow_hyphen_values = true)]
    pub(crate) sentinel_master: Option<String>,

    /// `fixed-window`, `sliding-window`, `sliding-log`, `token-bucket` or `gcra`
    #[arg(long, value_name = "NAME", default_value = "gcra", value_parser = clap::value_parser!(Algorithm), allow_hyphen_values = true)]
    pub(crate) algorithm: Algorithm,

    /// at most N requests per DURATION, which is a whole number and a unit: `ms`, `s`, `m`,
    /// `h` or `d` (e.g. `5/3s`, `1000/1d`); all limits form one policy, checked and charged
    /// together; `@SPEC` counts this limit under its own key (same syntax as `--key`, e.g.
    /// `--limit 10/1s@header:x-api-key --limit 100/1m@header:x-tenant`), the others under
    /// `--key`
    #[arg(long = "limit", value_name = "N/DURATION[@SPEC]", action = ArgAction::Append, default_value = "10/1s", allow_hyphen_values = true)]
    pub(crate) rates: Vec<String>,

    /// also at most N requests in flight per key, across every instance sharing the store
    /// (leases lapse after 60 s if an instance dies mid-request); not with `--config`
    #[arg(long, value_name = "N", value_parser = args::concurrency, allow_hyphen_values = true)]
    pub(crate) concurrency: Option<u64>,

    /// the handler waits MS milliseconds before answering (to hold requests in flight)
    #[arg(long = "handler-delay-ms", value_name = "MS", default_value = "0", value_parser = args::handler_delay, allow_hyphen_values = true)]
    pub(crate) handler_delay: Duration,

    /// policies and routes from a TOML file (see `examples/redlimit.toml`; needs the `config`
    /// feature), reloaded whenever it changes; replaces `--algorithm`, `--limit` and `--key`
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub(crate) config: Option<PathBuf>,

    /// `ip` (the client address), `header:NAME`, `query:NAME`, `jwt`, `route`, `global`, or
    /// several joined with `+` (`route+ip`); over gRPC `metadata:NAME` and `method` mean
    /// `header:NAME` and `route`
    #[arg(long, value_name = "SPEC", default_value = "ip", value_parser = KeySpec::parse, allow_hyphen_values = true)]
    pub(crate) key: KeySpec,

    /// a proxy whose `X-Forwarded-For` is believed for `ip`
    #[arg(long = "trusted-proxy", value_name = "CIDR", action = ArgAction::Append, allow_hyphen_values = true)]
    pub(crate) trusted_proxies: Vec<String>,

    /// group IPv6 clients by /N
    #[arg(long, value_name = "N", default_value = "64", value_parser = args::ipv6_prefix, allow_hyphen_values = true)]
    pub(crate) ipv6_prefix: u8,

    /// HS256 secret verifying bearer tokens for `--key jwt` (feature `jwt`); must not be
    /// empty, and one under 32 bytes draws a warning
    #[arg(long, value_name = "SECRET", env = "REDLIMIT_JWT_SECRET", hide_env_values = true, value_parser = args::jwt_secret, allow_hyphen_values = true)]
    pub(crate) jwt_secret: Option<String>,

    /// `--jwt-secret` read from FILE (a mounted secret; one line)
    #[arg(
        long,
        value_name = "FILE",
        env = "REDLIMIT_JWT_SECRET_FILE",
        allow_hyphen_values = true
    )]
    pub(crate) jwt_secret_file: Option<PathBuf>,

    /// For `--key jwt`: verify RS256/384/512, PS256/384/512, ES256/384 and EdDSA tokens with
    /// the public keys of the JWKS document in FILE, re-read when it changes (feature `jwks`);
    /// instead of `--jwt-secret`
    #[arg(
        long,
        value_name = "FILE",
        env = "REDLIMIT_JWT_JWKS",
        allow_hyphen_values = true
    )]
    pub(crate) jwt_jwks: Option<PathBuf>,

    /// while the store fails: `local` (limit in this instance's memory; `local:N` when N
    /// instances share the limit), `open` (let requests through) or `closed` (answer 503)
    #[arg(long, value_name = "MODE", default_value = "local", value_parser = clap::value_parser!(OnStoreError), allow_hyphen_values = true)]
    pub(crate) on_store_error: OnStoreError,

    /// how long a request waits on the store, in milliseconds
    #[arg(long = "store-timeout-ms", value_name = "MS", default_value = "100", value_parser = args::store_timeout, allow_hyphen_values = true)]
    pub(crate) store_timeout: Duration,

    /// with a Redis store: local-first mode, deciding each key exactly while cold and in
    /// memory once hot, syncing with Redis every MS milliseconds (gcra, token-bucket,
    /// fixed-window, sliding-window)
    #[arg(long, value_name = "MS", value_parser = args::sync_ms, allow_hyphen_values = true)]
    pub(crate) sync_ms: Option<u64>,

    /// Redis key prefix
    #[arg(
        long,
        value_name = "NAME",
        default_value = "redlimit",
        allow_hyphen_values = true
    )]
    pub(crate) prefix: String,

    /// ask the store on every request, even for a key it denied moments ago
    #[arg(long)]
    pub(crate) no_deny_cache: bool,

    /// shadow mode: decide and record every request (store, metrics) but deny none, and send
    /// no rate-limit headers
    #[arg(long)]
    pub(crate) shadow: bool,

    /// penalty box: a key that the limit denies is denied for DURATION (`30s`, `15m`), on
    /// every instance sharing the store, `Retry-After` the time left (the `--limit` policy)
    #[arg(long, value_name = "DURATION", value_parser = args::penalty, allow_hyphen_values = true)]
    pub(crate) penalty: Option<Duration>,

    /// give a request's units back when its answer has a status of 500 or more (the server
    /// answers `GET /fail` with 500)
    #[arg(long = "refund-5xx")]
    pub(crate) refund_5xx: bool,

    /// rate-limit headers: `legacy` (`X-RateLimit-*`, the tightest limit), `ietf`
    /// (`RateLimit-Policy` and `RateLimit`, every limit), `both` or `none`
    #[arg(long, value_name = "STYLE", default_value = "legacy", value_parser = clap::value_parser!(HeaderStyle), allow_hyphen_values = true)]
    pub(crate) headers: HeaderStyle,

    /// the body of a 429 (and of the 503 of `--on-store-error closed`): `text` or
    /// `problem-json` (RFC 9457, naming the violated quota policies)
    #[arg(long, value_name = "BODY", default_value = "text", value_parser = clap::value_parser!(RejectBody), allow_hyphen_values = true)]
    pub(crate) reject_body: RejectBody,

    /// serve the metrics in Prometheus text format at `GET /metrics` on ADDR
    #[arg(long, value_name = "ADDR", value_parser = args::bind, allow_hyphen_values = true)]
    pub(crate) metrics_bind: Option<SocketAddr>,

    /// serve the admin endpoints on ADDR (with `--admin-token`): `GET /keys/POLICY/KEY` reads
    /// a key's state without consuming, `DELETE /keys/POLICY/KEY` resets it;
    /// `PUT`/`GET`/`DELETE /overrides/POLICY/KEY` sets (body: `{"limits": ["N/DUR", ...]}`),
    /// reads and removes its override; KEY is the client as SPEC=VALUE
    /// (`header:x-api-key=sk_live_123`, `ip=203.0.113.7`, `jwt=user-42`,
    /// `route=%2Fsearch&ip=203.0.113.7`) or the key's stored text, percent-encoded (the
    /// library's `redlimit::admin::router`, feature `admin`)
    #[arg(long, value_name = "ADDR", value_parser = args::bind, allow_hyphen_values = true)]
    pub(crate) admin_bind: Option<SocketAddr>,

    /// the bearer token the admin endpoints require (`Authorization: Bearer TOKEN`)
    #[arg(long, value_name = "TOKEN", env = "REDLIMIT_ADMIN_TOKEN", hide_env_values = true, value_parser = args::admin_token, allow_hyphen_values = true)]
    pub(crate) admin_token: Option<String>,

    /// `--admin-token` read from FILE (a mounted secret; one line)
    #[arg(
        long,
        value_name = "FILE",
        env = "REDLIMIT_ADMIN_TOKEN_FILE",
        allow_hyphen_values = true
    )]
    pub(crate) admin_token_file: Option<PathBuf>,

    /// print this help
    #[arg(short = 'h', long, action = ArgAction::SetTrue)]
    pub(crate) help: bool,
}

/// What `--help` says after the flags.
const FOOTER: &str = "Flags also accept the --flag=value form. A later value replaces an earlier \
                      one, except for repeatable flags, which add one. A flag given on the \
                      command line wins over its environment variable; secrets belong in the \
                      environment or in files, which other users cannot read in the process \
                      list.";

/// Where `--help` starts each flag's meaning.
const HELP_COLUMN: usize = 28;
/// Where `--help` wraps.
const HELP_WIDTH: usize = 100;

/// One flag as `--help` and examples/README.md show it: its synopsis (`--bind ADDR`) and its meaning
/// (the help, then whether it repeats and its default), in Markdown.
pub(crate) fn described() -> Vec<(String, String)> {
    Cli::command()
        .get_arguments()
        .map(|arg| {
            let long = format!("--{}", arg.get_long().unwrap_or_default());
            let names = match arg.get_short() {
                Some(short) => format!("-{short}, {long}"),
                None => long,
            };
            let takes_value = matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
            let synopsis = match arg.get_value_names().and_then(|v| v.first()) {
                Some(value) if takes_value => format!("{names} {value}"),
                _ => names,
            };
            let help = arg
                .get_help()
                .map(|help| help.to_string())
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let mut notes = Vec::new();
            if matches!(arg.get_action(), ArgAction::Append) {
                notes.push("repeatable".to_owned());
            }
            if let Some(default) = arg.get_default_values().first() {
                notes.push(format!("default `{}`", default.to_string_lossy()));
            }
            if let Some(var) = arg.get_env() {
                notes.push(format!("or `${}`", var.to_string_lossy()));
            }
            let meaning = if notes.is_empty() {
                help
            } else {
                format!("{help} ({})", notes.join("; "))
            };
            (synopsis, meaning)
        })
        .collect()
}

/// The text `--help` prints for `program`.
pub(crate) fn usage(program: &str) -> String {
    let mut text = format!("usage: {program} [OPTIONS]\n\n");
    for (synopsis, meaning) in described() {
        let synopsis = format!("  {synopsis}");
        let meaning = meaning.replace('`', "");
        let mut lines = wrap(&meaning, HELP_WIDTH - HELP_COLUMN).into_iter();
        let first = lines.next().unwrap_or_default();
        if synopsis.len() < HELP_COLUMN {
            text.push_str(&format!("{synopsis:HELP_COLUMN$}{first}\n"));
        } else {
            text.push_str(&format!("{synopsis}\n{:HELP_COLUMN$}{first}\n", ""));
        }
        for line in lines {
            text.push_str(&format!("{:HELP_COLUMN$}{line}\n", ""));
        }
    }
    text.push('\n');
    text.push_str(&wrap(FOOTER, HELP_WIDTH).join("\n"));
    text
}

/// The flag table of `examples/README.md`: `| flag | meaning |`, one row per flag.
pub(crate) fn markdown_table() -> String {
    let mut table = String::from("| flag | meaning |\n|---|---|\n");
    for (synopsis, meaning) in described() {
        table.push_str(&format!(
            "| `{synopsis}` | {} |\n",
            meaning.replace('|', "\\|")
        ));
    }
    table
}

/// `text` in lines of at most `width` characters, broken between words (a longer word gets a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- flags:begin -->";
    const END: &str = "<!-- flags:end -->";

    #[test]
    fn readme_table_is_generated_from_the_flags() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/README.md");
        let readme = std::fs::read_to_string(path).expect("read examples/README.md");
        let start = readme
            .find(BEGIN)
            .expect("examples/README.md lacks <!-- flags:begin -->");
        let end = readme
            .find(END)
            .expect("examples/README.md lacks <!-- flags:end -->");
        let in_readme = readme[start + BEGIN.len()..end].trim();
        let expected = markdown_table();
        assert!(
            in_readme == expected.trim(),
            "examples/README.md's flag table differs from the flags in examples/cli/flags.rs; \
             put this between {BEGIN} and {END}:\n\n{expected}"
        );
    }

    #[test]
    fn clap_accepts_the_declaration() {
        Cli::command().debug_assert();
    }

    #[test]
    fn usage_lists_every_flag_with_its_default() {
        let usage = usage("server");
        assert!(usage.starts_with("usage: server [OPTIONS]\n"));
        assert!(!usage.contains('`'));
        let words = usage.split_whitespace().collect::<Vec<_>>().join(" ");
        for (synopsis, meaning) in described() {
            assert!(usage.contains(&synopsis), "{synopsis}");
            if let Some((_, default)) = meaning.split_once("default `") {
                let default = default.split('`').next().unwrap_or_default();
                assert!(words.contains(&format!("default {default}")), "{synopsis}");
            }
        }
        assert!(usage.contains("  -h, --help                print this help\n"));
        assert!(
            usage.lines().all(|line| line.len() <= HELP_WIDTH),
            "{usage}"
        );
    }

    #[test]
    fn only_limit_and_trusted_proxy_repeat() {
        let repeatable: Vec<String> = described()
            .into_iter()
            .filter(|(_, meaning)| meaning.contains("repeatable"))
            .map(|(synopsis, _)| synopsis)
            .collect();
        assert_eq!(
            repeatable,
            ["--limit N/DURATION[@SPEC]", "--trusted-proxy CIDR"]
        );
    }

    #[test]
    fn wraps_between_words() {
        assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap("toolongword x", 4), ["toolongword", "x"]);
        assert!(wrap("", 10).is_empty());
    }
}
