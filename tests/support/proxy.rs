//! A TCP proxy on a free loopback port in front of a server, which can black-hole the
//! connections open at a moment: they stay open, every byte sent on them is read and dropped,
//! nothing comes back (no data, no FIN, no RST), as after a host vanished behind a NAT or a
//! proxy lost its upstream. Connections made afterwards are forwarded as usual. It can also
//! withhold the replies of the connections open at a moment (requests still reach the server,
//! which runs them) and then sever those connections: calls that ran whose answers were lost.

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
    /// The switches of every connection accepted so far.
    switches: Arc<Mutex<Vec<Arc<Switches>>>>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`.
    pub(crate) async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let upstream: SocketAddr = ([127, 0, 0, 1], upstream_port).into();
        let accepted = Arc::new(AtomicUsize::new(0));
        let switches: Arc<Mutex<Vec<Arc<Switches>>>> = Arc::default();
        let task = tokio::spawn({
            let accepted = Arc::clone(&accepted);
            let switches = Arc::clone(&switches);
            async move {
                // Dropped with this task: aborting it ends every connection.
                let mut connections = JoinSet::new();
                while let Ok((client, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let switch = Arc::new(Switches::default());
                    switches.lock().unwrap().push(Arc::clone(&switch));
                    connections.spawn(relay(client, upstream, switch));
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
        for switch in self.switches.lock().unwrap().iter() {
            switch.hole.store(true, Ordering::SeqCst);
        }
    }

    /// Drops every reply on the connections open now; their requests still reach the server.
    pub(crate) fn withhold_replies(&self) {
        for switch in self.switches.lock().unwrap().iter() {
            switch.withheld.store(true, Ordering::SeqCst);
        }
    }

    /// Closes the connections whose replies are withheld, both ways.
    pub(crate) fn sever_withheld(&self) {
        for switch in self.switches.lock().unwrap().iter() {
            if switch.withheld.load(Ordering::SeqCst) {
                switch.sever.send_replace(true);
            }
        }
    }
}

/// What the test has done to one connection.
#[derive(Default)]
struct Switches {
    hole: AtomicBool,
    withheld: AtomicBool,
    sever: tokio::sync::watch::Sender<bool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, switch: Arc<Switches>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    let mut sever = switch.sever.subscribe();
    let no_replies = AtomicBool::new(false);
    tokio::select! {
        _ = async {
            tokio::join!(
                pump(from_client, to_server, &switch.hole, &no_replies),
                pump(from_server, to_client, &switch.hole, &switch.withheld),
            )
        } => {}
        _ = sever.wait_for(|severed| *severed) => {}
    }
}

/// Copies `from` to `to` until `from` ends; once black-holed, reads and drops everything and
/// never closes `to` (closing would send a FIN); once `withheld`, drops what it reads.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    hole: &AtomicBool,
    withheld: &AtomicBool,
) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if hole.load(Ordering::SeqCst) || withheld.load(Ordering::SeqCst) {
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
