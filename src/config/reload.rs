//! The reloader: puts a config file's rules in force through a layer's handle.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::file::ConfigFile;
use crate::error::ConfigError;
use crate::layer::Handle;

/// Puts a config file's rules in force in a layer, its clones and every service made from
/// them, at once, without a restart, through the layer's [`Handle`]; counts what it applied and
/// refused (also in `redlimit_config_reloads_total{result}` with the `metrics` feature, a
/// refusal with a `reason`: `unreadable`, `invalid` or `no_rules`). Cheap to clone.
///
/// A reload keeps every other setting of the layer (store, key fallbacks, deadlines, ...), and
/// the state of the limits (see [`Handle::replace_rules`]).
///
/// ```
/// use redlimit::config::{ConfigFile, Reloader};
/// use redlimit::store::MemoryStore;
/// use redlimit::RateLimitLayer;
/// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
/// let reloader = Reloader::new(layer.handle());
/// assert!(reloader.reload_from("/nonexistent.toml").is_err());
/// assert_eq!((reloader.applied(), reloader.refused()), (0, 1));
/// # Ok::<(), redlimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Reloader {
    inner: Arc<Inner>,
}

struct Inner {
    handle: Handle,
    applied: AtomicU64,
    refused: AtomicU64,
}

impl Reloader {
    /// A reloader of the layer `handle` steers.
    ///
    /// ```
    /// # use redlimit::config::Reloader;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// let reloader = Reloader::new(layer.handle());
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn new(handle: Handle) -> Self {
        Reloader {
            inner: Arc::new(Inner {
                handle,
                applied: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Puts `file`'s rules in force ([`ConfigFile::rules`]). Requests already being decided finish
    /// under the rules they started with.
    ///
    /// ```
    /// # use redlimit::config::{ConfigFile, Reloader};
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// # let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// Reloader::new(layer.handle()).apply(&ConfigFile::parse("allow_no_rules = true")?);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn apply(&self, file: &ConfigFile) {
        self.inner.handle.replace_rules(file.rules());
        self.inner.applied.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::config_applied();
    }

    /// Loads the file at `path` and [`apply`](Self::apply)s it. A file that cannot be read,
    /// parsed or validated is refused: the error is logged (`tracing::error!`) and returned,
    /// and the configuration in force stays. So is a file without any rule
    /// ([`ConfigError::NoRules`]: an empty file, as a deploy that truncates then writes leaves
    /// it for a moment) unless it says `allow_no_rules = true`: the rules in force keep
    /// limiting until the new text arrives.
    ///
    /// ```
    /// # use redlimit::config::Reloader;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// # let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml");
    /// Reloader::new(layer.handle()).reload_from(example)?;
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
                let reason = refusal(&error);
                crate::telemetry::config_refused(reason);
                tracing::error!(
                    path = %path.display(),
                    reason,
                    %error,
                    "rate-limit config refused; the previous configuration stays in force"
                );
                Err(error)
            }
        }
    }

    /// How many configurations were put in force (by [`apply`](Self::apply) or a reload).
    ///
    /// ```
    /// # use redlimit::config::Reloader;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// assert_eq!(Reloader::new(layer.handle()).applied(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn applied(&self) -> u64 {
        self.inner.applied.load(Ordering::Relaxed)
    }

    /// How many reloads were refused (a file that could not be read, parsed or validated, or
    /// that had no rules without saying `allow_no_rules = true`).
    ///
    /// ```
    /// # use redlimit::config::Reloader;
    /// # use redlimit::store::MemoryStore;
    /// # use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::builder_per_route(MemoryStore::new()).build()?;
    /// assert_eq!(Reloader::new(layer.handle()).refused(), 0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }
}

/// The `reason` label of a refused reload: a word of a fixed few.
fn refusal(error: &ConfigError) -> &'static str {
    match error {
        ConfigError::ReadFile { .. } => "unreadable",
        ConfigError::NoRules => "no_rules",
        _ => "invalid",
    }
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader")
            .field("applied", &self.applied())
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}
