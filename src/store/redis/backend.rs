//! The three deployments behind one store: a standalone server, a Cluster, or a master found
//! through Sentinels. Each runs one script invocation and never replays it after an error that
//! may have followed its execution.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::aio::ConnectionManager;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind};

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
    /// Runs the script once (reloading it on `NOSCRIPT`, which proves it did not run, and
    /// retrying once).
    pub(super) async fn run(&self, command: &Cmd) -> RedisResult<Vec<i64>> {
        match self {
            Backend::Standalone(connection) => evalsha(command, &mut connection.clone()).await,
            Backend::Cluster(cluster) => cluster.run(command).await,
            Backend::Sentinel(sentinel) => sentinel.run(command).await,
        }
    }
}

/// Sends the `EVALSHA`; on `NOSCRIPT` (the script never ran) loads the script and sends it
/// once more, as `redis::Script::invoke_async` does, without copying the arguments again.
pub(super) async fn evalsha(
    command: &Cmd,
    connection: &mut impl ConnectionLike,
) -> RedisResult<Vec<i64>> {
    match command.query_async(connection).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            super::SCRIPT.load_async(connection).await?;
            command.query_async(connection).await
        }
        result => result,
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

    async fn run(&self, command: &Cmd) -> RedisResult<Vec<i64>> {
        let mut connection = self.connect().await?;
        let mut attempt = 1;
        loop {
            match evalsha(command, &mut connection).await {
                Err(err) if attempt < CLUSTER_ATTEMPTS && refused_unrun(&err) => {
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }
}
