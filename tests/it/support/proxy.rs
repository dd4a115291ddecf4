//! A TCP proxy on a free loopback port in front of a server: Redis a network away, in-process
//! (`tc netem` is not available to tests).
//!
//! - Distance: each direction is delayed by a fixed time plus a uniform jitter, order kept (a
//!   byte never overtakes an earlier one, as on TCP). [`Proxy::with_rtt`] halves a round trip
//!   over the two directions; [`Proxy::set_link`] changes it for open and later connections.
//!   Each wait is a kernel timer in Tokio's poller (no thread per wait), so the proxy costs the
//!   benches that share its cores little; chunks due at the same moment leave in one write.
//! - Freeze: nothing is delivered either way (bytes are held, and delivered in order on
//!   [`Proxy::thaw`]), as when the server is stopped with SIGSTOP or a link stalls.
//! - Black hole: the connections open at a moment stay open, every byte sent on them is read
//!   and dropped, nothing comes back (no data, no FIN, no RST), as after a host vanished behind
//!   a NAT or a proxy lost its upstream. Connections made afterwards are forwarded as usual.
//! - Withheld replies: requests on the connections open at a moment still reach the server,
//!   which runs them, but the answers are dropped; then [`Proxy::sever_withheld`] closes those
//!   connections: calls that ran whose answers were lost.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// One direction of the link: every chunk waits `delay` plus a uniform share of `jitter`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Link {
    pub(crate) delay: Duration,
    pub(crate) jitter: Duration,
}

impl Link {
    /// A one-way delay without jitter.
    pub(crate) fn delay(delay: Duration) -> Self {
        Link {
            delay,
            jitter: Duration::ZERO,
        }
    }

    /// This link with up to `jitter` more on each chunk.
    pub(crate) fn jitter(self, jitter: Duration) -> Self {
        Link { jitter, ..self }
    }
}

/// The proxy; stops (dropping every connection) when dropped.
pub(crate) struct Proxy {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    /// The switches of every connection accepted so far.
    switches: Arc<Mutex<Vec<Arc<Switches>>>>,
    shaping: Arc<Shaping>,
    task: JoinHandle<()>,
}

/// What applies to every connection, open or to come: the two directions' delays (µs) and
/// the freeze.
struct Shaping {
    up_us: AtomicU64,
    up_jitter_us: AtomicU64,
    down_us: AtomicU64,
    down_jitter_us: AtomicU64,
    frozen: watch::Sender<bool>,
}

impl Shaping {
    fn set(&self, up: Link, down: Link) {
        let us = |d: Duration| d.as_micros() as u64;
        self.up_us.store(us(up.delay), Ordering::SeqCst);
        self.up_jitter_us.store(us(up.jitter), Ordering::SeqCst);
        self.down_us.store(us(down.delay), Ordering::SeqCst);
        self.down_jitter_us.store(us(down.jitter), Ordering::SeqCst);
    }

    /// The delay and jitter (µs) of one direction.
    fn of(&self, direction: Direction) -> (u64, u64) {
        match direction {
            Direction::Up => (
                self.up_us.load(Ordering::Relaxed),
                self.up_jitter_us.load(Ordering::Relaxed),
            ),
            Direction::Down => (
                self.down_us.load(Ordering::Relaxed),
                self.down_jitter_us.load(Ordering::Relaxed),
            ),
        }
    }
}

#[derive(Clone, Copy)]
enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:upstream_port`, with no delay.
    pub(crate) async fn start(upstream_port: u16) -> Self {
        Proxy::start_with(upstream_port, Link::default(), Link::default()).await
    }

    /// Starts a proxy to `127.0.0.1:upstream_port` whose round trip is `rtt` (half each way).
    pub(crate) async fn with_rtt(upstream_port: u16, rtt: Duration) -> Self {
        Proxy::start_with(upstream_port, Link::delay(rtt / 2), Link::delay(rtt / 2)).await
    }

    /// Starts a proxy to `127.0.0.1:upstream_port` delaying client-to-server traffic by `up`
    /// and server-to-client traffic by `down`.
    pub(crate) async fn start_with(upstream_port: u16, up: Link, down: Link) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let upstream: SocketAddr = ([127, 0, 0, 1], upstream_port).into();
        let accepted = Arc::new(AtomicUsize::new(0));
        let switches: Arc<Mutex<Vec<Arc<Switches>>>> = Arc::default();
        let shaping = Arc::new(Shaping {
            up_us: AtomicU64::new(0),
            up_jitter_us: AtomicU64::new(0),
            down_us: AtomicU64::new(0),
            down_jitter_us: AtomicU64::new(0),
            frozen: watch::Sender::new(false),
        });
        shaping.set(up, down);
        let task = tokio::spawn({
            let accepted = Arc::clone(&accepted);
            let switches = Arc::clone(&switches);
            let shaping = Arc::clone(&shaping);
            async move {
                // Dropped with this task: aborting it ends every connection.
                let mut connections = JoinSet::new();
                let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
                while let Ok((client, _)) = listener.accept().await {
                    let _ = client.set_nodelay(true);
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let switch = Arc::new(Switches::default());
                    switches.lock().unwrap().push(Arc::clone(&switch));
                    seed = seed.wrapping_add(0x2545_f491_4f6c_dd1d);
                    connections.spawn(relay(client, upstream, switch, Arc::clone(&shaping), seed));
                }
            }
        });
        Proxy {
            addr,
            accepted,
            switches,
            shaping,
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

    /// Sets both directions' delays, for the connections open now and later (a chunk already
    /// on its way keeps its delivery time).
    pub(crate) fn set_link(&self, up: Link, down: Link) {
        self.shaping.set(up, down);
    }

    /// Sets the round trip to `rtt`, half each way, without jitter.
    pub(crate) fn set_rtt(&self, rtt: Duration) {
        self.set_link(Link::delay(rtt / 2), Link::delay(rtt / 2));
    }

    /// Delivers nothing either way, on open and new connections (new ones are accepted, as a
    /// stopped server's kernel accepts them), until [`Proxy::thaw`].
    pub(crate) fn freeze(&self) {
        self.shaping.frozen.send_replace(true);
    }

    /// Delivers what the freeze held, in order, and forwards as before.
    pub(crate) fn thaw(&self) {
        self.shaping.frozen.send_replace(false);
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
    sever: watch::Sender<bool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    client: TcpStream,
    upstream: SocketAddr,
    switch: Arc<Switches>,
    shaping: Arc<Shaping>,
    seed: u64,
) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    let mut sever = switch.sever.subscribe();
    let no_replies = AtomicBool::new(false);
    let up = Pump {
        hole: &switch.hole,
        dropped: &no_replies,
        shaping: &shaping,
        direction: Direction::Up,
        seed,
    };
    let down = Pump {
        hole: &switch.hole,
        dropped: &switch.withheld,
        shaping: &shaping,
        direction: Direction::Down,
        seed: seed.rotate_left(17) | 1,
    };
    tokio::select! {
        _ = async { tokio::join!(up.run(from_client, to_server), down.run(from_server, to_client)) } => {}
        _ = sever.wait_for(|severed| *severed) => {}
    }
}

/// Where a chunk waits for its time: a kernel timer (`timerfd`, ns-grained) in the runtime's
/// poller, set afresh per wait and read when it fires, so a wait ends as late as the runtime's
/// thread takes to wake (tens of µs on an idle core), never before, with no thread of its own. Tokio's timer alone rounds every deadline
/// up to its next millisecond tick, even one already due: it added 1–2 ms to each direction (a
/// "1 ms" round trip took 3.3 ms, one without delay 2 ms) and let a backlog out one chunk per
/// tick. A thread's sleep per chunk (what this replaced) was as precise but handed every chunk
/// to the blocking pool and back, two thread wake-ups more per chunk: the proxy's CPU per RLS
/// call in `benches/rls.rs` at 256 in flight was about twice what it is now
/// (`docs/bench/rls.md`).
struct Timer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<rustix::fd::OwnedFd>>,
}

impl Timer {
    #[cfg(target_os = "linux")]
    fn new() -> Timer {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .ok()
        // Deprecated as unsound for a type whose raw fd may change or close under the
        // registration; an `OwnedFd` it owns cannot, and `register` (its successor) is `unsafe`,
        // which this crate forbids.
        .and_then(|fd| {
            #[allow(deprecated)]
            tokio::io::unix::AsyncFd::new(fd).ok()
        });
        Timer { fd }
    }

    #[cfg(not(target_os = "linux"))]
    fn new() -> Timer {
        Timer {}
    }

    /// Returns at `at`, never before: to within a wake-up (else, without a kernel timer, within
    /// Tokio's timer's 1–2 ms).
    async fn wait_until(&self, at: Instant) {
        let rest = at.saturating_duration_since(Instant::now());
        if rest.is_zero() {
            return;
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.fd
            && Timer::wait_on(fd, rest).await.is_ok()
        {
            return;
        }
        tokio::time::sleep_until(at).await;
    }

    /// Sets the kernel timer `rest` from now and waits for it to fire.
    #[cfg(target_os = "linux")]
    async fn wait_on(
        fd: &tokio::io::unix::AsyncFd<rustix::fd::OwnedFd>,
        rest: Duration,
    ) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: i64::try_from(rest.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(rest.subsec_nanos()),
        };
        // Setting the timer also clears a count an earlier firing left unread.
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        timerfd_settime(fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        loop {
            let mut guard = fd.readable().await?;
            let mut count = [0_u8; 8];
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut count)?)) {
                Ok(read) => return read.map(drop),
                // A readiness left from an earlier wait: cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

/// One direction of one connection.
struct Pump<'a> {
    hole: &'a AtomicBool,
    /// Drop what is read (replies withheld).
    dropped: &'a AtomicBool,
    shaping: &'a Shaping,
    direction: Direction,
    seed: u64,
}

impl Pump<'_> {
    /// Copies `from` to `to` until `from` ends, each chunk delivered at its time (never before
    /// an earlier chunk) and not while frozen; once black-holed, reads and drops everything and
    /// never closes `to` (closing would send a FIN); once `dropped`, drops what it reads.
    async fn run(self, from: OwnedReadHalf, to: OwnedWriteHalf) {
        let (chunks, queue) = mpsc::unbounded_channel();
        tokio::join!(self.read(from, chunks), self.write(queue, to));
        if self.hole.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    async fn read(
        &self,
        mut from: OwnedReadHalf,
        chunks: mpsc::UnboundedSender<(Instant, Vec<u8>)>,
    ) {
        let mut rng = self.seed;
        let mut last = Instant::now();
        let mut buf = vec![0; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if self.hole.load(Ordering::SeqCst) || self.dropped.load(Ordering::SeqCst) {
                continue;
            }
            let (delay_us, jitter_us) = self.shaping.of(self.direction);
            let extra = if jitter_us == 0 {
                0
            } else {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % (jitter_us + 1)
            };
            let at = (Instant::now() + Duration::from_micros(delay_us + extra)).max(last);
            last = at;
            if chunks.send((at, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    }

    async fn write(
        &self,
        mut queue: mpsc::UnboundedReceiver<(Instant, Vec<u8>)>,
        mut to: OwnedWriteHalf,
    ) {
        let mut frozen = self.shaping.frozen.subscribe();
        let timer = Timer::new();
        // A chunk read from the queue that was not yet due when the last write went out.
        let mut next = None;
        while let Some((at, mut chunk)) = match next.take() {
            Some(chunk) => Some(chunk),
            None => queue.recv().await,
        } {
            timer.wait_until(at).await;
            if frozen.wait_for(|frozen| !*frozen).await.is_err() {
                return;
            }
            if self.hole.load(Ordering::SeqCst) {
                continue;
            }
            // Chunks already due go out with this one, in order, in one write.
            let now = Instant::now();
            while let Ok((at, more)) = queue.try_recv() {
                if at > now {
                    next = Some((at, more));
                    break;
                }
                chunk.extend_from_slice(&more);
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        if !self.hole.load(Ordering::SeqCst) {
            let _ = to.shutdown().await;
        }
    }
}
