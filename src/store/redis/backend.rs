//! The three deployments behind one store: a standalone server, a Cluster, or a master found
//! through Sentinels. Each runs one script invocation and never replays it after an error that
//! may have followed its execution; each heals its connection (`heal`) when calls go
//! unanswered or the server refuses it.

use std::sync::Arc;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, FromRedisValue, RedisResult};

use super::cluster::ClusterDial;
use super::heal::{Dial, Healing};
use super::script::evalsha;
use super::sentinel::SentinelBackend;

#[derive(Clone)]
pub(super) enum Backend {
    Standalone(Arc<Healing<Standalone>>),
    Cluster(Arc<Healing<ClusterDial>>),
    Sentinel(Arc<SentinelBackend>),
}

impl Backend {
    /// Runs the script once (reloading it on `NOSCRIPT`, which proves it did not run, and
    /// retrying once).
    pub(super) async fn run<T: FromRedisValue>(&self, command: &Cmd) -> RedisResult<T> {
        match self {
            Backend::Standalone(standalone) => {
                standalone
                    .call(0, |mut manager| async move {
                        evalsha(command, &mut manager).await
                    })
                    .await
            }
            Backend::Cluster(cluster) => cluster.run(command).await,
            Backend::Sentinel(sentinel) => sentinel.run(command).await,
        }
    }

    /// Connects now and proves the server answers.
    pub(super) async fn ping(&self) -> RedisResult<()> {
        match self {
            Backend::Standalone(standalone) => {
                let (_, mut manager) = standalone.connection().await?;
                redis::cmd("PING").query_async(&mut manager).await
            }
            Backend::Cluster(cluster) => cluster.connection().await.map(drop),
            Backend::Sentinel(sentinel) => sentinel.ping().await,
        }
    }
}

/// Dials a standalone server: a `ConnectionManager` that connects on first use (and
/// reconnects by itself after I/O errors).
pub(super) struct Standalone {
    pub(super) client: Client,
    pub(super) config: ConnectionManagerConfig,
}

impl Dial for Standalone {
    type Connection = ConnectionManager;

    async fn dial(&self) -> RedisResult<ConnectionManager> {
        ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
    }
}
