//! Every flag of the command line, declared once in [`FLAGS`]: the parser, `--help` and the
//! README's flag table all read it.

use super::args::{self, Args, KeySpec};

/// Applies one value of a flag to the arguments, or says what is wrong with it (the parser puts
/// the flag's name in front of the message).
type Set = fn(&mut Args, String) -> Result<(), String>;

/// One flag.
#[derive(Clone, Copy)]
pub(crate) struct Flag {
    /// `--name`.
    pub(crate) name: &'static str,
    /// A one-dash alias, such as `-h`.
    pub(crate) short: Option<&'static str>,
    /// The value's placeholder (`ADDR`); `None` for a flag that takes no value.
    pub(crate) value: Option<&'static str>,
    /// What the flag means, in Markdown; `--help` shows it without backquotes.
    pub(crate) help: &'static str,
    /// The value applied when the flag is not given.
    pub(crate) default: Option<&'static str>,
    /// Each use adds a value instead of replacing the previous one.
    pub(crate) repeatable: bool,
    /// Applies one value.
    pub(crate) set: Set,
}

impl Flag {
    /// A flag taking a `value`, once, without a default.
    const fn new(name: &'static str, value: &'static str, help: &'static str, set: Set) -> Flag {
        Flag {
            name,
            short: None,
            value: Some(value),
            help,
            default: None,
            repeatable: false,
            set,
        }
    }

    /// A flag without a value; `set` receives an empty string.
    const fn switch(name: &'static str, help: &'static str, set: Set) -> Flag {
        Flag {
            value: None,
            ..Flag::new(name, "", help, set)
        }
    }

    const fn short(self, short: &'static str) -> Flag {
        Flag {
            short: Some(short),
            ..self
        }
    }

    const fn default(self, default: &'static str) -> Flag {
        Flag {
            default: Some(default),
            ..self
        }
    }

    const fn repeatable(self) -> Flag {
        Flag {
            repeatable: true,
            ..self
        }
    }

    /// How the flag is written: `--bind ADDR`, `-h, --help`.
    pub(crate) fn synopsis(&self) -> String {
        let names = match self.short {
            Some(short) => format!("{short}, {}", self.name),
            None => self.name.to_owned(),
        };
        match self.value {
            Some(value) => format!("{names} {value}"),
            None => names,
        }
    }

    /// The help followed by whether the flag repeats and its default, in Markdown.
    pub(crate) fn meaning(&self) -> String {
        let mut notes = Vec::new();
        if self.repeatable {
            notes.push("repeatable".to_owned());
        }
        if let Some(default) = self.default {
            notes.push(format!("default `{default}`"));
        }
        if notes.is_empty() {
            self.help.to_owned()
        } else {
            format!("{} ({})", self.help, notes.join("; "))
        }
    }
}

/// The flags, in the order `--help` lists them.
pub(crate) const FLAGS: &[Flag] = &[
    Flag::new("--bind", "ADDR", "address to listen on", |a, v| {
        a.bind = args::bind(&v)?;
        Ok(())
    })
    .default("127.0.0.1:3000"),
    Flag::new(
        "--redis",
        "URL",
        "a standalone Redis; without a Redis flag: the in-memory store",
        |a, v| {
            a.redis = Some(v);
            Ok(())
        },
    ),
    Flag::new(
        "--redis-cluster",
        "URLS",
        "a Redis Cluster: comma-separated URLs of some of its nodes",
        |a, v| {
            a.redis_cluster = Some(args::url_list(&v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--redis-sentinel",
        "URLS",
        "a master behind Sentinels: comma-separated Sentinel URLs (with `--sentinel-master`)",
        |a, v| {
            a.redis_sentinel = Some(args::url_list(&v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--sentinel-master",
        "NAME",
        "the master's name at the Sentinels (with `--redis-sentinel`)",
        |a, v| {
            a.sentinel_master = Some(v);
            Ok(())
        },
    ),
    Flag::new(
        "--algorithm",
        "NAME",
        "`fixed-window`, `sliding-window`, `sliding-log`, `token-bucket` or `gcra`",
        |a, v| {
            a.algorithm = args::algorithm(&v)?;
            Ok(())
        },
    )
    .default("gcra"),
    Flag::new(
        "--limit",
        "N/DURATION[@SPEC]",
        "at most N requests per DURATION, which is a whole number and a unit: `ms`, `s`, `m`, \
         `h` or `d` (e.g. `5/3s`, `1000/1d`); all limits form one policy, checked and charged \
         together; `@SPEC` counts this limit under its own key (same syntax as `--key`, e.g. \
         `--limit 10/1s@header:x-api-key --limit 100/1m@header:x-tenant`), the others under \
         `--key`",
        |a, v| {
            a.rates.push(v);
            Ok(())
        },
    )
    .repeatable()
    .default("10/1s"),
    Flag::new(
        "--concurrency",
        "N",
        "also at most N requests in flight per key, across every instance sharing the store \
         (leases lapse after 60 s if an instance dies mid-request); not with `--config`",
        |a, v| {
            a.concurrency = Some(args::concurrency(&v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--handler-delay-ms",
        "MS",
        "the handler waits MS milliseconds before answering (to hold requests in flight)",
        |a, v| {
            a.handler_delay = args::handler_delay(&v)?;
            Ok(())
        },
    )
    .default("0"),
    Flag::new(
        "--config",
        "FILE",
        "policies and routes from a TOML file (see `examples/redlimit.toml`; needs the `config` \
         feature), reloaded whenever it changes; replaces `--algorithm`, `--limit` and `--key`",
        |a, v| {
            a.config = Some(v.into());
            Ok(())
        },
    ),
    Flag::new(
        "--key",
        "SPEC",
        "`ip` (the client address), `header:NAME`, `query:NAME`, `jwt`, `route`, `global`, or \
         several joined with `+` (`route+ip`); over gRPC `metadata:NAME` and `method` mean \
         `header:NAME` and `route`",
        |a, v| {
            a.key = KeySpec::parse(&v)?;
            Ok(())
        },
    )
    .default("ip"),
    Flag::new(
        "--trusted-proxy",
        "CIDR",
        "a proxy whose `X-Forwarded-For` is believed for `ip`",
        |a, v| {
            a.trusted_proxies.push(v);
            Ok(())
        },
    )
    .repeatable(),
    Flag::new("--ipv6-prefix", "N", "group IPv6 clients by /N", |a, v| {
        a.ipv6_prefix = args::ipv6_prefix(&v)?;
        Ok(())
    })
    .default("64"),
    Flag::new(
        "--jwt-secret",
        "SECRET",
        "HS256 secret verifying bearer tokens for `--key jwt` (feature `jwt`); must not be \
         empty, and one under 32 bytes draws a warning",
        |a, v| {
            a.jwt_secret = Some(args::jwt_secret(v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--on-store-error",
        "MODE",
        "while the store fails: `local` (limit in this instance's memory; `local:N` when N \
         instances share the limit), `open` (let requests through) or `closed` (answer 503)",
        |a, v| {
            a.on_store_error = args::on_store_error(&v)?;
            Ok(())
        },
    )
    .default("local"),
    Flag::new(
        "--store-timeout-ms",
        "MS",
        "how long a request waits on the store, in milliseconds",
        |a, v| {
            a.store_timeout = args::store_timeout(&v)?;
            Ok(())
        },
    )
    .default("100"),
    Flag::new(
        "--sync-ms",
        "MS",
        "with a Redis store: local-first mode, deciding in memory and syncing with Redis every \
         MS milliseconds (gcra, token-bucket, fixed-window, sliding-window)",
        |a, v| {
            a.sync_ms = Some(args::sync_ms(&v)?);
            Ok(())
        },
    ),
    Flag::new("--prefix", "NAME", "Redis key prefix", |a, v| {
        a.prefix = v;
        Ok(())
    })
    .default("redlimit"),
    Flag::switch(
        "--no-deny-cache",
        "ask the store on every request, even for a key it denied moments ago",
        |a, _| {
            a.deny_cache = false;
            Ok(())
        },
    ),
    Flag::switch(
        "--shadow",
        "shadow mode: decide and record every request (store, metrics) but deny none, and send \
         no rate-limit headers",
        |a, _| {
            a.shadow = true;
            Ok(())
        },
    ),
    Flag::new(
        "--penalty",
        "DURATION",
        "penalty box: a key that the limit denies is denied for DURATION (`30s`, `15m`), on \
         every instance sharing the store, `Retry-After` the time left (the `--limit` policy)",
        |a, v| {
            a.penalty = Some(args::penalty(&v)?);
            Ok(())
        },
    ),
    Flag::switch(
        "--refund-5xx",
        "give a request's units back when its answer has a status of 500 or more (the server \
         answers `GET /fail` with 500)",
        |a, _| {
            a.refund_5xx = true;
            Ok(())
        },
    ),
    Flag::new(
        "--headers",
        "STYLE",
        "rate-limit headers: `legacy` (`X-RateLimit-*`, the tightest limit), `ietf` \
         (`RateLimit-Policy` and `RateLimit`, every limit), `both` or `none`",
        |a, v| {
            a.headers = args::headers(&v)?;
            Ok(())
        },
    )
    .default("legacy"),
    Flag::new(
        "--metrics-bind",
        "ADDR",
        "serve the metrics in Prometheus text format at `GET /metrics` on ADDR",
        |a, v| {
            a.metrics_bind = Some(args::bind(&v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--admin-bind",
        "ADDR",
        "serve the admin endpoints on ADDR (with `--admin-token`): `GET /keys/POLICY/KEY` reads \
         a key's state without consuming, `DELETE /keys/POLICY/KEY` resets it; \
         `PUT`/`GET`/`DELETE /overrides/POLICY/KEY` sets (body: one N/DUR per line), reads and \
         removes its override",
        |a, v| {
            a.admin_bind = Some(args::bind(&v)?);
            Ok(())
        },
    ),
    Flag::new(
        "--admin-token",
        "TOKEN",
        "the bearer token the admin endpoints require (`Authorization: Bearer TOKEN`)",
        |a, v| {
            a.admin_token = Some(args::admin_token(v)?);
            Ok(())
        },
    ),
    Flag::switch("--help", "print this help", |a, _| {
        a.help = true;
        Ok(())
    })
    .short("-h"),
];

/// The flag written `name` (`--bind` or `-h`), if there is one.
pub(crate) fn find(name: &str) -> Option<&'static Flag> {
    FLAGS
        .iter()
        .find(|flag| flag.name == name || flag.short == Some(name))
}

/// Where `--help` starts each flag's meaning.
const HELP_COLUMN: usize = 28;
/// Where `--help` wraps.
const HELP_WIDTH: usize = 100;

/// What `--help` says after the flags.
const FOOTER: &str = "Flags also accept the --flag=value form. A later value replaces an earlier \
                      one, except for repeatable flags, which add one.";

/// The text `--help` prints for `program`.
pub(crate) fn usage(program: &str) -> String {
    let mut text = format!("usage: {program} [OPTIONS]\n\n");
    for flag in FLAGS {
        let synopsis = format!("  {}", flag.synopsis());
        let meaning = flag.meaning().replace('`', "");
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

/// The README's flag table: `| flag | meaning |`, one row per flag.
pub(crate) fn markdown_table() -> String {
    let mut table = String::from("| flag | meaning |\n|---|---|\n");
    for flag in FLAGS {
        table.push_str(&format!(
            "| `{}` | {} |\n",
            flag.synopsis(),
            flag.meaning().replace('|', "\\|")
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
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).expect("read README.md");
        let start = readme
            .find(BEGIN)
            .expect("README.md lacks <!-- flags:begin -->");
        let end = readme
            .find(END)
            .expect("README.md lacks <!-- flags:end -->");
        let in_readme = readme[start + BEGIN.len()..end].trim();
        let expected = markdown_table();
        assert!(
            in_readme == expected.trim(),
            "README.md's flag table differs from FLAGS in examples/cli/flags.rs; \
             put this between {BEGIN} and {END}:\n\n{expected}"
        );
    }

    #[test]
    fn names_are_unique_long_flags() {
        for (i, flag) in FLAGS.iter().enumerate() {
            assert!(flag.name.starts_with("--"), "{}", flag.name);
            assert!(
                FLAGS[..i].iter().all(|earlier| earlier.name != flag.name),
                "{} twice",
                flag.name
            );
        }
    }

    #[test]
    fn usage_lists_every_flag_with_its_default() {
        let usage = usage("server");
        assert!(usage.starts_with("usage: server [OPTIONS]\n"));
        assert!(!usage.contains('`'));
        let words = usage.split_whitespace().collect::<Vec<_>>().join(" ");
        for flag in FLAGS {
            assert!(usage.contains(&flag.synopsis()), "{}", flag.name);
            if let Some(default) = flag.default {
                assert!(
                    words.contains(&format!("default {default}")),
                    "{}",
                    flag.name
                );
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
        let repeatable: Vec<_> = FLAGS
            .iter()
            .filter(|f| f.repeatable)
            .map(|f| f.name)
            .collect();
        assert_eq!(repeatable, ["--limit", "--trusted-proxy"]);
    }

    #[test]
    fn finds_long_and_short_names() {
        assert_eq!(find("--bind").map(|f| f.name), Some("--bind"));
        assert_eq!(find("-h").map(|f| f.name), Some("--help"));
        assert!(find("--bogus").is_none());
        assert!(find("bind").is_none());
    }

    #[test]
    fn wraps_between_words() {
        assert_eq!(wrap("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(wrap("toolongword x", 4), ["toolongword", "x"]);
        assert!(wrap("", 10).is_empty());
    }
}
