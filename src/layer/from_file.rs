//! A layer from a config file, and the handle that reloads it (feature `config`).

use std::sync::Arc;

use super::layer::RateLimitLayer;
use crate::config::{ConfigFile, ReloadHandle};
use crate::store::Store;

impl RateLimitLayer {
    /// A layer enforcing `file`'s policies on its routes (and its default rule, if any), in
    /// `store`. The other settings are the builder's, as on [`per_route`](Self::per_route).
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::RateLimitLayer;
    /// let file = ConfigFile::load(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/redlimit.toml"))?;
    /// let layer = RateLimitLayer::from_config(MemoryStore::new(), &file).deny_cache(0);
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn from_config(store: impl Store, file: &ConfigFile) -> Self {
        RateLimitLayer::per_route(store).edit(|config| file.apply_to(config))
    }

    /// A handle that reloads this layer's policies and routes for every clone of it and every
    /// service made from it. Take it after the last builder call: a builder call makes a new
    /// layer, which the handle does not reach.
    ///
    /// ```
    /// use redlimit::config::ConfigFile;
    /// use redlimit::store::MemoryStore;
    /// use redlimit::RateLimitLayer;
    /// let layer = RateLimitLayer::from_config(MemoryStore::new(), &ConfigFile::parse("")?);
    /// let handle = layer.reload_handle();
    /// # Ok::<(), redlimit::ConfigError>(())
    /// ```
    pub fn reload_handle(&self) -> ReloadHandle {
        ReloadHandle::new(Arc::clone(&self.config), self.cell())
    }
}
