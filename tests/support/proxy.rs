//! A TCP proxy on a free loopback port in front of a server, which can black-hole the
//! connections open at a moment: they stay open, every byte sent on them is read and dropped,
//! nothing comes back (no data, no FIN, no RST), as after a host vanished behind a NAT or a
//! proxy lost its upstream. Connections made afterwards are forwarded as usual.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// The proxy; stops (dropping every connection) when dropped.
pub(crate) struct Proxy {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    /// The black-hole switch of every connection accepted so far.
    switches: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    pub(crate) async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let upstream: SocketAddr = ([127, 0, 0, 1], upstream_port).into();
        let accepted = Arc::new(AtomicUsize::new(0));
        let switches: Arc<Mutex<Vec<Arc<AtomicBool>>>> = Arc::default();
        let task = tokio::spawn({
            let accepted = Arc::clone(&accepted);
            let switches = Arc::clone(&switches);
            async move {
                // Dropped with this task: aborting it ends every connection.
                let mut connections = JoinSet::new();
                while let Ok((client, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let hole = Arc::new(AtomicBool::new(false));
                    switches.lock().unwrap().push(Arc::clone(&hole));
                    connections.spawn(relay(client, upstream, hole));
                }
            }
        });
        Proxy {
            addr,
            accepted,
            switches,
            task,
        }
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The proxy's port.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Black-holes every connection open now; later ones are forwarded.
    pub(crate) fn black_hole(&self) {
        for hole in self.switches.lock().unwrap().iter() {
            hole.store(true, Ordering::SeqCst);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, hole: Arc<AtomicBool>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    tokio::join!(
        pump(from_client, to_server, &hole),
        pump(from_server, to_client, &hole),
    );
}

/// Copies `from` to `to` until `from` ends; once black-holed, reads and drops everything and
/// never closes `to` (closing would send a FIN).
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, hole: &AtomicBool) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if hole.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    if hole.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
}
