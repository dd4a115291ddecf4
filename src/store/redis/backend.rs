//! The three deployments behind one store: a standalone server, a Cluster, or a master found
//! through Sentinels. Each runs one script invocation and never replays it after an error that
//! may have followed its execution.

use std::sync::Arc;

use redis::aio::ConnectionManager;
use redis::{Cmd, RedisResult};

use super::cluster::ClusterBackend;
use super::script::evalsha;
use super::sentinel::SentinelBackend;

#[derive(Clone)]
pub(super) enum Backend {
    Standalone(ConnectionManager),
    Cluster(Arc<ClusterBackend>),
    Sentinel(Arc<SentinelBackend>),
}

impl Backend {
    /// Runs the script once (reloading it on `NOSCRIPT`, which proves it did not run, and
    /// retrying once).
    pub(super) async fn run(&self, command: &Cmd) -> RedisResult<Vec<i64>> {
        match self {
            Backend::Standalone(connection) => evalsha(command, &mut connection.clone()).await,
            Backend::Cluster(cluster) => cluster.run(command).await,
            Backend::Sentinel(sentinel) => sentinel.run(command).await,
        }
    }

    /// Connects now and proves the server answers.
    pub(super) async fn ping(&self) -> RedisResult<()> {
        match self {
            Backend::Standalone(manager) => {
                redis::cmd("PING")
                    .query_async::<()>(&mut manager.clone())
                    .await
            }
            Backend::Cluster(cluster) => cluster.connect().await.map(drop),
            Backend::Sentinel(sentinel) => {
                let mut manager = sentinel.resolve().await?;
                redis::cmd("PING").query_async::<()>(&mut manager).await
            }
        }
    }
}
