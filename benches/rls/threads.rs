//! The bench process's own CPU by part, from `/proc/self/task/*/stat`: the load generator (the
//! client's single-threaded runtime, on the main thread), the delaying proxy (its runtime's
//! threads, named [`PROXY_THREADS`]) and the rest (the process's total, which keeps the time of
//! threads that have exited, less the two). Counted in clock ticks (10 ms): plenty over seconds.

use std::path::Path;

use crate::support::cpu_us;

/// The name the proxy's runtime gives its threads (workers and blocking pool alike).
pub(crate) const PROXY_THREADS: &str = "proxy";

/// CPU time used so far, µs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Split {
    pub(crate) client_us: f64,
    pub(crate) proxy_us: f64,
    pub(crate) total_us: f64,
}

impl Split {
    /// This process's threads now.
    pub(crate) fn now() -> Split {
        let main = std::process::id().to_string();
        let mut split = Split {
            total_us: cpu_us(Path::new("/proc/self")),
            ..Split::default()
        };
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return split;
        };
        for task in tasks.flatten() {
            let dir = task.path();
            if task.file_name().to_string_lossy() == main {
                split.client_us += cpu_us(&dir);
            } else if std::fs::read_to_string(dir.join("comm"))
                .is_ok_and(|name| name.trim_end() == PROXY_THREADS)
            {
                split.proxy_us += cpu_us(&dir);
            }
        }
        split
    }

    /// What was used from `earlier` to `self`.
    pub(crate) fn since(&self, earlier: &Split) -> Split {
        Split {
            client_us: self.client_us - earlier.client_us,
            proxy_us: self.proxy_us - earlier.proxy_us,
            total_us: self.total_us - earlier.total_us,
        }
    }

    /// What was used by neither part (threads that exited in the window count here).
    pub(crate) fn other_us(&self) -> f64 {
        (self.total_us - self.client_us - self.proxy_us).max(0.0)
    }

    pub(crate) fn add(&mut self, other: &Split) {
        self.client_us += other.client_us;
        self.proxy_us += other.proxy_us;
        self.total_us += other.total_us;
    }
}
