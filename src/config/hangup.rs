//! Reloading on `SIGHUP`, the signal operators send a daemon to re-read its configuration.

use std::path::{Path, PathBuf};

use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

use super::reload::Reloader;
use crate::error::ConfigError;

/// Reloads a config file each time the process receives `SIGHUP`; stops when dropped (the
/// signal then keeps Tokio's handler: it no longer terminates the process). Made by
/// [`Reloader::reload_on_hangup`].
///
/// ```no_run
/// # async fn run(layer: redlimit::RateLimitLayer) -> Result<(), redlimit::ConfigError> {
/// let _hangup = redlimit::config::Reloader::new(layer.handle()).reload_on_hangup("redlimit.toml")?;
/// // kill -HUP <pid> reloads the file now
/// # Ok(()) }
/// ```
pub struct Hangup {
    task: JoinHandle<()>,
}

impl Reloader {
    /// Reloads the file at `path` each time the process receives `SIGHUP`, until the returned
    /// [`Hangup`] is dropped: for operators who reload by signal, and for
    /// mounts whose changes no file event announces. Must be called inside a Tokio runtime.
    ///
    /// ```no_run
    /// # async fn run(layer: redlimit::RateLimitLayer) -> Result<(), redlimit::ConfigError> {
    /// use redlimit::config::Reloader;
    /// let reloader = Reloader::new(layer.handle());
    /// let _watcher = reloader.watch("redlimit.toml")?;
    /// let _hangup = reloader.reload_on_hangup("redlimit.toml")?;
    /// # Ok(()) }
    /// ```
    pub fn reload_on_hangup(&self, path: impl AsRef<Path>) -> Result<Hangup, ConfigError> {
        Hangup::start(self.clone(), path.as_ref())
    }
}

impl Hangup {
    fn start(reloader: Reloader, path: &Path) -> Result<Hangup, ConfigError> {
        let mut hangups = signal(SignalKind::hangup()).map_err(|err| ConfigError::ReadFile {
            path: path.display().to_string(),
            reason: format!("listening for SIGHUP: {err}"),
        })?;
        let path: PathBuf = path.to_path_buf();
        let task = tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                // Logged by reload_from, and the previous configuration stays.
                let _ = reloader.reload_from(&path);
            }
        });
        Ok(Hangup { task })
    }
}

impl Drop for Hangup {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hangup").finish_non_exhaustive()
    }
}
