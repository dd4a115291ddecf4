//! The watcher: reloads a config file when it changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::reload::Reloader;
use crate::error::ConfigError;

/// How long the file must stay quiet before it is read: an editor's save is several events
/// (truncate, write, rename), and a half-written file would be refused for nothing.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Watches a config file and reloads it on change; stops when dropped. Made by
/// [`Reloader::watch`].
///
/// The file's directory is watched, not the file, and any change in it (but reads) leads to
/// the file being read again, and applied if its text changed. So a file replaced by a rename
/// (as editors and config-management tools save) is followed, and so is a Kubernetes
/// ConfigMap, whose update swaps a `..data` symlink and never names the file itself.
///
/// ```no_run
/// # async fn run(layer: redlimit::RateLimitLayer) -> Result<(), redlimit::ConfigError> {
/// let watcher = redlimit::config::Reloader::new(layer.handle()).watch("redlimit.toml")?;
/// drop(watcher); // no more reloads
/// # Ok(()) }
/// ```
pub struct Watcher {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Reloader {
    /// Reloads the file at `path` whenever it changes (debounced), until the returned
    /// [`Watcher`] is dropped. Must be called inside a Tokio runtime. Fails if the file's
    /// directory cannot be watched.
    ///
    /// ```no_run
    /// # async fn run(layer: redlimit::RateLimitLayer) -> Result<(), redlimit::ConfigError> {
    /// use redlimit::config::Reloader;
    /// let _watcher = Reloader::new(layer.handle()).watch("redlimit.toml")?;
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, path: impl AsRef<Path>) -> Result<Watcher, ConfigError> {
        Watcher::start(self.clone(), path.as_ref())
    }
}

impl Watcher {
    fn start(reloader: Reloader, path: &Path) -> Result<Watcher, ConfigError> {
        let error = |reason: String| ConfigError::ReadFile {
            path: path.display().to_string(),
            reason,
        };
        if path.file_name().is_none() {
            return Err(error("not a file name".into()));
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (changed, mut changes) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                // Our own reads are events too: only writes, creations, renames and removals
                // count, of any entry (a ConfigMap's `..data` link is not the file's name).
                if !matches!(event.kind, EventKind::Access(_)) {
                    let _ = changed.send(());
                }
            })
            .map_err(|e| error(e.to_string()))?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| error(e.to_string()))?;
        let path = path.to_path_buf();
        // What the layer runs now: a change elsewhere in the directory reloads nothing.
        let mut applied = std::fs::read(&path).ok();
        let task = tokio::spawn(async move {
            while changes.recv().await.is_some() {
                loop {
                    match tokio::time::timeout(DEBOUNCE, changes.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
                let text = std::fs::read(&path).ok();
                if text.is_some() && text == applied {
                    continue;
                }
                // Logged by reload_from, and the previous configuration stays. A text that
                // fails is not read again until it changes.
                applied = text;
                let _ = reloader.reload_from(&path);
            }
        });
        Ok(Watcher {
            _watcher: watcher,
            task,
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}
