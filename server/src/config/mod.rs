//! The rate limit config: where it comes from, and the one place it is put in force, as
//! envoyproxy/ratelimit's config providers feed its service. A source reads each config and
//! counts its load: the runtime directory, polled (`files.rs`, `CONFIG_TYPE=FILE`), or the ADS
//! stream of an xDS server (`xds/`, `CONFIG_TYPE=GRPC_XDS_SOTW`). It hands each config that
//! loaded to [`InForce`] (`in_force.rs`), which puts it in the service and tells health, and
//! which answers calls as the Go service answers them with no config until the first.
//!
//! The sources know the consumer; the consumer knows no source.

mod files;
mod in_force;
mod xds;

use redlimit::rls::config::RlsConfig;
use tokio::task::JoinHandle;

use crate::settings::{ConfigType, Settings};

pub(crate) use in_force::{InForce, NO_CONFIG};

/// Where the config comes from (`CONFIG_TYPE`), checked, not yet started.
#[derive(Debug)]
pub(crate) enum Source {
    /// The runtime directory, and its fingerprint taken before its first read.
    Files { dir: files::ConfigDir, seen: u64 },
    /// An xDS server (its client's settings, boxed: the larger variant by far).
    Xds(Box<xds::Xds>),
}

impl Source {
    /// The source the settings name; settings that cannot work (an xDS server's bad URL or
    /// header) stop the start.
    pub(crate) fn from_settings(settings: &Settings) -> Result<Self, String> {
        match settings.config_type {
            ConfigType::GrpcXdsSotw => {
                let xds = xds::prepare(&settings.xds, settings.merge_domain_config)?;
                Ok(Source::Xds(Box::new(xds)))
            }
            ConfigType::File => {
                let dir = files::ConfigDir {
                    root: settings.runtime_root.clone(),
                    dir: settings.config_dir(),
                    ignore_dotfiles: settings.runtime_ignoredotfiles,
                    merge_domains: settings.merge_domain_config,
                };
                let seen = dir.fingerprint();
                Ok(Source::Files { dir, seen })
            }
        }
    }

    /// The config in force at start, and whether calls wait for a first one (the listeners do
    /// not): none yet from an xDS server; the files' config, or with
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG` (`force_start`) none when they did not load.
    pub(crate) fn initial(&self, force_start: bool) -> Result<(RlsConfig, bool), String> {
        let dir = match self {
            // None until the xDS server sends one.
            Source::Xds(_) => return Ok((RlsConfig::default(), true)),
            Source::Files { dir, .. } => dir,
        };
        let first = dir.load();
        files::record(&dir.dir, &first);
        match first {
            Ok(config) => Ok((config, false)),
            Err(e) if force_start => {
                tracing::warn!(
                    "starting without a config ({e}): calls are answered UNKNOWN until one loads"
                );
                Ok((RlsConfig::default(), true))
            }
            Err(e) => Err(format!("the config did not load: {e}")),
        }
    }

    /// Reads the configs that follow for ever, putting each that loads in force in `in_force`.
    pub(crate) fn start(self, in_force: InForce) -> JoinHandle<()> {
        match self {
            Source::Files { dir, seen } => files::watch(dir, seen, in_force),
            Source::Xds(xds) => xds.start(in_force),
        }
    }
}
