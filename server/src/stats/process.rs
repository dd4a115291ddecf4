//! The standard process series of every Prometheus client (client_golang's process collector,
//! which the Go service's `/metrics` has): CPU seconds, resident and virtual memory, open and
//! maximum file descriptors, start time. Read from `/proc` by `procfs` when scraped, so nothing
//! runs while nobody scrapes; Linux only, where they exist (elsewhere none is written).

use std::fmt::Write as _;

/// The series in Prometheus's text format, to append to a scrape; empty where they cannot be
/// read.
pub(crate) fn render() -> String {
    let mut out = String::new();
    #[cfg(target_os = "linux")]
    if let Some(series) = linux::read() {
        for (name, kind, help, value) in series {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    }
    out
}

#[cfg(target_os = "linux")]
mod linux {
    use procfs::process::{LimitValue, Process};

    /// (name, type, help, value), client_golang's.
    pub(super) type Series = (&'static str, &'static str, &'static str, f64);

    pub(super) fn read() -> Option<Vec<Series>> {
        let me = Process::myself().ok()?;
        let stat = me.stat().ok()?;
        let ticks = procfs::ticks_per_second() as f64;
        let mut series = vec![
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                (stat.utime + stat.stime) as f64 / ticks,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                (stat.rss * procfs::page_size()) as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                stat.vsize as f64,
            ),
        ];
        if let Ok(boot) = procfs::boot_time_secs() {
            series.push((
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                boot as f64 + stat.starttime as f64 / ticks,
            ));
        }
        if let Ok(open) = me.fd_count() {
            series.push((
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                open as f64,
            ));
        }
        if let Ok(limits) = me.limits() {
            let value = |limit: LimitValue| match limit {
                LimitValue::Value(v) => v as f64,
                // client_golang's procfs reads "unlimited" as the largest uint64.
                LimitValue::Unlimited => u64::MAX as f64,
            };
            series.push((
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                value(limits.max_open_files.soft_limit),
            ));
            series.push((
                "process_virtual_memory_max_bytes",
                "gauge",
                "Maximum amount of virtual memory available in bytes.",
                value(limits.max_address_space.soft_limit),
            ));
        }
        Some(series)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_series_are_read_from_proc() {
        let text = super::render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} in {text}"));
            let value: f64 = line[name.len() + 1..].parse().expect("a number");
            assert!(value > 0.0 || name == "process_cpu_seconds_total", "{line}");
        }
        assert!(text.contains("# TYPE process_cpu_seconds_total counter"));
    }
}
