//! The three deployments behind one store: a standalone server, a Cluster, or a master found
//! through Sentinels. Each runs one script invocation and never replays it after an error that
//! may have followed its execution; each heals its connection (`heal`) when calls go
//! unanswered or the server refuses it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, FromRedisValue, RedisResult};

use super::cluster::ClusterDial;
use super::heal::{Dial, Healing};
use super::script::{Reply, evalsha, evalsha_reply};
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
    pub(super) async fn run<T: FromRedisValue + Send>(&self, command: &Cmd) -> RedisResult<T> {
        match self {
            Backend::Standalone(standalone) => {
                standalone
                    .call(0, |mut manager| async move {
                        evalsha(command, &mut manager).await
                    })
                    .await
            }
            // Boxed: the largest arm sets the size of this future, which every call's future
            // holds, and a standalone store's calls would carry the Cluster's and the
            // Sentinel's (over 1 KiB more per call, to allocate and move).
            Backend::Cluster(cluster) => boxed(cluster.run(command)).await,
            Backend::Sentinel(sentinel) => boxed(sentinel.run(command)).await,
        }
    }

    /// [`run`](Self::run), sent at `sent` (the caller's clock read): the result and how long
    /// it took, reading the clock once more. An `async` block, as `Batcher::run` is, for its
    /// size.
    #[allow(clippy::manual_async_fn)] // an `async fn` keeps its arguments twice
    pub(super) fn run_timed<'a, T: Reply + Send + 'a>(
        &'a self,
        command: &'a Cmd,
        sent: Instant,
    ) -> impl Future<Output = (RedisResult<T>, Duration)> + Send + 'a {
        async move {
            let (result, ended) = match self {
                Backend::Standalone(standalone) => {
                    standalone
                        .call_from(0, sent, |mut manager| async move {
                            evalsha_reply(command, &mut manager).await
                        })
                        .await
                }
                // Boxed, as in `run`.
                Backend::Cluster(cluster) => (boxed(cluster.run(command)).await, Instant::now()),
                Backend::Sentinel(sentinel) => (boxed(sentinel.run(command)).await, Instant::now()),
            };
            (result, ended.saturating_duration_since(sent))
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

    /// Loads `scripts` (`SCRIPT LOAD`, pipelined; in a Cluster on every master), so that the
    /// first calls naming them do not pay the two round trips of a `NOSCRIPT` and its reload.
    pub(super) async fn load(&self, scripts: &[&'static redis::Script]) -> RedisResult<()> {
        let mut pipeline = redis::pipe();
        for script in scripts {
            pipeline.load_script(script).ignore();
        }
        match self {
            Backend::Standalone(standalone) => {
                let (_, mut manager) = standalone.connection().await?;
                pipeline.query_async(&mut manager).await
            }
            Backend::Sentinel(sentinel) => sentinel.load(&pipeline).await,
            // A keyless pipeline has no slot to follow: each `SCRIPT LOAD` goes to every
            // master on its own.
            Backend::Cluster(cluster) => {
                let (_, connection) = cluster.connection().await?;
                let mut loads = tokio::task::JoinSet::new();
                for &script in scripts {
                    let mut connection = connection.clone();
                    loads.spawn(async move { script.load_async(&mut connection).await.map(drop) });
                }
                while let Some(loaded) = loads.join_next().await {
                    loaded.map_err(|err| std::io::Error::other(err.to_string()))??;
                }
                Ok(())
            }
        }
    }

    /// Asks the server behind failure domain `domain` for a `PING`, past the calls in flight:
    /// on a connection of its own (standalone: dialled for the probe; behind Sentinels: to the
    /// master they name now), or in a Cluster routed to the master of the domain's slots. A
    /// server that is frozen, black-holed or partitioned gives no answer; one that is only
    /// slow under load answers a `PING` at once. A standalone server that answers replaces the
    /// store's connection (as healing would after three missed calls).
    pub(super) async fn probe(&self, domain: u16) -> RedisResult<()> {
        match self {
            Backend::Standalone(standalone) => {
                let client = &standalone.dialer().client;
                let mut connection = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING")
                    .query_async::<()>(&mut connection)
                    .await?;
                // The layer probes only a silent or shut-off store: the server answers, so the
                // silence was the connection's.
                standalone.renew();
                Ok(())
            }
            Backend::Cluster(cluster) => {
                use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
                let (_, mut connection) = cluster.connection().await?;
                let slot = domain.saturating_mul(super::slot::SLOTS_PER_RANGE);
                let node = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                connection
                    .route_command(redis::cmd("PING"), RoutingInfo::SingleNode(node))
                    .await
                    .map(drop)
            }
            Backend::Sentinel(sentinel) => sentinel.probe().await,
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

/// `call` on the heap, its type erased (which also ends the compiler's `Send` inference there).
fn boxed<'a, T>(
    call: impl Future<Output = T> + Send + 'a,
) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    Box::pin(call)
}
