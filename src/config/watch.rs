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
/// The file's directory is watched, not the file, so that a file replaced by a rename (as
/// editors and config-management tools save) is still followed.
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

impl Watcher {
    pub(super) fn start(reloader: Reloader, path: &Path) -> Result<Watcher, ConfigError> {
        let error = |reason: String| ConfigError::ReadFile {
            path: path.display().to_string(),
            reason,
        };
        let name = path
            .file_name()
            .ok_or_else(|| error("not a file name".into()))?
            .to_owned();
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (changed, mut changes) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                // Our own reads are events too: only writes, creations, renames and removals count.
                let touches = event.paths.iter().any(|p| p.file_name() == Some(&name));
                if touches && !matches!(event.kind, EventKind::Access(_)) {
                    let _ = changed.send(());
                }
            })
            .map_err(|e| error(e.to_string()))?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| error(e.to_string()))?;
        let path = path.to_path_buf();
        let task = tokio::spawn(async move {
            while changes.recv().await.is_some() {
                loop {
                    match tokio::time::timeout(DEBOUNCE, changes.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => return,
                        Err(_quiet) => break,
                    }
                }
                // Logged by reload_from, and the previous configuration stays.
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
