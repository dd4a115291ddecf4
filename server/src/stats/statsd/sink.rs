//! Where the statsd lines go: gostats' net sink, over TCP (one connection, made again when it
//! breaks) or UDP (datagrams of whole lines, at most 1432 bytes each: no fragmentation on a
//! 1500-byte MTU).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpStream, UdpSocket};

use crate::settings::StatsdProtocol;

/// gostats' dial and write deadlines.
const DIAL_TIMEOUT: Duration = Duration::from_millis(1500);
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// gostats' UDP buffer.
const DATAGRAM_BYTES: usize = 1432;

/// A statsd server, and the connection to it.
#[derive(Debug)]
pub(super) struct Sink {
    protocol: StatsdProtocol,
    host: String,
    port: u16,
    tcp: Option<TcpStream>,
    /// Whether the last send failed (logged once per outage).
    failing: bool,
}

impl Sink {
    pub(super) fn new(protocol: StatsdProtocol, host: String, port: u16) -> Self {
        Sink {
            protocol,
            host,
            port,
            tcp: None,
            failing: false,
        }
    }

    /// Sends `lines` (each ending in a line break); an error is logged at the first failure of
    /// an outage, and once it is over.
    pub(super) async fn send(&mut self, lines: &[u8]) -> io::Result<()> {
        let sent = match self.protocol {
            StatsdProtocol::Tcp => self.send_tcp(lines).await,
            StatsdProtocol::Udp => self.send_udp(lines).await,
        };
        match (&sent, self.failing) {
            (Err(e), false) => {
                tracing::warn!(
                    "statsd at {}:{} unreachable ({e}): the counts are kept and sent once it answers",
                    self.host,
                    self.port
                );
                self.failing = true;
            }
            (Ok(()), true) => {
                tracing::info!("statsd at {}:{} reachable again", self.host, self.port);
                self.failing = false;
            }
            _ => {}
        }
        sent
    }

    async fn send_tcp(&mut self, lines: &[u8]) -> io::Result<()> {
        let mut stream = match self.tcp.take() {
            Some(stream) => stream,
            None => {
                timeout(
                    DIAL_TIMEOUT,
                    TcpStream::connect((self.host.as_str(), self.port)),
                )
                .await?
            }
        };
        timeout(WRITE_TIMEOUT, stream.write_all(lines)).await?;
        self.tcp = Some(stream);
        Ok(())
    }

    async fn send_udp(&mut self, lines: &[u8]) -> io::Result<()> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .collect();
        // `localhost` is often ::1 first: a statsd on 127.0.0.1 (the usual) would never hear a
        // datagram sent there, and UDP cannot find out.
        let addr = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let local: SocketAddr = if addr.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(local).await?;
        for datagram in datagrams(lines) {
            socket.send_to(datagram, addr).await?;
        }
        Ok(())
    }
}

/// `lines` cut into datagrams of whole lines, each at most [`DATAGRAM_BYTES`] (a longer line
/// alone in its own).
fn datagrams(lines: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = lines;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = 0;
        for line in rest.split_inclusive(|b| *b == b'\n') {
            if end > 0 && end + line.len() > DATAGRAM_BYTES {
                break;
            }
            end += line.len();
        }
        let (datagram, after) = rest.split_at(end);
        rest = after;
        Some(datagram)
    })
}

async fn timeout<T>(limit: Duration, future: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(limit, future)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_hold_whole_lines_within_the_mtu() {
        let line = format!(
            "ratelimit.service.rate_limit.{}.total_hits:1|c\n",
            "x".repeat(60)
        );
        let lines = line.repeat(100);
        let cut: Vec<&[u8]> = datagrams(lines.as_bytes()).collect();
        assert!(cut.len() > 1);
        assert_eq!(cut.concat(), lines.as_bytes(), "nothing lost or reordered");
        for d in &cut {
            assert!(d.len() <= DATAGRAM_BYTES && d.ends_with(b"\n"));
        }
        let long = "y".repeat(2000) + "\n";
        assert_eq!(datagrams(long.as_bytes()).count(), 1);
    }
}
