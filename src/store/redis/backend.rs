//! The three deployments behind one store: a standalone server, a Cluster, or a master found
//! through Sentinels. Each runs one script invocation and never replays it after an error that
//! may have followed its execution.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, RedisError, RedisResult, ScriptInvocation, ServerErrorKind};

use super::sentinel::SentinelBackend;

/// How often a Cluster call is re-sent after a refusal that proves it did not run.
const CLUSTER_ATTEMPTS: u32 = 3;

#[derive(Clone)]
pub(super) enum Backend {
    Standalone(ConnectionManager),
    Cluster(Arc<ClusterBackend>),
    Sentinel(Arc<SentinelBackend>),
}

impl Backend {
    /// Runs the script once (`invoke_async` reloads it on `NOSCRIPT`, which proves it did not
    /// run, and retries once).
    pub(super) async fn run(
        &self,
        invocation: &ScriptInvocation<'static>,
    ) -> RedisResult<Vec<i64>> {
        match self {
            Backend::Standalone(connection) => {
                invocation.invoke_async(&mut connection.clone()).await
            }
            Backend::Cluster(cluster) => cluster.run(invocation).await,
            Backend::Sentinel(sentinel) => sentinel.run(invocation).await,
        }
    }
}

/// Whether the server refused the call before running it, so sending it again cannot count
/// twice: a redirect while slots move, or a cluster that is briefly down.
pub(super) fn refused_unrun(err: &RedisError) -> bool {
    err.redirect_node().is_some()
        || matches!(
            err.kind(),
            ErrorKind::Server(
                ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
            )
        )
}

/// A Cluster client, connected on first use. Its own retries are off (they would replay a
/// call after an I/O error); refusals that prove the call did not run are retried here, after
/// the client has refreshed its slot map.
pub(super) struct ClusterBackend {
    client: ClusterClient,
    connection: tokio::sync::OnceCell<ClusterConnection>,
}

impl ClusterBackend {
    pub(super) fn new(client: ClusterClient) -> Self {
        ClusterBackend {
            client,
            connection: tokio::sync::OnceCell::new(),
        }
    }

    pub(super) async fn connect(&self) -> RedisResult<ClusterConnection> {
        self.connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }

    async fn run(&self, invocation: &ScriptInvocation<'static>) -> RedisResult<Vec<i64>> {
        let mut connection = self.connect().await?;
        let mut attempt = 1;
        loop {
            match invocation.invoke_async(&mut connection).await {
                Err(err) if attempt < CLUSTER_ATTEMPTS && refused_unrun(&err) => {
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }
}
