//! A master found through Sentinels, followed across failovers without a restart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;
use redis::{Cmd, ConnectionAddr, ErrorKind, RedisResult, ServerErrorKind};

use super::script::evalsha;

/// The least time between two questions to the Sentinels while the master seems unwell.
const RESOLVE_INTERVAL: Duration = Duration::from_millis(200);

pub(super) struct SentinelBackend {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    config: ConnectionManagerConfig,
    /// The master the Sentinels named last, and a connection to it.
    current: RwLock<Option<(ConnectionAddr, ConnectionManager)>>,
    resolving: AtomicBool,
    started: Instant,
    last_resolve_ms: AtomicU64,
}

impl SentinelBackend {
    pub(super) fn new(sentinels: SentinelClient, config: ConnectionManagerConfig) -> Self {
        SentinelBackend {
            sentinels: tokio::sync::Mutex::new(sentinels),
            config,
            current: RwLock::new(None),
            resolving: AtomicBool::new(false),
            started: Instant::now(),
            last_resolve_ms: AtomicU64::new(0),
        }
    }

    /// Asks the Sentinels for the master; connects anew only if it moved.
    pub(super) async fn resolve(&self) -> RedisResult<ConnectionManager> {
        let client = self.sentinels.lock().await.async_get_client().await?;
        let addr = client.get_connection_info().addr().clone();
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if let Some((known, connection)) = current.as_ref() {
            if *known == addr {
                return Ok(connection.clone());
            }
            tracing::warn!(master = %address(&addr), "redis master moved (sentinel failover); following it");
        }
        let connection = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        *current = Some((addr, connection.clone()));
        Ok(connection)
    }

    pub(super) async fn run(self: &Arc<Self>, command: &Cmd) -> RedisResult<Vec<i64>> {
        let known = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, c)| c.clone());
        let mut connection = match known {
            Some(connection) => connection,
            None => self.resolve().await?,
        };
        // If this call never completes (the layer's deadline drops it: a frozen master), the
        // guard asks the Sentinels whether the master moved.
        let mut guard = Unfinished(Some(self));
        let result = evalsha(command, &mut connection).await;
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
