//! A Redis Cluster: redirects followed, the script loaded on every primary, and a call sent
//! again only after a refusal that proves it did not run.

use std::time::Duration;

use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind};

use super::script::evalsha;

/// How often a Cluster call is re-sent after a refusal that proves it did not run.
const CLUSTER_ATTEMPTS: u32 = 3;

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

    pub(super) async fn run(&self, command: &Cmd) -> RedisResult<Vec<i64>> {
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

/// Whether the server refused the call before running it, so sending it again cannot count
/// twice: a redirect while slots move, or a cluster that is briefly down.
fn refused_unrun(err: &RedisError) -> bool {
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
