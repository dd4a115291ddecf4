//! The statistics' settings: statsd (envoyproxy/ratelimit's default sink, gostats' lines),
//! Prometheus, or nothing, as the Go service's variables give them.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::parse::{ExtraTags, extra_tags, go_bool, go_duration, listen_addr};

/// Where the statistics go.
#[derive(Debug, Clone, Args)]
pub(crate) struct StatsSettings {
    /// Send statistics to statsd (default: true, as in the Go service, unless
    /// USE_PROMETHEUS=true, which that service refuses beside it).
    #[arg(long, env = "USE_STATSD", value_parser = go_bool)]
    pub(crate) use_statsd: Option<bool>,
    /// Send statistics as DogStatsD lines over UDP to STATSD_HOST:STATSD_PORT (instead of
    /// statsd: not both, they share the address).
    #[arg(long, env = "USE_DOG_STATSD", default_value = "false", value_parser = go_bool)]
    pub(crate) use_dog_statsd: bool,
    /// The DogStatsD mogrifiers, comma-separated, each read from
    /// `DOG_STATSD_MOGRIFIER_<NAME>_{PATTERN,NAME,TAGS}`.
    #[arg(long, env = "USE_DOG_STATSD_MOGRIFIERS", default_value = "", value_parser = names)]
    pub(crate) use_dog_statsd_mogrifiers: Names,
    /// The statsd host.
    #[arg(long, env = "STATSD_HOST", default_value = "localhost")]
    pub(crate) statsd_host: String,
    /// The statsd port.
    #[arg(long, env = "STATSD_PORT", default_value_t = 8125)]
    pub(crate) statsd_port: u16,
    /// How to reach statsd: tcp (gostats' default) or udp.
    #[arg(
        long,
        env = "STATSD_PROTOCOL",
        default_value = "tcp",
        value_enum,
        ignore_case = true
    )]
    pub(crate) statsd_protocol: StatsdProtocol,
    /// Tags of every statsd name (`k1:v1,k2:v2`), appended as gostats does (`.__k1=v1`).
    #[arg(long, env = "EXTRA_TAGS", default_value = "", value_parser = extra_tags)]
    pub(crate) extra_tags: ExtraTags,
    /// How often the counters are sent to statsd.
    #[arg(long, env = "STATS_FLUSH_INTERVAL", default_value = "10s", value_parser = flush_interval)]
    pub(crate) stats_flush_interval: Duration,
    /// No statistics at all, whatever USE_STATSD and USE_PROMETHEUS say.
    #[arg(long, env = "DISABLE_STATS", default_value = "false", value_parser = go_bool)]
    pub(crate) disable_stats: bool,
    /// Serve Prometheus metrics.
    #[arg(long, env = "USE_PROMETHEUS", default_value = "false", value_parser = go_bool)]
    pub(crate) use_prometheus: bool,
    /// Where to serve them (`:9090` is every address, port 9090).
    #[arg(long, env = "PROMETHEUS_ADDR", default_value = ":9090", value_parser = listen_addr)]
    pub(crate) prometheus_addr: SocketAddr,
    /// The path of the metrics.
    #[arg(long, env = "PROMETHEUS_PATH", default_value = "/metrics")]
    pub(crate) prometheus_path: String,
    /// A statsd_exporter mapping file: the Go service's statsd names made Prometheus metrics
    /// by its rules instead of the built-in mapping's (see `mapper`); empty is unset, as in
    /// the Go service.
    #[arg(long, env = "PROMETHEUS_MAPPER_YAML", default_value = "")]
    pub(crate) prometheus_mapper_yaml: String,
    /// The Go service's legacy response time: `ratelimit_service_response_time_seconds`
    /// observed in milliseconds.
    #[arg(
        long,
        env = "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
        default_value = "false",
        value_parser = go_bool
    )]
    pub(crate) prometheus_response_time_as_milliseconds: bool,
}

/// The statsd transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StatsdProtocol {
    /// One connection, reconnected when it breaks.
    Tcp,
    /// Datagrams of at most 1432 bytes (no fragmentation on a 1500-byte MTU).
    Udp,
}

impl StatsSettings {
    /// Whether statsd is on: `USE_STATSD` when set; unset, on unless Prometheus or DogStatsD
    /// is (the Go service cannot start with two of them, so no deployment of it has two by
    /// default).
    pub(crate) fn statsd(&self) -> bool {
        !self.disable_stats
            && self
                .use_statsd
                .unwrap_or(!self.use_prometheus && !self.use_dog_statsd)
    }

    /// Whether DogStatsD is on; an error when statsd is too (both would send to the same
    /// address).
    pub(crate) fn dog_statsd(&self) -> Result<bool, String> {
        let on = !self.disable_stats && self.use_dog_statsd;
        if on && self.statsd() {
            return Err(
                "USE_DOG_STATSD=true and USE_STATSD=true: both would send to \
                        STATSD_HOST:STATSD_PORT; set USE_STATSD=false"
                    .to_owned(),
            );
        }
        Ok(on)
    }

    /// The mapping file, when one is given.
    pub(crate) fn mapper_yaml(&self) -> Option<&Path> {
        Some(Path::new(&self.prometheus_mapper_yaml)).filter(|p| !p.as_os_str().is_empty())
    }

    /// Whether the Prometheus listener is on.
    pub(crate) fn prometheus(&self) -> bool {
        !self.disable_stats && self.use_prometheus
    }
}

/// A comma-separated list, blanks around each item and empty items dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Names(pub(crate) Vec<String>);

fn names(text: &str) -> Result<Names, String> {
    Ok(Names(
        text.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect(),
    ))
}

fn flush_interval(text: &str) -> Result<Duration, String> {
    match go_duration(text)? {
        Duration::ZERO => Err("the flush interval must be above 0".to_owned()),
        interval => Ok(interval),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Only {
        #[command(flatten)]
        stats: StatsSettings,
    }

    fn parse(args: &[&str]) -> StatsSettings {
        Only::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .expect("parses")
            .stats
    }

    #[test]
    fn statsd_is_on_by_default_unless_prometheus_is_chosen_alone() {
        let read = [
            "USE_STATSD",
            "USE_PROMETHEUS",
            "USE_DOG_STATSD",
            "DISABLE_STATS",
        ];
        if let Some(set) = read.iter().find(|v| std::env::var_os(v).is_some()) {
            eprintln!("{set} is set: the defaults cannot be seen");
            return;
        }
        assert!(parse(&[]).statsd(), "the Go service's default");
        let prometheus = parse(&["--use-prometheus"]);
        assert!(!prometheus.statsd() && prometheus.prometheus());
        let both = parse(&["--use-prometheus", "--use-statsd", "1"]);
        assert!(both.statsd() && both.prometheus());
        let off = parse(&["--use-prometheus", "--disable-stats"]);
        assert!(!off.statsd() && !off.prometheus());
        assert!(Only::try_parse_from(["x", "--stats-flush-interval", "0"]).is_err());
        let dog = parse(&["--use-dog-statsd"]);
        assert!(
            !dog.statsd() && dog.dog_statsd() == Ok(true),
            "DogStatsD instead of statsd"
        );
        let two = parse(&["--use-dog-statsd", "--use-statsd", "1"]);
        assert!(two.dog_statsd().is_err(), "one address, two formats");
        let off = parse(&["--use-dog-statsd", "--disable-stats"]);
        assert!(!off.statsd() && off.dog_statsd() == Ok(false));
        let dog = parse(&["--use-dog-statsd-mogrifiers", " a, ,B "]);
        assert_eq!(dog.use_dog_statsd_mogrifiers.0, ["a", "B"]);
    }
}
