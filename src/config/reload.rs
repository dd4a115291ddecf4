//! The reload handle: swaps a layer's rules for every service made from it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::file::ConfigFile;
use super::watch::Watcher;
use crate::error::ConfigError;
use crate::layer::{Config, Decider};

/// Replaces the policies and routes of a layer, of its clones and of every service made from
/// it, at once, without a restart. Made by
/// [`RateLimitLayer::reload_handle`](crate::RateLimitLayer::reload_handle); cheap to clone.
///
/// A reload keeps every other setting of the layer (store, key fallbacks, deadlines, ...), and
/// the state of the limits (see the [module docs](crate::config)). It empties the deny cache
/// and starts the in-memory fallback's decider afresh; the fallback's counts are kept, under the
/// same state keys as the store's.
///
/// ```
/// use redlimit::config::ConfigFile;
/// use redlimit::store::MemoryStore;
/// use redlimit::RateLimitLayer;
/// let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
/// let handle = layer.reload_handle();
/// assert!(handle.reload_from("/nonexistent.toml").is_err());
/// assert_eq!((handle.applied(), handle.refused()), (0, 1));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct ReloadHandle {
    inner: Arc<Inner>,
}

struct Inner {
    /// The layer's settings; a reload replaces their rules in a copy.
    base: Arc<Config>,
    cell: Arc<ArcSwap<crate::layer::Decider>>,
    applied: AtomicU64,
    refused: AtomicU64,
}

impl ReloadHandle {
    pub(crate) fn new(base: Arc<Config>, cell: Arc<ArcSwap<Decider>>) -> Self {
        ReloadHandle {
            inner: Arc::new(Inner {
                base,
                cell,
                applied: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Puts `file`'s policies and routes in force. Requests already being decided finish
    /// under the rules they started with.
    ///
    /// ```
    /// # use redlimit::config::ConfigFile;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// # let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
    /// layer.reload_handle().apply(&ConfigFile::parse("")?);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn apply(&self, file: &ConfigFile) {
        let mut config = Config::clone(&self.inner.base);
        file.apply_to(&mut config);
        self.inner
            .cell
            .store(Arc::new(Decider::new(Arc::new(config))));
        self.inner.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// Loads the file at `path` and [`apply`](Self::apply)s it. A file that cannot be read,
    /// parsed or validated is refused: the error is logged (`tracing::error!`) and returned,
    /// and the configuration in force stays.
    ///
    /// ```
    /// # use redlimit::config::ConfigFile;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// # let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
    /// let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml");
    /// layer.reload_handle().reload_from(example)?;
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn reload_from(&self, path: impl AsRef<Path>) -> Result<(), ConfigError> {
        let path = path.as_ref();
        match ConfigFile::load(path) {
            Ok(file) => {
                self.apply(&file);
                tracing::info!(path = %path.display(), "rate-limit config reloaded");
                Ok(())
            }
            Err(error) => {
                self.inner.refused.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    path = %path.display(),
                    %error,
                    "rate-limit config refused; the previous configuration stays in force"
                );
                Err(error)
            }
        }
    }

    /// Reloads the file at `path` whenever it changes (debounced), until the returned
    /// [`Watcher`] is dropped. Must be called inside a Tokio runtime. Fails if the file's
    /// directory cannot be watched.
    ///
    /// ```no_run
    /// # async fn run(layer: redlimit::RateLimitLayer) -> Result<(), redlimit::ConfigError> {
    /// let _watcher = layer.reload_handle().watch("redlimit.toml")?;
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, path: impl AsRef<Path>) -> Result<Watcher, ConfigError> {
        Watcher::start(self.clone(), path.as_ref())
    }

    /// How many configurations were put in force (by [`apply`](Self::apply) or a reload).
    ///
    /// ```
    /// # use redlimit::config::ConfigFile;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
    /// assert_eq!(layer.reload_handle().applied(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn applied(&self) -> u64 {
        self.inner.applied.load(Ordering::Relaxed)
    }

    /// How many reloads were refused (a file that could not be read, parsed or validated).
    ///
    /// ```
    /// # use redlimit::config::ConfigFile;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
    /// assert_eq!(layer.reload_handle().refused(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for ReloadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadHandle")
            .field("applied", &self.applied())
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}
