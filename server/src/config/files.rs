//! The config directory (`CONFIG_TYPE=FILE`), read at start and again whenever it changes.
//!
//! The directory is polled every second rather than watched: a poll sees every way a
//! deployment replaces files (an editor's rename, a `cp`, the `..data` symlink swap of a
//! Kubernetes ConfigMap, the runtime root's own symlink swap that envoyproxy/ratelimit's
//! `RUNTIME_WATCH_ROOT` waits for, a volume where inotify says nothing) at the cost of a few
//! `stat` calls. The files are parsed again only when what the poll sees changed. A config that
//! does not load keeps the one in force, and is counted
//! (`ratelimit_service_config_load_error`) and logged once per change.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use redlimit::rls::config::{RlsConfig, RlsConfigError};

use super::InForce;

/// How often the directory is looked at.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// Where the config files are and how to read them.
#[derive(Debug, Clone)]
pub(crate) struct ConfigDir {
    pub(crate) root: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) ignore_dotfiles: bool,
    pub(crate) merge_domains: bool,
}

impl ConfigDir {
    /// Reads and parses every config file.
    pub(crate) fn load(&self) -> Result<RlsConfig, RlsConfigError> {
        RlsConfig::load_dir(&self.dir, self.ignore_dotfiles, self.merge_domains)
    }

    /// What a poll compares: every entry's name, size, modification time and link target, and
    /// where the runtime root's link points.
    pub(crate) fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        std::fs::read_link(&self.root).ok().hash(&mut hasher);
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
                entries.sort_by_key(std::fs::DirEntry::file_name);
                for entry in entries {
                    let path = entry.path();
                    entry.file_name().hash(&mut hasher);
                    std::fs::read_link(&path).ok().hash(&mut hasher);
                    if let Ok(meta) = std::fs::metadata(&path) {
                        meta.len().hash(&mut hasher);
                        meta.modified().ok().hash(&mut hasher);
                    }
                }
            }
            _ => {
                "no directory".hash(&mut hasher);
            }
        }
        hasher.finish()
    }
}

/// Counts and logs a load's outcome.
pub(crate) fn record(dir: &Path, outcome: &Result<RlsConfig, RlsConfigError>) {
    match outcome {
        Ok(config) => {
            metrics::counter!("ratelimit_service_config_load_success").increment(1);
            tracing::info!(
                "config loaded from {}: {} domains",
                dir.display(),
                config.domains().count()
            );
        }
        Err(e) => {
            metrics::counter!("ratelimit_service_config_load_error").increment(1);
            tracing::error!(
                "config from {} not loaded, the one in force stays: {e}",
                dir.display()
            );
        }
    }
}

/// Polls the directory for ever, putting each config that loads in force. `seen` is the
/// directory's fingerprint taken before the config in force was read: taken when this task
/// first runs instead, a change written in between (a deploy right after the start) would
/// never be seen.
pub(crate) fn watch(dir: ConfigDir, seen: u64, in_force: InForce) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen = seen;
        let mut every = tokio::time::interval(POLL_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // Off the runtime's thread (the server's only one by default): a slow volume
            // stalls this task, not the decisions.
            let look = {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || {
                    let now = dir.fingerprint();
                    (now != seen).then(|| (now, dir.load()))
                })
                .await
            };
            let Ok(Some((now, outcome))) = look else {
                continue;
            };
            seen = now;
            record(&dir.dir, &outcome);
            if let Ok(config) = outcome {
                in_force.put_in_force(config);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config `deploy/compose.yaml` mounts loads, and answers what its Envoy asks.
    #[test]
    fn the_deployment_example_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/config");
        let config = RlsConfig::load_dir(&dir, false, false).expect("deploy/config loads");
        let domain = config.domain("rl").expect("domain rl");
        let every = domain
            .find(&[("generic_key", "everything")])
            .expect("generic_key");
        assert_eq!(every.limits().len(), 1);
        let per_key = domain.find(&[("api_key", "k1")]).expect("api_key");
        assert_eq!(per_key.limits().len(), 2);
    }
}
