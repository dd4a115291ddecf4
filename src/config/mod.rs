//! Policies and routes from a TOML file, reloaded live (feature `config`).
//!
//! A [`ConfigFile`] holds named policies (each one or more limits: an algorithm and `N/period`)
//! and route rules (a route pattern, the policy it applies, and the key spec it counts under),
//! plus an optional default rule for every other request.
//! [`ConfigFile::rules`] gives its [`Rule`](crate::layer::Rule)s, for
//! [`RateLimitBuilder::rules`](crate::layer::RateLimitBuilder::rules); a [`Reloader`] puts a
//! file's rules in force through the layer's [`Handle`](crate::layer::Handle), for every clone
//! of the layer and every service already made, at once, and [`Reloader::watch`] reloads the
//! file whenever it changes.
//!
//! A file that does not parse or does not validate is refused with an error (logged by the
//! watcher with `tracing::error!`) and the configuration in force stays. So is a file without
//! any rule ([`ConfigError::NoRules`](crate::ConfigError::NoRules)), at start as on a reload:
//! an empty or half-written file (a deploy that truncates, then writes) would limit nothing.
//! A file that means it says `allow_no_rules = true`. State is kept across
//! a reload: state keys name a limit's policy, its position and its algorithm, not its `N` or
//! period, so a limit that did not change keeps its counts, and a limit whose `N` changed keeps
//! the units already used. The deny cache is emptied by a reload (its entries name rules by
//! their position, which a reload may change).
//!
//! ```
//! use redlimit::config::{ConfigFile, Reloader};
//! use redlimit::store::MemoryStore;
//! use redlimit::RateLimitLayer;
//!
//! let file = ConfigFile::parse(r#"
//!     [[policy]]
//!     name = "login"
//!     limits = [{ algorithm = "sliding-log", rate = "5/1m" }]
//!
//!     [[route]]
//!     route = "POST /login"
//!     policy = "login"
//!     key = "ip"
//! "#)?;
//! let layer = RateLimitLayer::builder_per_route(MemoryStore::new())
//!     .rules(file.rules())
//!     .build()?;
//! let reloader = Reloader::new(layer.handle());
//! reloader.apply(&ConfigFile::parse(r#"
//!     [[policy]]
//!     name = "login"
//!     limits = [{ algorithm = "sliding-log", rate = "10/1m" }]
//!
//!     [[route]]
//!     route = "POST /login"
//!     policy = "login"
//!     key = "ip"
//! "#)?);
//! assert_eq!(reloader.applied(), 1);
//! # Ok::<(), redlimit::ConfigError>(())
//! ```

mod file;
#[cfg(unix)]
mod hangup;
mod reload;
mod watch;

pub use file::ConfigFile;
#[cfg(unix)]
pub use hangup::Hangup;
pub use reload::Reloader;
pub use watch::Watcher;
