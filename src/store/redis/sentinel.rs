//! A master found through Sentinels, followed across failovers without a restart, and
//! reconnected (a fresh connection to the same master) when calls go unanswered or the master
//! refuses the connection, even if the Sentinels name the same master.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;
use redis::{Client, Cmd, ConnectionAddr, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use super::heal::{Dial, Healing};
use super::script::evalsha;

/// The least time between two questions to the Sentinels while the master seems unwell.
const RESOLVE_INTERVAL: Duration = Duration::from_millis(200);

pub(super) struct SentinelBackend {
    /// The master the Sentinels named last, and a connection to it.
    healing: Arc<Healing<SentinelDial>>,
    resolving: AtomicBool,
    started: Instant,
    last_resolve_ms: AtomicU64,
}

/// Dials the master: asks the Sentinels for it, then connects on first use.
struct SentinelDial {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
}

/// A master and a connection to it.
#[derive(Clone)]
struct Master {
    addr: ConnectionAddr,
    manager: ConnectionManager,
}

impl SentinelDial {
    /// A client for the master the Sentinels name now.
    async fn master(&self) -> RedisResult<Client> {
        self.sentinels.lock().await.async_get_client().await
    }

    fn connect(&self, client: Client) -> RedisResult<Master> {
        let addr = client.get_connection_info().addr().clone();
        let manager = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        Ok(Master { addr, manager })
    }
}

impl Dial for SentinelDial {
    type Connection = Master;

    async fn dial(&self) -> RedisResult<Master> {
        let client = self.master().await?;
        self.connect(client)
    }
}

impl SentinelBackend {
    pub(super) fn new(
        sentinels: SentinelClient,
        config: ConnectionManagerConfig,
        target: String,
    ) -> Self {
        let dial = SentinelDial {
            sentinels: tokio::sync::Mutex::new(sentinels),
            config,
        };
        SentinelBackend {
            healing: Arc::new(Healing::new(dial, target, 1)),
            resolving: AtomicBool::new(false),
            started: Instant::now(),
            last_resolve_ms: AtomicU64::new(0),
        }
    }

    /// Asks the Sentinels for the master; connects anew only if it moved.
    async fn resolve(&self) -> RedisResult<()> {
        let client = self.healing.dialer().master().await?;
        let addr = client.get_connection_info().addr();
        if let Some(known) = self.healing.current() {
            if known.addr == *addr {
                return Ok(());
            }
            tracing::warn!(master = %address(addr), "redis master moved (sentinel failover); following it");
        }
        let master = self.healing.dialer().connect(client)?;
        self.healing.install(master);
        Ok(())
    }

    /// Connects now (asking the Sentinels first) and proves the master answers.
    pub(super) async fn ping(&self) -> RedisResult<()> {
        let (_, mut master) = self.healing.connection().await?;
        redis::cmd("PING").query_async(&mut master.manager).await
    }

    /// Runs `pipeline` (script loads) on the master's connection.
    pub(super) async fn load(&self, pipeline: &redis::Pipeline) -> RedisResult<()> {
        let (_, mut master) = self.healing.connection().await?;
        pipeline.query_async(&mut master.manager).await
    }

    /// A `PING` to the master the Sentinels name now, on a connection of its own; if it
    /// answers, the store's connection (silent, or unused while the breaker was open) is
    /// replaced.
    pub(super) async fn probe(&self) -> RedisResult<()> {
        let client = self.healing.dialer().master().await?;
        let mut connection = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING")
            .query_async::<()>(&mut connection)
            .await?;
        self.healing.renew();
        Ok(())
    }

    pub(super) async fn run<T: FromRedisValue>(self: &Arc<Self>, command: &Cmd) -> RedisResult<T> {
        // If this call never completes (the layer's deadline drops it: a frozen master), the
        // guard asks the Sentinels whether the master moved.
        let mut guard = Unfinished(Some(self));
        let result = self
            .healing
            .call(0, |mut master| async move {
                evalsha(command, &mut master.manager).await
            })
            .await;
        match &result {
            Err(err) if master_may_have_moved(err.kind(), err.is_io_error()) => {}
            _ => guard.0 = None,
        }
        result
    }

    /// Re-resolves in the background: at most one question in flight, and not more often than
    /// every [`RESOLVE_INTERVAL`].
    fn re_resolve(self: &Arc<Self>) {
        let now_ms = self.started.elapsed().as_millis() as u64;
        let last = self.last_resolve_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) < RESOLVE_INTERVAL.as_millis() as u64 {
            return;
        }
        if self.resolving.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last_resolve_ms.store(now_ms, Ordering::Relaxed);
        let this = Arc::clone(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.resolving.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            if let Err(err) = this.resolve().await {
                tracing::debug!(%err, "asking the sentinels for the master failed");
            }
            this.resolving.store(false, Ordering::Release);
        });
    }
}

/// Host and port (a socket's path) of a master: what a log line may show of it.
fn address(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        // A kind of address this version does not know: say so rather than guess.
        _ => "<unknown address>".to_owned(),
    }
}

/// Errors after which the master may be another server now: lost connections, and a server
/// that says it is no (longer a) master.
fn master_may_have_moved(kind: ErrorKind, io: bool) -> bool {
    io || matches!(
        kind,
        ErrorKind::Io
            | ErrorKind::ClusterConnectionNotFound
            | ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
    )
}

/// Triggers a re-resolution when dropped while set.
struct Unfinished<'a>(Option<&'a Arc<SentinelBackend>>);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(backend) = self.0 {
            backend.re_resolve();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_master_is_shown_as_host_and_port() {
        let tcp = ConnectionAddr::Tcp("10.0.0.7".into(), 6379);
        assert_eq!(address(&tcp), "10.0.0.7:6379");
        let unix = ConnectionAddr::Unix("/run/redis.sock".into());
        assert_eq!(address(&unix), "/run/redis.sock");
    }
}
